"""Where an artifact lives: the axis beside the format (data_prep.backends). A backend names
its location kind; the runner and the monitor ask the location, never the backend's name,
for the files, the footprint, what cold and warm mean and how to get there, the device to
watch and the device to limit. Locations register themselves by kind, as backends do: a local
folder here; a Redis Cluster beside its backend (data_prep.redis_cluster.location).
"""
from pathlib import Path

from data_prep import cache, disk
from data_prep.errors import SourceError


class LocationError(SourceError):
    pass


REGISTRY = {}


def register(cls):
    REGISTRY[cls.name] = cls
    return cls


class Location:
    name = ""  # the kind a backend names (Backend.location) and the record says (location.kind)
    options = ()  # data_prep.options.Option: how a run reaches it (run.py flags); each says its
                  # key in describe() (recorded_as)

    def __init__(self, path, files, **options):
        unknown = set(options) - {o.name for o in self.options}
        if unknown:
            raise LocationError(f"{path}: a {self.name} takes no {', '.join(sorted(unknown))}")
        self.path, self.files = Path(path), list(files)

    def set_cache(self, state, cold_fallback=None, group=None):
        """Put the artifact in `state` (warm | cold); returns (how, resident fraction)."""
        raise NotImplementedError

    def resident_fraction(self):
        """The artifact's share in this machine's page cache now, or None where that means nothing."""
        return None

    def block_device(self):
        """The device the monitor watches; None: every disk."""
        return None

    def limit_target(self):
        """What an I/O limit applies to."""
        raise LocationError(f"read IOPS/bandwidth limits apply to a local disk, not to a {self.name}")

    def describe(self):
        raise NotImplementedError

    @classmethod
    def options_of(cls, description):
        """{option: value} that a recorded description says this location was reached with."""
        return {o.name: description[o.recorded_as] for o in cls.options
                if (description or {}).get(o.recorded_as) is not None}

    def explain(self, log_text):
        """What a failed run's log cannot say about this location (e.g. which server stands
        behind an address it names), or None."""
        return None

    def failover_phases(self, failover):
        """Where the pause of a failover the reader logged went, as the servers saw it ({} if
        they cannot say)."""
        return {}

    def close(self):
        pass


@register
class LocalFolder(Location):
    """Files in a folder of this machine. Cold: the page cache, dentries and inodes dropped
    (drop_caches, root) or, if the caller accepts it, the files' pages evicted (fadvise);
    warm: every byte read once. Either way the resident share is measured (mincore)."""
    name = "local"

    def set_cache(self, state, cold_fallback=None, group=None):
        """Put the artifact in `state` (warm | cold); returns (how, resident fraction). With a
        cgroup, warming reads inside it, so its memory limit bounds what stays cached."""
        return cache.set_and_measure(state, self.files, cold_fallback, group.enter if group else None)

    def resident_fraction(self):
        """The share in the page cache now (mincore) of the artifact's files that still exist."""
        return cache.residency(self.files, missing_ok=True)

    def block_device(self):
        return disk.block_device_of(self.path)

    def limit_target(self):
        """What an I/O limit applies to: the disk's major:minor."""
        return disk.disk_numbers_of(self.path)

    def describe(self):
        knob = disk.read_ahead_knob(self.path)
        return {"kind": self.name, "path": str(self.path), "device": self.block_device(),
                "filesystem": disk.filesystem_of(self.path),
                "read_ahead_kb": int(knob.read_text()) if knob.exists() else None}


def get(kind):
    if kind not in REGISTRY:
        raise LocationError(f"unknown location {kind!r}; known: {', '.join(REGISTRY)}")
    return REGISTRY[kind]


def of(backend, dest, options=None):
    """The location of `backend`'s artifact at `dest`, reached with `options` ({name: value})."""
    return get(backend.location)(dest, backend.files(dest), **(options or {}))
