"""Where an artifact lives: the axis beside the format (data_prep.backends). A backend names
its location kind; the runner and the monitor ask the location, never the backend's name,
for the files, the footprint, what cold and warm mean and how to get there, the device to
watch and the device to limit.

Two kinds: a local folder, and a Redis Cluster started by the project (its records in the
servers' memory, reached over loopback, through a delay proxy when a round trip is asked).
"""
import os
import time
from pathlib import Path

from data_prep import cache
from data_prep.errors import SourceError


def footprint(files):
    """Apparent bytes, allocated bytes and file count: the paper's Table 2."""
    apparent = allocated = 0
    for f in files:
        st = os.stat(f)
        apparent += st.st_size
        allocated += st.st_blocks * 512
    return {"apparent_bytes": apparent, "allocated_bytes": allocated, "files": len(files)}


def block_device_of(path):
    """The block device name (as in /proc/diskstats) holding `path`, or None."""
    st = os.stat(path)
    try:
        with open(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}/uevent") as f:
            for line in f:
                if line.startswith("DEVNAME="):
                    return line.strip().split("=", 1)[1]
    except OSError:
        return None
    return None


def disk_numbers_of(path):
    """major:minor of the whole disk holding `path` (I/O limits want the disk, not a partition)."""
    st = os.stat(path)
    sys_dev = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    if (sys_dev / "partition").exists():
        return (sys_dev.resolve().parent / "dev").read_text().strip()
    return f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"


def read_ahead_knob(path):
    """The sysfs file of the read_ahead_kb of the whole disk holding `path`: how much a page
    fault or a read brings in ahead, which decides much of a cold run."""
    disk = Path(f"/sys/class/block/{block_device_of(path)}")
    disk = disk.resolve().parent if (disk / "partition").exists() else disk
    return disk / "queue" / "read_ahead_kb"


def filesystem_of(path):
    import psutil
    path, best = str(Path(path).resolve()), None
    for part in psutil.disk_partitions(all=True):
        if path.startswith(part.mountpoint) and (best is None or len(part.mountpoint) > len(best.mountpoint)):
            best = part
    return best.fstype if best else None


class LocalFolder:
    """Files in a folder of this machine. Cold: the page cache, dentries and inodes dropped
    (drop_caches, root) or, if the caller accepts it, the files' pages evicted (fadvise);
    warm: every byte read once. Either way the resident share is measured (mincore)."""
    kind = "local"

    def __init__(self, path, files, rtt_ms=None):
        if rtt_ms is not None:
            raise LocationError(f"{path}: a round trip (--rtt) applies to data on a server, not a local folder")
        self.path, self.files = Path(path), list(files)

    def set_cache(self, state, cold_fallback=None, group=None):
        """Put the artifact in `state` (warm | cold); returns (how, resident fraction). With a
        cgroup, warming reads inside it, so its memory limit bounds what stays cached."""
        return cache.set_and_measure(state, self.files, cold_fallback, group.enter if group else None)

    def resident_fraction(self):
        """The share in the page cache now (mincore) of the artifact's files that still exist."""
        return cache.residency(self.files, missing_ok=True)

    def block_device(self):
        return block_device_of(self.path)

    def limit_target(self):
        """What an I/O limit applies to: the disk's major:minor."""
        return disk_numbers_of(self.path)

    def describe(self):
        knob = read_ahead_knob(self.path)
        return {"kind": self.kind, "path": str(self.path), "device": self.block_device(),
                "filesystem": filesystem_of(self.path),
                "read_ahead_kb": int(knob.read_text()) if knob.exists() else None}

    def close(self):
        pass


class RedisClusterLocation:
    """Records in a Redis Cluster's memory (data_prep.redis_cluster). An in-memory store has no
    cold reads; what can be cold is the servers: cold = every node stopped, the page cache
    dropped, the nodes restarted from their RDB files (the load is timed, not part of the run);
    warm = the cluster up and every record read once through the network. Clients reach the
    nodes directly or, with a round trip asked, through the delay proxy. The cluster is stopped
    after the run if this run started it."""
    kind = "redis-cluster"

    def __init__(self, path, files, rtt_ms=None):
        from data_prep.backends import redis_store
        self.path, self.files, self.rtt_ms = Path(path), [], rtt_ms
        self.cluster = redis_store.cluster_of(path)
        self.started, self.load_seconds, self.usage_before = False, None, None

    def set_cache(self, state, cold_fallback=None, group=None):
        from data_prep.backends import redis_store
        if state == "cold":
            self.cluster.stop()
            cache.drop_caches()
            t = time.time()
            self.started = self.cluster.start(self.rtt_ms)
            self.load_seconds = round(time.time() - t, 3)
            how = "servers restarted from their RDB files after drop_caches"
        else:
            self.started = self.cluster.start(self.rtt_ms)
            for phase in ("train", "test"):
                for _ in redis_store.records(self.path, phase):
                    pass
            how = "every record read once over the network"
        self.usage_before = self.cluster.server_usage()
        return how, 1.0  # the servers hold every record in memory either way

    def resident_fraction(self):
        return None  # records live in the servers' memory, not in this machine's page cache

    def block_device(self):
        return None  # the monitor then counts every disk

    def limit_target(self):
        raise LocationError("read IOPS/bandwidth limits apply to a local disk; a Redis Cluster is reached "
                            "over the network (use --rtt)")

    def describe(self):
        """The cluster, the round trip, and each server's CPU seconds since set_cache and its
        memory now."""
        servers = {}
        for port, now in self.cluster.server_usage().items():
            then = (self.usage_before or {}).get(port)
            servers[port] = None if not (now and then) else {
                "cpu_seconds": round(now["cpu_seconds"] - then["cpu_seconds"], 3), "rss_bytes": now["rss_bytes"]}
        return dict(self.cluster.describe(), kind=self.kind, root=str(self.cluster.root),
                    load_seconds=self.load_seconds, servers=servers)

    def close(self):
        if self.started:
            self.cluster.stop()


class LocationError(SourceError):
    pass


LOCATIONS = {"local": LocalFolder, "redis-cluster": RedisClusterLocation}


def of(backend, dest, rtt_ms=None):
    """The location of `backend`'s artifact at `dest`; rtt_ms: the round trip to a server."""
    return LOCATIONS[backend.location](dest, backend.files(dest), rtt_ms)
