"""The page cache: make it cold or warm, and measure how much of an artifact it holds.

Cold is the paper's `sync; echo 3 > /proc/sys/vm/drop_caches` (page cache, dentries and
inodes). Without the privilege for that, a run is refused unless the caller accepts the
weaker per-file posix_fadvise(DONTNEED), which is recorded as such. Either way the state is
then measured with mincore(2) over the artifact's files, never assumed.
"""
import ctypes
import ctypes.util
import mmap
import os
import subprocess
import sys
from pathlib import Path

from processes import child_setup

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
PAGE = mmap.PAGESIZE
DROP_CACHES = "/proc/sys/vm/drop_caches"


class CacheError(RuntimeError):
    pass


def resident_pages(path):
    """(resident, total) pages of one file in the page cache."""
    size = os.path.getsize(path)
    if size == 0:
        return 0, 0
    pages = (size + PAGE - 1) // PAGE
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), f"mmap {path}")
        try:
            vec = (ctypes.c_ubyte * pages)()
            if _libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), f"mincore {path}")
            return sum(b & 1 for b in vec), pages
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)


def residency(files, missing_ok=False):
    """Fraction of the artifact's pages that are in the page cache (0..1). missing_ok: skip
    files gone since they were listed (LevelDB deletes its log when it compacts it on open)."""
    resident = total = 0
    for f in files:
        if missing_ok and not os.path.exists(f):
            continue
        r, t = resident_pages(f)
        resident, total = resident + r, total + t
    return resident / total if total else 1.0


def can_drop_caches():
    return os.access(DROP_CACHES, os.W_OK)


def drop_caches():
    subprocess.run(["sync"], check=True)
    try:
        with open(DROP_CACHES, "w") as f:
            f.write("3\n")
    except OSError as e:
        raise CacheError(f"cannot write {DROP_CACHES} ({e.strerror}): a cold run needs root "
                         "(docker: --privileged); or accept --cold-fallback fadvise, "
                         "which is recorded and never reported as a true cold run") from e


def fadvise_dontneed(files):
    subprocess.run(["sync"], check=True)
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


# reads every file named on stdin (70,000 paths are more than a command line may hold)
_READ_ALL = "import sys\nfor p in sys.stdin.read().splitlines():\n    f = open(p, 'rb')\n    while f.read(1 << 22): pass\n"


def warm(files, enter=None):
    """Read every byte once, in a child process, so the artifact sits in the page cache.
    enter: a function that puts the child into the training's cgroup, so that the pages are
    charged to its memory limit as the training's own reads would be (read from outside, a
    warm artifact larger than the limit would stay cached whole, which a machine of that
    memory could not do). The reader is killed when this process is (a death signal)."""
    dies_with_us = child_setup()

    def setup():
        dies_with_us()
        if enter:
            enter()
    subprocess.run([sys.executable, "-c", _READ_ALL], input="\n".join(map(str, files)), text=True,
                   check=True, preexec_fn=setup)


def make_state(state, files, cold_fallback=None, enter=None):
    """Put the artifact's files in `state` ('warm' or 'cold'); return how that was done."""
    if state == "warm":
        warm(files, enter)
        return "read" if enter is None else "read in the training's cgroup"
    if state != "cold":
        raise ValueError(f"cache state must be warm or cold, not {state!r}")
    if can_drop_caches():
        drop_caches()
        return "drop_caches"
    if cold_fallback == "fadvise":
        fadvise_dontneed(files)
        return "fadvise"
    drop_caches()  # raises the clear error


def set_and_measure(state, files, cold_fallback=None, enter=None):
    """make_state, then the share of the artifact resident; returns (how, resident)."""
    how = make_state(state, files, cold_fallback, enter)
    resident = residency(files)
    if how == "drop_caches":
        # measuring opened every file and brought its dentry and inode back: drop those
        # (mincore faults no data pages in, so the measured residency still holds)
        drop_caches()
    return how, resident


DAMON_ADMIN = Path("/sys/kernel/mm/damon/admin/kdamonds")


def pageout_schemes():
    """(kdamond, context, scheme) folders of every DAMON pageout scheme a running kdamond holds."""
    for kdamond in sorted(DAMON_ADMIN.glob("[0-9]*")):
        if _read(kdamond / "state") != "on":
            continue
        for context in sorted(kdamond.glob("contexts/[0-9]*")):
            for scheme in sorted(context.glob("schemes/[0-9]*")):
                if _read(scheme / "action") == "pageout":
                    yield kdamond, context, scheme


