"""Resource limits for a training process through cgroup v2: memory.max (the page cache
is charged to it, so it bounds what can be cached), a cpuset, and io.max read limits on the
block device holding the data.

The paper2016 profile emulates the paper's Table 1 machine: 8 cores, 16 GB, and an HDD.
Its disk figures: 600 MB/s, the bandwidth the paper states for its machine (Section 3.1),
and 150 random read IOPS, what a 7,200-rpm disk delivers (~8.5 ms seek + ~4.2 ms half a
rotation per random read) with some help from command queueing.
"""
import os
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path(os.environ.get("IMGSTORE_CGROUP_ROOT", "/sys/fs/cgroup"))

PROFILES = {"paper2016": dict(cpus=8, mem_bytes=16 * 2**30, riops=150, rbps=600 * 10**6)}


class CgroupError(RuntimeError):
    pass


@dataclass
class Limits:
    mem_bytes: int = None
    cpus: int = None
    riops: int = None
    rbps: int = None
    profile: str = None

    def any(self):
        return any(v is not None for v in (self.mem_bytes, self.cpus, self.riops, self.rbps))

    @classmethod
    def from_args(cls, mem=None, cpus=None, riops=None, rbps=None, profile=None):
        base = dict(PROFILES[profile]) if profile else {}
        for k, v in dict(mem_bytes=parse_size(mem) if mem else None, cpus=cpus, riops=riops, rbps=rbps).items():
            if v is not None:
                base[k] = v
        return cls(profile=profile, **base)


def parse_size(text):
    units = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
    text = str(text).strip().lower().rstrip("ib").rstrip("b")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def _device_numbers(path):
    """major:minor of the whole disk holding `path` (io.max wants the disk, not a partition)."""
    st = os.stat(path)
    sys_dev = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    if (sys_dev / "partition").exists():
        return (sys_dev.resolve().parent / "dev").read_text().strip()
    return f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"


class Group:
    def __init__(self, path):
        self.path = path

    def enter(self):  # runs in the child between fork and exec
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def remove(self):
        try:
            self.path.rmdir()
        except OSError:
            pass


def create(limits, name, artifact):
    parent = CGROUP_ROOT / "imgstore"
    if not (CGROUP_ROOT / "cgroup.controllers").exists():
        raise CgroupError(f"{CGROUP_ROOT} is not a cgroup v2 hierarchy: limits need cgroup v2")
    try:
        parent.mkdir(exist_ok=True)
        for controller in ("memory", "cpuset", "io"):
            for level in (CGROUP_ROOT, parent):
                (level / "cgroup.subtree_control").write_text(f"+{controller}")
        path = parent / name
        path.mkdir()
        if limits.mem_bytes:
            (path / "memory.max").write_text(str(limits.mem_bytes))
            (path / "memory.swap.max").write_text("0") if (path / "memory.swap.max").exists() else None
        if limits.cpus:
            (path / "cpuset.cpus").write_text(f"0-{min(limits.cpus, os.cpu_count()) - 1}")
        if limits.riops or limits.rbps:
            parts = [_device_numbers(artifact)]
            parts += [f"riops={limits.riops}"] if limits.riops else []
            parts += [f"rbps={limits.rbps}"] if limits.rbps else []
            (path / "io.max").write_text(" ".join(parts))
    except OSError as e:
        raise CgroupError(f"cannot set limits through {CGROUP_ROOT} ({e.strerror}: {e.filename}); "
                          "--mem-limit/--cpus/--profile need root and a writable cgroup v2 "
                          "(docker: --privileged --cgroupns=host)") from e
    return Group(path)
