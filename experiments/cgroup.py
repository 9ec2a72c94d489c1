"""Resource limits for a training process through a cgroup, v2 or v1 behind one interface:
memory (the page cache is charged to it, so it bounds what can be cached), a cpuset, a CPU
quota (cores' worth of CPU time per period, shared by all the run's threads), and read IOPS /
bytes per second on the block device holding the data.

  v2: memory.max, cpuset.cpus, cpu.max "QUOTA PERIOD", io.max "MAJ:MIN riops=N rbps=N"
  v1: memory.limit_in_bytes, cpuset.cpus (+ cpuset.mems), cpu.cfs_quota_us / cfs_period_us,
      blkio.throttle.read_iops_device / read_bps_device, each in its controller's own hierarchy

A machine profile's limits (experiments.machines) start the Limits; runs under values other
than its own (an earlier fit, or an override) are labelled "NAME modified" by Limits.from_record.
"""
import json
import os
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from data_prep import cache
from experiments import machines
from processes import process_id

CGROUP_ROOT = Path(os.environ.get("IMGSTORE_CGROUP_ROOT", "/sys/fs/cgroup"))
# OWNERS/NAME: who made group NAME ([pid, start time]), written before the group (a cgroup's
# folder takes no file of ours). tmpfs, as the cgroups: gone with them at a reboot.
OWNERS = Path(os.environ.get("IMGSTORE_CGROUP_OWNERS", "/run/imgstore-cgroups"))
UNOWNED_AGE_S = 3600  # an empty group no owner file names (an older checkout's) is removed past this age

KNOBS = ("mem_bytes", "cpus", "cpu_quota", "riops", "rbps")
CPU_PERIOD_US = 100_000


class CgroupError(RuntimeError):
    pass


@dataclass
class Limits:
    mem_bytes: int = None
    cpus: int = None
    cpu_quota: float = None    # cores' worth of CPU time, all threads together (0.5: half of one core)
    riops: int = None
    rbps: int = None
    profile: str = None        # set only when every value of the profile was applied as it is
    modified_from: str = None  # the profile the values started from, when some were changed
    mem_per_solver_bytes: int = None  # added to mem_bytes for each solver beyond the first

    def any(self):
        return any(getattr(self, k) is not None for k in KNOBS)

    @classmethod
    def from_args(cls, mem=None, cpus=None, riops=None, rbps=None, profile=None, mem_per_solver=None,
                  cpu_quota=None):
        if cpu_quota is not None and not cpu_quota > 0:
            raise CgroupError(f"a CPU quota is a positive number of cores, not {cpu_quota}")
        values = dict(machines.get(profile).limits) if profile else {}
        asked = dict(mem_bytes=parse_size(mem) if mem else None, cpus=cpus, cpu_quota=cpu_quota, riops=riops, rbps=rbps,
                     mem_per_solver_bytes=parse_size(mem_per_solver) if mem_per_solver else None)
        values.update({k: v for k, v in asked.items() if v is not None})
        if values.get("mem_per_solver_bytes") and not values.get("mem_bytes"):
            raise CgroupError("a memory limit per further solver needs a memory limit to add to (--mem-limit)")
        return cls(**values)._named(profile)

    def for_solvers(self, n):
        """The limits of one cgroup holding n solvers: the memory limit grows by
        mem_per_solver_bytes for each solver beyond the first, so that what is left to the page
        cache stays what one solver had (the sweep then measures the data path, not the
        solvers' own memory crowding out the cache)."""
        if not self.mem_per_solver_bytes:
            return self
        return replace(self, mem_bytes=self.mem_bytes + (n - 1) * self.mem_per_solver_bytes)

    @classmethod
    def from_record(cls, d):
        """A record's limits; a profile name is kept only if the values are the profile's
        (records written before this check named the profile whatever was changed)."""
        d = d or {}
        known = {f.name for f in fields(cls)}
        limits = cls(**{k: v for k, v in d.items() if k in known and k not in ("profile", "modified_from")})
        return limits._named(d.get("profile") or d.get("modified_from"))

    def _named(self, profile):
        self.profile = self.modified_from = None
        if profile:
            same = (all(getattr(self, k) == v for k, v in machines.get(profile).limits.items())
                    and not self.mem_per_solver_bytes)
            self.profile, self.modified_from = (profile, None) if same else (None, profile)
        return self

    def as_dict(self):
        return asdict(self)

    def label(self):
        if self.profile:
            return f"{self.profile} profile"
        if not self.any():
            return "no limits"
        parts = []
        if self.cpus:
            parts.append(f"{self.cpus} cores")
        if self.cpu_quota:
            parts.append(f"CPU quota {self.cpu_quota:g} cores")
        if self.mem_bytes:
            parts.append(f"{self.mem_bytes / 2**30:g} GiB" + (
                f" + {self.mem_per_solver_bytes / 2**30:g} GiB per further solver" if self.mem_per_solver_bytes else ""))
        if self.riops:
            parts.append(f"{self.riops} read IOPS")
        if self.rbps:
            parts.append(f"{self.rbps / 1e6:g} MB/s")
        return ", ".join(parts) + (f" ({self.modified_from} modified)" if self.modified_from else "")


