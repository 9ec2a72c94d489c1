"""The disk under a local folder: what the paper's Table 2 counts (footprint), the device the
monitor watches, the whole disk's major:minor that an I/O limit names, its read-ahead."""
from contextlib import contextmanager
import os
from pathlib import Path


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


@contextmanager
def read_ahead_kb_set(path, kb=None):
    """For the duration: the read_ahead_kb of the disk holding `path` set to kb (None: left as
    it is), put back after; yields the value in force (text)."""
    knob = read_ahead_knob(path)
    before = knob.read_text().strip()
    if kb:
        knob.write_text(str(kb))
    try:
        yield knob.read_text().strip()
    finally:
        knob.write_text(before)


def filesystem_of(path):
    import psutil
    path, best = str(Path(path).resolve()), None
    for part in psutil.disk_partitions(all=True):
        if path.startswith(part.mountpoint) and (best is None or len(part.mountpoint) > len(best.mountpoint)):
            best = part
    return best.fstype if best else None