def proactive_reclaim():
    """Reclaimers that evict page-cache pages without memory pressure, as the record shows
    them; [] when none runs. Some VMs (this project's CI machine among them) run a DAMON
    scheme that pages out file pages idle for about a minute: a warm artifact not read again
    within that time is partly cold when training reaches it."""
    found = []
    for _, context, scheme in pageout_schemes():
        aggregation_us = int(_read(context / "monitoring_attrs/intervals/aggr_us") or 0)
        min_age = int(_read(scheme / "access_pattern/age/min") or 0)
        found.append({"kind": "DAMON pageout", "operations": _read(context / "operations"),
                      "idle_seconds_at_least": round(min_age * aggregation_us / 1e6, 1),
                      "quota_bytes_per_second": _quota_per_second(scheme)})
    return found


FILTER_FIELDS = ("type", "matching", "allow", "memcg_path", "addr_start", "addr_end", "min", "max",
                 "damon_target_idx")
OURS = "/imgstore/"  # the memory cgroups this project makes (experiments.cgroup)


def filter_folder(scheme):
    """A scheme's filters (ops_filters since Linux 6.15, filters before), or None without any."""
    folder = scheme / "ops_filters" if (scheme / "ops_filters").is_dir() else scheme / "filters"
    return folder if (folder / "nr_filters").exists() else None


def exempt_from_pageout(memcg_path):
    """Keeps every DAMON pageout scheme off the pages of one memory cgroup (a filter put first:
    memcg, matching, not allowed), so that a run's cache holds what its memory limit allows and
    not what a host's proactive reclaimer leaves: a 2016 machine ran none, and on this project's
    CI VM one evicted PNGs between the epochs of a cold MNIST run at 287 IOPS (2.21 reads per file
    instead of 1.08, 559 s instead of 289). Returns (the schemes changed, a function that restores
    them); filters of runs that died before restoring (memory cgroups under OURS) are dropped."""
    by_kdamond = {}
    for kdamond, _, scheme in pageout_schemes():
        folder = filter_folder(scheme)
        if folder:  # a kernel without DAMOS filters: nothing can keep the scheme off
            kept = [f for f in _filters(folder) if not f.get("memcg_path", "").startswith(OURS)]
            by_kdamond.setdefault(kdamond, []).append((folder, kept))
    ours = {"type": "memcg", "memcg_path": memcg_path, "matching": "Y", "allow": "N"}
    changed = []
    for kdamond, schemes in by_kdamond.items():
        try:
            for folder, kept in schemes:
                _set_filters(folder, [ours] + kept)
            (kdamond / "state").write_text("commit")
        except OSError as e:
            for folder, kept in schemes:
                _set_filters(folder, kept)
            raise CacheError(f"cannot keep DAMON's pageout off memory cgroup {memcg_path} "
                             f"({e.filename}: {e.strerror})") from e
        changed += schemes

    def restore():
        for folder, kept in changed:
            _set_filters(folder, kept)
        for kdamond in by_kdamond:
            (kdamond / "state").write_text("commit")
    return [str(folder.relative_to(DAMON_ADMIN)) for folder, _ in changed], restore


def _filters(folder):
    count = int(_read(folder / "nr_filters") or 0)
    return [{k: _read(folder / str(i) / k) for k in FILTER_FIELDS if (folder / str(i) / k).exists()}
            for i in range(count)]


def _set_filters(folder, filters):
    (folder / "nr_filters").write_text(str(len(filters)))  # makes them anew, every field at its default
    for i, f in enumerate(filters):
        for key in FILTER_FIELDS:  # the type first: the fields that matter depend on it
            if f.get(key) and (folder / str(i) / key).exists() and (key != "memcg_path" or f["type"] == "memcg"):
                (folder / str(i) / key).write_text(f[key])


def _quota_per_second(scheme):
    size, reset_ms = _read(scheme / "quotas/bytes"), _read(scheme / "quotas/reset_interval_ms")
    return int(size) * 1000 // int(reset_ms) if size and reset_ms and int(reset_ms) else None


def _read(path):
    try:
        return path.read_text().strip()
    except OSError:
        return None