def parse_size(text):
    units = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
    text = str(text).strip().lower().rstrip("ib").rstrip("b")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


class Group:
    """A cgroup (one directory per v1 controller, one in v2) that a child process enters."""

    def __init__(self, paths, version, name=None):
        self.paths, self.version, self.name = paths, version, name
        self.applied = {}  # control file -> what was written, as the record shows it
        self.read_limits = []  # (control file, value): written by limit_reads()
        self.device = None  # "MAJ:MIN" of the device the read limits are on
        self._reads_at_limit = None
        self._restore_reclaim = None

    def limit_reads(self):
        """Write the read limits (IOPS, bytes/s). Apart from the rest so that a run's set-up
        (warming the cache) is not throttled: at 287 IOPS, warming MNIST's 70,002 PNGs takes
        about 4 minutes, long enough for a proactive reclaimer to evict the first of them again."""
        try:
            for path, value in self.read_limits:
                _write(path, value, self)
        except OSError as e:
            raise _refused(self.version, e) from e
        self.read_limits = []
        self._reads_at_limit = self.read_counts()

    def read_counts(self):
        """{"read_ios", "read_bytes"} the group's processes issued to the limited device so far, as
        the throttle counts them (bios, before the block layer merges them into device requests:
        what a read IOPS limit paces); None without read limits."""
        if self.device is None:
            return None
        if self.version == "v2":
            for line in (self.paths[0] / "io.stat").read_text().splitlines():
                dev, *pairs = line.split()
                if dev == self.device:
                    stat = dict(p.split("=") for p in pairs)
                    return {"read_ios": int(stat.get("rios", 0)), "read_bytes": int(stat.get("rbytes", 0))}
            return {"read_ios": 0, "read_bytes": 0}
        path = next(p for p in self.paths if p.parent.parent.name == "blkio")
        return {key: _v1_reads(path / name, self.device)
                for key, name in (("read_ios", "blkio.throttle.io_serviced"),
                                  ("read_bytes", "blkio.throttle.io_service_bytes"))}

    def throttled_reads(self):
        """read_counts() since limit_reads(): the reads the limit paced during the run."""
        if self._reads_at_limit is None:
            return None
        now = self.read_counts()
        return {k: now[k] - self._reads_at_limit[k] for k in now}

    def cpu_throttling(self):
        """{"periods", "throttled_periods", "throttled_seconds"} under the CPU quota so far (its
        cpu.stat); None without a quota."""
        path = next((p for p in self.paths if self.version == "v2" or p.parent.parent.name == "cpu"), None)
        if path is None or not any(k in self.applied for k in ("cpu.max", "cpu.cfs_quota_us")):
            return None
        stat = dict(line.split() for line in (path / "cpu.stat").read_text().splitlines() if len(line.split()) == 2)
        throttled = int(stat.get("throttled_usec", 0)) / 1e6 if self.version == "v2" else \
            int(stat.get("throttled_time", 0)) / 1e9
        return {"periods": int(stat.get("nr_periods", 0)), "throttled_periods": int(stat.get("nr_throttled", 0)),
                "throttled_seconds": round(throttled, 3)}

    def enter(self):  # runs in the child between fork and exec
        for path in self.paths:
            (path / "cgroup.procs").write_text(str(os.getpid()))

    def keep_from_proactive_reclaim(self, name):
        """The memory limit alone decides what the run's cache holds: DAMON pageout schemes are
        kept off this group's pages until remove() (data_prep.cache.exempt_from_pageout)."""
        try:
            changed, self._restore_reclaim = cache.exempt_from_pageout(f"/imgstore/{name}")
        except cache.CacheError as e:  # the run goes on as the host is, and its record says so
            self.applied["damon"] = f"pageout not kept off: {e}"
            return
        for scheme in changed:
            self.applied[f"damon {scheme}"] = f"memcg /imgstore/{name} first, not paged out"

    def remove(self):
        if self._restore_reclaim:
            try:
                self._restore_reclaim()
            except OSError:
                pass  # a filter left behind names a group under /imgstore/: the next run drops it
            self._restore_reclaim = None
        for path in self.paths:
            try:
                path.rmdir()
            except OSError:
                pass
        if self.name and not any(path.exists() for path in self.paths):
            (OWNERS / self.name).unlink(missing_ok=True)


