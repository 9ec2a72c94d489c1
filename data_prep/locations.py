"""Where an artifact lives: the axis beside the format (data_prep.backends). A backend names
its location kind; the runner and the monitor ask the location, never the backend's name,
for the files, the footprint, what cold and warm mean and how to get there, the device to
watch and the device to limit.

Today one kind: a local folder. A server (a Redis Cluster, say) is another class here with
the same methods: footprint as the servers report it, its own meaning of cold, the network
interface to watch.
"""
import os
from pathlib import Path

from data_prep import cache


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

    def __init__(self, path, files):
        self.path, self.files = Path(path), list(files)

    def set_cache(self, state, cold_fallback=None, group=None):
        """Put the artifact in `state` (warm | cold); returns (how, resident fraction). With a
        cgroup, warming reads inside it, so its memory limit bounds what stays cached."""
        return cache.set_and_measure(state, self.files, cold_fallback, group.enter if group else None)

    def block_device(self):
        return block_device_of(self.path)

    def limit_target(self):
        """What an I/O limit applies to: the disk's major:minor."""
        return disk_numbers_of(self.path)

    def describe(self):
        return {"kind": self.kind, "path": str(self.path), "device": self.block_device(),
                "filesystem": filesystem_of(self.path)}


LOCATIONS = {"local": LocalFolder}


def of(backend, dest):
    """The location of `backend`'s artifact at `dest`."""
    return LOCATIONS[backend.location](dest, backend.files(dest))