def _v1_reads(path, device):
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == device and parts[1] == "Read":
            return int(parts[2])
    return 0


def _write(path, value, group=None):
    path.write_text(str(value))
    if group is not None:
        group.applied[path.name] = str(value)


def _create_v2(limits, name, device):
    parent = CGROUP_ROOT / "imgstore"
    parent.mkdir(exist_ok=True)
    for controller in ("memory", "cpuset", "cpu", "io"):
        for level in (CGROUP_ROOT, parent):
            _write(level / "cgroup.subtree_control", f"+{controller}")
    path = parent / name
    path.mkdir()
    group = Group([path], "v2", name)
    try:
        _limit_v2(group, path, limits, device)
    except OSError:
        group.remove()  # nothing half made is left behind
        raise
    return group


def _limit_v2(group, path, limits, device):
    if limits.mem_bytes:
        _write(path / "memory.max", limits.mem_bytes, group)
        if (path / "memory.swap.max").exists():
            _write(path / "memory.swap.max", 0, group)
    if limits.cpus:
        _write(path / "cpuset.cpus", _cpu_list(limits.cpus), group)
    if limits.cpu_quota:
        _write(path / "cpu.max", f"{_quota_us(limits.cpu_quota)} {CPU_PERIOD_US}", group)
    if limits.riops or limits.rbps:
        parts = [device] + ([f"riops={limits.riops}"] if limits.riops else []) + \
            ([f"rbps={limits.rbps}"] if limits.rbps else [])
        group.read_limits.append((path / "io.max", " ".join(parts)))


def _create_v1(limits, name, device):
    wanted = {"memory": limits.mem_bytes, "cpuset": limits.cpus, "cpu": limits.cpu_quota,
              "blkio": limits.riops or limits.rbps}
    group = Group([], "v1", name)
    try:
        for controller, needed in wanted.items():
            if needed:
                _make_v1(group, controller, limits, name, device)
    except OSError:
        group.remove()  # nothing half made is left behind
        raise
    return group


def _make_v1(group, controller, limits, name, device):
    parent = CGROUP_ROOT / controller / "imgstore"
    parent.mkdir(exist_ok=True)
    path = parent / name
    path.mkdir()
    group.paths.append(path)
    if controller == "cpuset":  # v1 cpusets start empty, at every level
        for level in (parent, path):
            for knob in ("cpuset.mems", "cpuset.cpus"):
                if not (level / knob).read_text().strip():
                    _write(level / knob, (CGROUP_ROOT / "cpuset" / knob).read_text().strip())
        _write(path / "cpuset.cpus", _cpu_list(limits.cpus), group)
    elif controller == "memory":
        _write(path / "memory.limit_in_bytes", limits.mem_bytes, group)
    elif controller == "cpu":
        _write(path / "cpu.cfs_period_us", CPU_PERIOD_US, group)
        _write(path / "cpu.cfs_quota_us", _quota_us(limits.cpu_quota), group)
    else:
        if limits.riops:
            group.read_limits.append((path / "blkio.throttle.read_iops_device", f"{device} {limits.riops}"))
        if limits.rbps:
            group.read_limits.append((path / "blkio.throttle.read_bps_device", f"{device} {limits.rbps}"))


def _quota_us(cores):
    return max(1000, round(cores * CPU_PERIOD_US))  # the kernel refuses quotas under 1 ms


def _cpu_list(cpus):
    return f"0-{min(cpus, os.cpu_count()) - 1}"


def remove_abandoned():
    """Removes this project's cgroups that no process is in and whose maker is gone (left by a run
    killed before it could remove them); returns their paths. A group another run made a moment
    ago, empty until its first solver enters it, is its maker's (_abandoned). Does nothing
    without the right to."""
    v = version()
    parents = ([CGROUP_ROOT / "imgstore"] if v == "v2" else
               [CGROUP_ROOT / c / "imgstore" for c in ("memory", "cpuset", "cpu", "blkio")] if v == "v1" else [])
    removed, emptied = [], set()
    for parent in parents:
        for path in sorted(p for p in parent.glob("*") if p.is_dir()) if parent.is_dir() else []:
            try:
                if not (path / "cgroup.procs").read_text().strip() and _abandoned(path):
                    path.rmdir()
                    removed.append(path)
                    emptied.add(path.name)
            except OSError:
                pass  # a group in use, or no right to remove it: left as it is
    for name in emptied:
        if not any((parent / name).exists() for parent in parents):
            (OWNERS / name).unlink(missing_ok=True)
    return removed


def _mark_owner(name):
    """OWNERS/NAME names this process as group NAME's maker, before the group is made."""
    OWNERS.mkdir(mode=0o700, parents=True, exist_ok=True)
    partial = OWNERS / f".{name}.partial{os.getpid()}"
    partial.write_text(json.dumps({"owner": process_id(os.getpid()), "pid_namespace": _pid_namespace()}) + "\n")
    os.replace(partial, OWNERS / name)


def _pid_namespace():
    return os.readlink("/proc/self/ns/pid")


def _abandoned(path):
    """Whether the empty group at `path` was left by a maker that is gone: its owner file names a
    process of this pid namespace that no longer runs; without one (or from another pid
    namespace, whose processes are not seen here), once the group is UNOWNED_AGE_S old."""
    try:
        marker = json.loads((OWNERS / path.name).read_text())
        owner = marker["owner"]
        if marker["pid_namespace"] == _pid_namespace() and isinstance(owner, list) and len(owner) == 2:
            return process_id(owner[0]) != owner
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return time.time() - path.stat().st_mtime > UNOWNED_AGE_S


def version():
    """'v2', 'v1' or None: the cgroup hierarchy mounted at CGROUP_ROOT."""
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        return "v2"
    if (CGROUP_ROOT / "memory" / "memory.limit_in_bytes").exists() or (CGROUP_ROOT / "blkio").is_dir():
        return "v1"
    return None


def create(limits, name, location, limit_reads_now=True):
    """A cgroup with `limits` for a run named `name`, I/O limited on `location`'s disk
    (later, by Group.limit_reads, where limit_reads_now is False)."""
    v = version()
    if v is None:
        raise CgroupError(f"{CGROUP_ROOT} holds no cgroup hierarchy (neither v2 nor v1): limits need one")
    device = location.limit_target() if (limits.riops or limits.rbps) else None
    try:
        _mark_owner(name)
        group = (_create_v2 if v == "v2" else _create_v1)(limits, name, device)
    except OSError as e:
        (OWNERS / name).unlink(missing_ok=True)
        raise _refused(v, e) from e
    group.device = device
    if limits.mem_bytes:
        group.keep_from_proactive_reclaim(name)
    if limit_reads_now:
        try:
            group.limit_reads()
        except CgroupError:
            group.remove()
            raise
    return group


def _refused(v, e):
    return CgroupError(f"cannot set limits through cgroup {v} at {CGROUP_ROOT} ({e.strerror}: {e.filename}); "
                       "--mem-limit/--cpus/--cpu-quota/--riops/--profile need root and a writable cgroup "
                       "(docker: --privileged --cgroupns=host)")
