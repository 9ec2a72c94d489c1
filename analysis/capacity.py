#!/usr/bin/env python3
"""How many accelerators one host keeps fed, from the records of runs with several solvers at
once (benchmarks/capacity.py, or run.py --concurrent N): per dataset, setup, backend and cache,
the group AU at each N (the mean of its solvers' AU; median over runs) and the largest N whose
median is >= 0.90, with the runs behind it; and the data path's images per second per core
(train images delivered over the CPU seconds of the threads that read and transform them;
the emulated compute sleeps), the figure that carries to a host with more cores; and the N that
figure allows (cores x images/s per core over 0.90 of what one accelerator eats; 0 when one
solver's data threads cannot feed its accelerator), so that an answer well
below it says something other than the CPU stopped the host (memory, a lock, the storage).

  python analysis/capacity.py RESULTS [--out DIR]   # e.g. the catalogue's ci-2core-capacity

Writes DIR/capacity.md, DIR/fig_capacity_DATASET.png and, where a published rate exists to set
ours against (FFCV's ImageNet loader), DIR/fig_per_core_DATASET.png (default DIR: RESULTS/report).
"""
import argparse
import collections
import csv
import dataclasses
import functools
import io
import signal
import statistics
import sys
import tarfile
import textwrap
from pathlib import Path

import catalogue
from analysis import readme
from analysis.report import pyplot, save
from data_prep import backends, datasets
from experiments import caffe_log, proctrack
from experiments.data_path_cpu import (THRESHOLD, cpu_allows, data_path_cpu, data_threads,  # noqa: F401 (offered here too)
                                       images_per_core_second, prefetch_cpu, servers_cpu_per_image, solvers,
                                       trained_iterations)
from experiments.data_path_cpu import groups as _groups, servers_cpu as _servers_cpu
from experiments.record import MISSED, load
from monitor import cpu_probe

README_BEGIN = "<!-- capacity tables: written by analysis/capacity.py RESULTS --readme -->"
README_END = "<!-- end of capacity tables -->"


@dataclasses.dataclass(frozen=True)
class OutsideReference:
    """A published data-loading rate per vCPU to set ours against (another loader, another host)."""
    name: str
    images_per_second: float  # all cores together, as published
    vcpus: int
    backends: tuple  # ours that do the nearest work: set against this one
    what: str
    source: str

    @property
    def per_vcpu(self):
        return self.images_per_second / self.vcpus


# FFCV's ImageNet data-loading benchmark (docs/benchmarks.rst, "Data loading benchmark results"):
# AWS p3dn.24xlarge (96 vCPUs), each image loaded, random-resized-cropped to 224 px and flipped.
FFCV_SOURCE = "https://docs.ffcv.io/benchmarks.html (AWS p3dn.24xlarge, 96 vCPUs)"
OUTSIDE_REFERENCES = {
    "imagenet": (
        OutsideReference("FFCV, raw 256 px from RAM", 172_801, 96, ("lmdb", "leveldb", "redis"),
                         "raw pixels, as Caffe's Datum records hold them", FFCV_SOURCE),
        OutsideReference("FFCV, JPEG 90% 512 px from RAM", 31_278, 96, ("images",),
                         "decoded images; ours decode 256 px PNGs, another codec and size", FFCV_SOURCE),
    ),
}


def setup_of(r):
    """What the runs at every N of one curve share: the setup without the number of solvers,
    and the iterations each solver trained."""
    return r.setup(solvers=False) + (f"max_iter {r.iterations_setting or 'stock'}",)


def group_aus(records):
    """{group id: (the group's AU, how many of its solvers failed)} over groups whose every
    solver has a record. The group's AU is the mean of its solvers' (MLPerf Storage's AU of a
    client); a solver that failed (LevelDB: its lock, held by another solver) fed no
    accelerator and counts 0."""
    found = {}
    for group, rs in _groups(records).items():
        if len(rs) == solvers(rs[0]):
            aus = [r.au if r.ok and r.au is not None else 0.0 for r in rs]
            found[group] = (statistics.fmean(aus), sum(1 for r in rs if not r.ok))
    return found


def curve_of(r):
    """The curve a run belongs to: (dataset, setup, backend, cache)."""
    return r.dataset, setup_of(r), r.backend, r.cache


def _cells(records):
    """{(dataset, setup, backend, cache, N): its records}."""
    cells = {}
    for r in records:
        cells.setdefault(curve_of(r) + (solvers(r),), []).append(r)
    return cells


def curves(records):
    """{(dataset, setup, backend, cache): {N: [group AU of each run]}}, setup without the
    number of solvers."""
    found = {}
    for key, rs in _cells(records).items():
        aus = sorted(au for au, _ in group_aus(rs).values())
        if aus:
            found.setdefault(key[:4], {})[key[4]] = aus
    return found


def lost(records):
    """{curve: the Ns at which a run lost a solver (killed, failed)}. MLPerf Storage's rule:
    every accelerator finishes its run, so no such N holds, whatever its group AU."""
    found = {}
    for key, rs in _cells(records).items():
        if any(failed for _, failed in group_aus(rs).values()):
            found.setdefault(key[:4], set()).add(key[4])
    return found


def failed_solvers(records):
    """How many solvers failed, over all runs of these records."""
    return sum(1 for r in records if not r.ok)


def run_log(results, run_dir):
    """A run's caffe.log: in its folder, or in DATASET/runs.tar.xz where a results folder
    committed its run folders packed ("" when neither has it)."""
    return run_file(results, run_dir, "caffe.log")


def run_file(results, run_dir, name):
    """The text of file `name` of a run's folder (caffe.log, monitor.csv): in the folder, or in
    DATASET/runs.tar.xz ("" when neither has it)."""
    path = results / run_dir / name
    if path.is_file():
        return path.read_text(errors="replace")
    dataset, *rest = Path(run_dir).parts or ("",)
    return _packed_texts(results / dataset / "runs.tar.xz").get(str(Path(*rest, name)), "")


PACKED_KEPT = ("/caffe.log", "/monitor.csv")


@functools.lru_cache(maxsize=None)
def _packed_texts(tar):
    """{runs/ID/NAME: its text} of the logs and monitor samples of a packed folder of runs (read once)."""
    if not tar.is_file():
        return {}
    with tarfile.open(tar) as t:
        return {m.name: t.extractfile(m).read().decode(errors="replace")
                for m in t.getmembers() if m.name.endswith(PACKED_KEPT)}


def failure_causes(records, results):
    """Why solvers failed, in words, most common first: the first fatal line of the solver's
    log, or else the signal that killed it (SIGKILL: the kernel's OOM killer, as a rule)."""
    causes = collections.Counter()
    for r in records:
        if r.ok:
            continue
        text = run_log(Path(results), r.run_dir or "")
        fatal = next(iter(caffe_log.fatal_messages(text)), None)
        if fatal is None and r.returncode is not None and r.returncode < 0:
            fatal = f"killed by {signal.Signals(-r.returncode).name}"
        causes[(fatal or f"exit {r.returncode}").split(" /")[0][:80]] += 1  # no paths: one cause, one line
    return [f"{n} x {cause}" for cause, n in causes.most_common()]


def largest_n(by_n, lost_at=frozenset()):
    """(N, its runs, N + 1's runs or None): the largest N measured whose median group AU is
    >= 0.90 and at which no run lost a solver (lost_at), below which every measured N also
    held; (0, None, N = 1's runs) when one solver already fails."""
    held = 0
    for n in sorted(by_n):
        if statistics.median(by_n[n]) < THRESHOLD or n in lost_at:
            break
        held = n
    return held, by_n.get(held), by_n.get(held + 1)


def first_failed(by_n, lost_at=frozenset()):
    """The smallest N measured above the answer (the N that failed), or None."""
    held = largest_n(by_n, lost_at)[0]
    return min((n for n in by_n if n > held), default=None)


def stopped_words(records, curve, by_n, lost_at, results=None):
    """"stopped by" for a curve: what ran out at the N that failed, or "-" when none failed."""
    failed = first_failed(by_n, lost_at)
    if failed is None:
        return "-"
    held = largest_n(by_n, lost_at)[0]
    at = {n: [r for r in records if curve_of(r) == curve and solvers(r) == n] for n in (held, failed)}
    return f"{stopped_by(at[failed], results, at[held])} at {failed}"


def bracketed(by_n, lost_at=frozenset()):
    """Whether the answer is known: N + 1 was run (and failed)."""
    return largest_n(by_n, lost_at)[2] is not None


def cpu_per_image(records):
    """Where the CPU went per train image, in microseconds, median over the complete groups of
    these records: (the solvers' processes, the servers holding the data); the processes' own
    accounting, which includes the kernel's network path each of them ran. None without figures."""
    split = []
    for group in _groups([r for r in records if r.ok]).values():
        if len(group) != solvers(group[0]):
            continue
        images = sum(trained_iterations(x) * datasets.get(x.dataset).model.batch for x in group)
        own = _solvers_cpu(group)
        if images and own:
            split.append((1e6 * own / images, 1e6 * _servers_cpu(group[0]) / images))
    return tuple(statistics.median(v[i] for v in split) for i in range(2)) if split else None


def _solvers_cpu(group):
    """CPU seconds of a group's solvers: each process's own, which counts threads that ended
    between the samples of thread_cpu_seconds (older records: the sampled threads' sum)."""
    return sum(_process_cpu(x) for x in group)


def _process_cpu(r):
    process = r.process or {}
    return max(process.get("cpu_seconds") or 0, sum((process.get("thread_cpu_seconds") or {}).values()))


THREAD_BUSY = 0.85    # a solver's data threads busy this share of the solver's time have run out
CORES_BUSY = 0.85     # the group's cores busy this share of its run (the processes' own CPU) have run out
STORAGE_BUSY = 0.90   # reads at this share of the cgroup's IOPS limit, or the device busy this share of the window
SERVER_BUSY = 0.85    # a Redis node busy this share of one core over the training window
RISE = 0.10           # a figure over its threshold at both N names the stopper only if it rose this much
CPU_DISAGREE = 0.15   # the host monitor's CPU shown beside the processes' own where they differ this much
MAJORITY = 0.5        # a class found in no more than this share of the runs says in how many


@dataclasses.dataclass
class Figures:
    """What ran out, measured over the runs of one N (each the median over its runs; None: not
    measured). thread: the busiest of the solvers' data threads (`busiest` says which, the
    prefetch thread or each thread of the pool beside it; `threads` of them in all), its CPU over
    the solver's time (on_solver: the solver thread's); cores: the share of the group's cores
    its solvers' processes and the Redis servers used, their own accounting (_processes_cpu): in
    the training window where the records keep the processes' CPU there
    (Record.training_cpu_seconds), else, in older records, over the group's run, start-up
    included; monitor: the host's CPU in the training window (the 1 Hz samples; it counts
    every process on the host, other users' too); paced: reads per second in the training
    window over the IOPS limit; device: the data device's busy time in the window; servers: the
    busiest Redis node's CPU over the window."""
    n: int = 0
    thread: float = None
    busiest: str = None
    threads: int = 1
    on_solver: bool = False
    layer: str = None
    cores: float = None
    monitor: float = None
    paced: float = None
    device: float = None
    servers: float = None


def figures_of(records, results=None):
    """Figures of the runs of one N (records: every solver of them; only finished ones count)."""
    ok = [r for r in records if r.ok]
    if not ok:
        return Figures(n=solvers(records[0]) if records else 0)
    layer = backends.get(ok[0].backend).layer
    on_solver = layer in ("HDF5Data", "MemoryData")
    groups = list(_groups(ok).values())
    windows = {id(g): training_window(g) for g in groups}
    samples = {id(g): window_samples(g, windows[id(g)], results) for g in groups}
    busiest = [(_solver_share(r), None) if on_solver else busiest_data_thread(r) for r in ok]
    return Figures(
        n=solvers(ok[0]), layer=layer, on_solver=on_solver, threads=data_threads(ok[0]),
        thread=_median_of(share for share, _ in busiest), busiest=_most_common(which for _, which in busiest),
        cores=_median_of(_processes_cpu(g) for g in groups),
        monitor=_median_of(_sampled_cpu(g[0], samples[id(g)]) for g in groups),
        paced=_median_of(_reads_at_limit(g, windows[id(g)], samples[id(g)]) for g in groups),
        device=_median_of(_sampled_mean(samples[id(g)], "device_busy") for g in groups),
        servers=_median_of(_busiest_server(g[0], windows[id(g)]) for g in groups))


def _most_common(names):
    found = collections.Counter(n for n in names if n).most_common(1)
    return found[0][0] if found else None


# the pool beside the prefetch thread, by the read option that asks for it: its threads' role, in words
POOLS = {"decode_threads": (proctrack.DECODE, "each decode thread"),
         "transform_threads": (proctrack.TRANSFORM, "each transform thread")}


def busiest_data_thread(r):
    """(share, which): the busiest of a solver's data threads, its CPU over the solver's time (1.0:
    one core), and which it is: "prefetch", or "each decode thread" / "each transform thread" for
    the pool beside it (its role's CPU per thread: roles() sums a role's threads); (None, None)
    unmeasured. An average over all of them would hide a prefetch thread at its limit beside a
    pool with room."""
    prefetch = r.prefetch_share()
    threads, options = data_threads(r), r.read_options or {}
    pool = next(((role, words) for option, (role, words) in POOLS.items() if (options.get(option) or 1) > 1), None)
    if threads == 1 or pool is None or not r.solver_seconds:
        return (prefetch, "prefetch") if prefetch is not None else (None, None)
    by_role = (r.process or {}).get("thread_cpu_seconds") or {}
    each = by_role.get(pool[0], 0) / (threads - 1) / r.solver_seconds
    return max([(prefetch or 0, "prefetch"), (each, pool[1])], key=lambda found: found[0])


def data_threads_share(r):
    """The data threads' CPU over the solver's time, per thread: 1.0 is every one of them busy
    (with one thread, the prefetch thread's share, Record.prefetch_share). The stoppers take the
    busiest thread's instead (busiest_data_thread)."""
    threads = data_threads(r)
    if threads == 1:
        return r.prefetch_share()
    used = data_path_cpu(r)
    return used / r.solver_seconds / threads if used is not None and r.solver_seconds else None


def training_window(group):
    """(start, end), seconds from the group's start, from the first solver's first training
    iteration to the last one's end (each solver's start-up and the test pass at iteration 0
    apart), or None without the records' timings."""
    spans = [(r.startup_seconds + (r.initial_test_seconds or 0), r.solver_seconds) for r in group
             if r.startup_seconds is not None and r.solver_seconds]
    if not spans:
        return None
    return min(s for s, _ in spans), max(s + d for s, d in spans)


def window_samples(group, window, results):
    """The monitor's rows (monitor.csv, one for the group, in its first solver's folder) taken
    inside the training window; None where the folder or window is not at hand or no sample
    fell inside (a window under a second)."""
    if window is None or results is None:
        return None
    text = next(filter(None, (run_file(Path(results), r.run_dir, "monitor.csv") for r in group if r.run_dir)), "")
    start, end, previous, rows = *window, 0.0, []
    for row in csv.DictReader(io.StringIO(text)):
        if not row.get("t"):
            continue
        t = float(row["t"])
        if start + 0.5 <= t <= end + 0.5:  # each row: the interval since the one before
            rows.append(dict(row, seconds=t - previous))
        previous = t
    return rows or None


def _sampled_mean(rows, column):
    values = [float(row[column]) for row in rows or [] if row.get(column) not in (None, "")]
    return statistics.fmean(values) if values else None


def _sampled_cpu(r, rows):
    """The share of the group's cores busy (user + system) in the window's samples: the host's,
    scaled to a cpuset limit."""
    user, system = _sampled_mean(rows, "cpu_user"), _sampled_mean(rows, "cpu_system")
    return None if user is None else _over_allowed(r, (user + (system or 0)) / 100)


def _over_allowed(r, host):
    cores, allowed = (r.environment or {}).get("cpu_cores"), (r.limits or {}).get("cpus")
    return min(1.0, host * cores / allowed) if cores and allowed and allowed < cores else host


def stopped_by(records, results=None, held=None):
    """What ran out at the N that failed (records: that N's runs), with the figures that show
    it at that N and at the N that held (held: its runs; [] where N = 0 held, None: nothing to
    compare with, the thresholds alone decide). The first that applies of: solvers lost (a
    lock, memory; with in how many runs where not in most), the busiest data thread busy,
    all cores busy, the page cache, the storage (paced reads at the IOPS limit, the device
    busy), the servers (a Redis node's CPU); else "not found" with the figures. A figure names
    its class only where it crossed its threshold at the N that failed and not at the N that
    held, or rose by RISE since. The CPU measure is the processes' own (Figures.cores); the
    host monitor's, in the training window, is shown beside it where they differ by
    CPU_DISAGREE or more. Host-device copies are never named: no record measures their share
    of the solver's time."""
    if not records:
        return "not found (no runs)"
    lost_solvers = _lost_words_of(records, results)
    if lost_solvers:
        return lost_solvers
    ok = [r for r in records if r.ok]
    at, before = figures_of(ok, results), (figures_of(held, results) if held is not None else None)
    if before is not None and not held:
        before = None  # N = 0 held: no solver ran, the thresholds alone decide
    named = _first_named(_classes(at), at, before) or _page_cache_squeezed(held or [], ok) or \
        _first_named(_late_classes(at), at, before)
    if named:
        return named
    shown = [f"{_label(at, name, label)} {_both(at, before, name)}" for name, label in _SHOWN
             if getattr(at, name) is not None and (name != "monitor" or _cpu_note(at))]
    return f"not found ({'; '.join(shown) or 'no figures'})"


_SHOWN = (("thread", "thread"), ("cores", "cores"), ("monitor", "the host monitor's CPU in training"),
          ("paced", "IOPS limit"), ("device", "device"),
          ("servers", "server"))


def _label(at, name, label):
    """A figure's label in "not found (...)"; the data threads' names the busiest where there are several."""
    if name != "thread" or at.on_solver or at.threads == 1 or not at.busiest:
        return label
    return "prefetch thread" if at.busiest == "prefetch" else at.busiest


def _classes(at):
    """(figure, threshold, the class's words up to its figures) decided before the page cache."""
    thread = (f"one thread (solver thread, {at.layer} " if at.on_solver else
              "one thread (prefetch " if at.threads == 1 else f"data threads ({at.busiest} ")
    return (("thread", THREAD_BUSY, thread), ("cores", CORES_BUSY, "all cores (" + _cpu_note(at)))


def _late_classes(at):
    return (("paced", STORAGE_BUSY, "storage (IOPS limit, "), ("device", STORAGE_BUSY, "storage (device busy "),
            ("servers", SERVER_BUSY, "the servers (a Redis node "))


def _cpu_note(at):
    """The host monitor's CPU in the training window where it differs from the processes' own
    by CPU_DISAGREE or more (other load on the host, or a start-up unlike the training), else ''."""
    if at.cores is not None and at.monitor is not None and abs(at.cores - at.monitor) >= CPU_DISAGREE:
        return f"the host monitor's {min(at.monitor, 1):.0%} in training; the processes' own "
    return ""


def _first_named(classes, at, before):
    """The first of (figure, threshold, words) whose figure discriminates, in words, or None."""
    for name, threshold, words in classes:
        if _discriminates(getattr(at, name), getattr(before, name) if before else None, threshold, before is not None):
            return f"{words}{_both(at, before, name)})"
    return None


def _discriminates(failed, held, threshold, compared):
    """Whether a figure names its class: over the threshold at the N that failed, and (where an
    N that held is given) under it there or risen by RISE since (unmeasured there: not shown)."""
    if failed is None or failed < threshold:
        return False
    if not compared:
        return True
    return held is not None and (held < threshold or failed - held >= RISE)


def _both(at, before, name):
    """'97% at 19, 80% at 18' (the N that held: '-' where not measured); without an N that held,
    '97%'. The data threads' figure ends with how many threads the solver had."""
    value = getattr(at, name)
    text = f"{min(value, 1):.0%}"
    if before is not None:
        held = getattr(before, name)
        text += f" at {at.n}, {'-' if held is None else f'{min(held, 1):.0%}'} at {before.n}"
    if name == "thread" and not at.on_solver:
        text += f", {at.threads} thread{'s' * (at.threads > 1)}"
    return text


def _lost_words_of(records, results):
    """Solvers lost at this N (a lock, memory, other failures), with in how many of the runs
    where not in most of them; "" where none was lost."""
    failed = [r for r in records if not r.ok]
    if not failed:
        return ""
    causes = failure_causes(records, results) if results else []
    refused = sum(int(c.split(" x ")[0]) for c in causes if "Failed to open leveldb" in c)
    killed = [r for r in failed if r.returncode == -signal.SIGKILL]
    if refused:
        return f"a lock (LevelDB's: {refused} of {len(records)} solvers refused{_minority(records, failed)})"
    if killed:
        return f"memory (OOM killer: {len(killed)} of {len(records)} solvers{_minority(records, killed)})"
    return f"solvers failed ({'; '.join(causes) or failed_solvers(records)}{_minority(records, failed)})"


def _minority(records, hit):
    """', in 1 of 3 runs' where the runs that lost solvers are not most of the runs, else ''."""
    runs, hit_runs = _groups(records), _groups(hit)
    return f", in {len(hit_runs)} of {len(runs)} runs" if len(hit_runs) <= MAJORITY * len(runs) else ""


RESIDENCY_FALL = 0.20  # the data's page-cache residency after training fell this much from N to N + 1 ...
READS_RISE = 1.5       # ... and the device reads per image trained rose this many times: the cache no longer holds it


def _page_cache_squeezed(held, failed):
    """"memory (page cache: ...)" when, from the N that held to the N that failed, the data's
    residency after training fell and the device read more per image trained; else None."""
    held, failed = [r for r in held if r.ok], [r for r in failed if r.ok]
    before, after = (_median_of(r.cache_resident_fraction_after for r in rs) for rs in (held, failed))
    reads_before, reads_after = (_median_of(_device_bytes_per_image(g) for g in _groups(rs).values())
                                 for rs in (held, failed))
    if None in (before, after, reads_before, reads_after) or before - after < RESIDENCY_FALL:
        return None
    if reads_after <= READS_RISE * reads_before or reads_after == 0:
        return None
    return (f"memory (page cache: {before:.0%} -> {after:.0%} of the data resident after training, "
            f"device reads {reads_before / 1024:,.1f} -> {reads_after / 1024:,.1f} KiB per image)")


def _device_bytes_per_image(group):
    """The data device's bytes read during a group's run over the images its solvers trained on."""
    r = group[0]
    total = (r.monitor or {}).get("read_bytes_total")
    images = sum(x.iterations or 0 for x in group) * datasets.get(r.dataset).model.batch
    return total / images if total is not None and images else None


def _solver_share(r):
    seconds = ((r.process or {}).get("thread_cpu_seconds") or {}).get(proctrack.SOLVER)
    return seconds / r.solver_seconds if seconds is not None and r.solver_seconds else None


def _median_of(values):
    found = [v for v in values if v is not None]
    return statistics.median(found) if found else None


def _processes_cpu(group):
    """The share of the group's cores its solvers' processes (and the Redis servers, on the
    same host) used, their own accounting: in the training window (training_window) where each
    solver's record keeps its CPU there (Record.training_cpu_seconds), else over the group's
    run, start-up included (records made before that field). The servers' CPU is theirs since
    the cache was set either way (their replies to the initial test pass included): no record
    splits it at the first iteration."""
    r = group[0]
    cores = min(filter(None, ((r.environment or {}).get("cpu_cores"), (r.limits or {}).get("cpus"))), default=None)
    window, training = training_window(group), [x.training_cpu_seconds for x in group]
    if window and None not in training:
        used, seconds = sum(training) + _servers_cpu(r), window[1] - window[0]
    else:
        used, seconds = _solvers_cpu(group) + _servers_cpu(r), max(x.wall_seconds or 0 for x in group)
    return min(1.0, used / (seconds * cores)) if cores and seconds > 0 and used else None


def _reads_at_limit(group, window, rows=None):
    """The group's reads per second in the training window over its cgroup's read IOPS limit
    (None without a limit or a window). With the monitor's samples: the read requests they
    counted on the data's device in the window, per second, times the reads the limit paced per
    request the device counted over the run where that is above 1 (the limit counts reads
    before the block layer merges them). Without: the reads the limit paced over the run times
    the share of the solvers' bytes read in training, over the window's length."""
    r = group[0]
    limits = r.limits or {}
    paced, riops = (limits.get("throttled_reads") or {}).get("read_ios"), limits.get("riops")
    if not (paced and riops and window and window[1] > window[0]):
        return None
    requests = (r.monitor or {}).get("read_requests_total")
    if rows and requests:
        per_request = max(1.0, paced / requests)
        counted = sum(float(row.get("read_requests") or 0) for row in rows)
        return counted * per_request / sum(row["seconds"] for row in rows) / riops
    return paced * _training_read_share(group) / (window[1] - window[0]) / riops


def _training_read_share(group):
    """The share of the group's solvers' bytes read that they read while training (1 where the
    record does not split its reads by phase)."""
    total = sum((x.process or {}).get("read_bytes") or 0 for x in group)
    training = [(x.process or {}).get("read_bytes_training") for x in group]
    if not total or None in training:
        return 1.0
    return min(1.0, sum(training) / total)


def _busiest_server(r, window):
    """The busiest Redis node's CPU seconds over the training window's length (its CPU is its
    replies: start-up loads nothing into it)."""
    servers = ((r.location or {}).get("servers") or {}).values()
    used = [s["cpu_seconds"] for s in servers if s]
    length = window[1] - window[0] if window else r.wall_seconds
    return max(used) / length if used and length else None


def probe_note(records):
    """Where a curve's runs carry CPU probes (monitor/cpu_probe.py) further apart than one host's
    noise allows, they may come from hosts of different speed: say so, with the spread."""
    found = cpu_probe.spread(cpu_probe.rate(r.environment) for r in records)
    if found is None:
        return ""
    return f"; host CPU probes differ {found:.0%}: not one host's answer" if found > cpu_probe.SAME_HOST_SPREAD else ""


def table(records):
    rows = ["| dataset | setup | backend | cache | largest N at AU >= 0.90 | its group AU (median, n) | "
            "N + 1 (median, n) | Ns measured | images/s per core | N the data path's CPU allows | failures | stopped by |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lost_at = lost(records)
    for key, by_n in sorted(curves(records).items(), key=_order):
        dataset, setup, backend, cache = key
        n, at, above = largest_n(by_n, lost_at.get(key, ()))
        mine = [r for r in records if curve_of(r) == key]
        rate = images_per_core_second(mine)
        rows.append(f"| {dataset} | {' / '.join(setup)} | {backend} | {cache}{missed_state(mine, n)} | "
                    f"{n}{'' if bracketed(by_n, lost_at.get(key, ())) else ' (not bracketed)'} | {_cell(at)} | "
                    f"{_cell(above)} | "
                    f"{', '.join(map(str, sorted(by_n)))} | {f'{rate:,.0f}' if rate else '-'} | {_allows(mine)} |"
                    + (f" {failed_solvers(mine)} solvers failed" if failed_solvers(mine) else " -")
                    + f"{probe_note(mine)} | {stopped_words(mine, key, by_n, lost_at.get(key, ()))} |")
    return "\n".join(rows) + "\n"


def compact(records, results=None):
    """Per dataset and setup, one row per backend: the largest N warm and cold with the median
    group AU at N and at N + 1 (runs), and images/s per core (README)."""
    found, lost_at = curves(records), lost(records)
    out = []
    for dataset, setup in sorted({(k[0], k[1]) for k in found}):
        n_runs = sorted({len(v) for k, by_n in found.items() if k[:2] == (dataset, setup) for v in by_n.values()})
        out += [f"{datasets.get(dataset).label} on {' / '.join(setup)}; n = {n_runs[0]}..{n_runs[-1]} runs per N:", "",
                "| backend | warm: largest N | AU at N / N + 1 | cold: largest N | AU at N / N + 1 |",
                "|---|---|---|---|---|"]
        why = ["", "| backend | images/s per core (warm, cold) | N the data path's CPU allows (warm, cold) "
                   "| stopped by (warm; cold) |", "|---|---|---|---|"]  # a second table: each fits the page
        for backend in backends.REGISTRY:
            cells, rates, allows, stops = [], [], [], []
            for cache in ("warm", "cold"):
                by_n = found.get((dataset, setup, backend, cache))
                mine = [r for r in records if curve_of(r) == (dataset, setup, backend, cache)]
                rate = images_per_core_second(mine)
                rates.append(f"{rate:,.0f}" if rate else "-")
                allows.append(_allows(mine))
                if not by_n:
                    cells += ["-", "-"]
                    continue
                lost_here = lost_at.get((dataset, setup, backend, cache), set())
                stops.append(stopped_words(mine, (dataset, setup, backend, cache), by_n, lost_here, results))
                n, at, above = largest_n(by_n, lost_here)
                cells += [(f"**{n}**" if bracketed(by_n, lost_here) else
                           f">= {n} (the largest N run)" if n == max(by_n) else f">= {n} ({n + 1} not run)")
                          + _lost_words(n + 1, lost_here, [r for r in mine if solvers(r) == n + 1], results)
                          + probe_note(mine) + missed_state(mine, n),
                          f"{_median(at)} / {_median(above)}" + few_runs(at, above)]
            if any(c != "-" for c in cells):
                out.append(f"| {backend} | {' | '.join(cells)} |")
                why.append(f"| {backend} | {', '.join(rates)} | {', '.join(allows)} | {'; '.join(stops) or '-'} |")
        out += why + [""]
        if (dataset, setup) == max(k[:2] for k in found if k[0] == dataset):  # under its last table
            out += _cannot_hold(dataset, {k[2] for k in found if k[0] == dataset})
    return "\n".join(out)


def _lost_words(n, lost_here, records, results):
    """Why N did not hold when a run lost solvers there: how many, and the causes."""
    if n not in lost_here:
        return ""
    why = "; ".join(failure_causes(records, results)) if results else f"{failed_solvers(records)} failed"
    return f" (at {n}: {why})"


def _cannot_hold(dataset, swept):
    """A line per reason that a backend with no sweep of the dataset cannot hold it at all
    (the registry's own reason), so that the tables read as complete without it."""
    ds = datasets.get(dataset)
    reasons = {}
    for name, backend in backends.REGISTRY.items():
        why = None if name in swept else backend.unsupported(ds)
        if why:
            reasons.setdefault(why, []).append(name)
    return [f"Not in the {ds.label} tables: {', '.join(names)}: {why}." for why, names in reasons.items()] + \
        ([""] if reasons else [])


def per_core_rates(records):
    """{(dataset, setup, backend): {cache: images/s per core}} over every run of each curve."""
    rates = collections.defaultdict(dict)
    for key in curves(records):
        dataset, setup, backend, cache = key
        rate = images_per_core_second([r for r in records if curve_of(r) == key])
        if rate:
            rates[(dataset, setup, backend)][cache] = rate
    return rates


def against_outside(records):
    """Per dataset with a published reference: each backend's images/s per core next to the
    reference that does the nearest work."""
    out = []
    rates = per_core_rates(records)
    for dataset, references in OUTSIDE_REFERENCES.items():
        mine = sorted((k for k in rates if k[0] == dataset), key=lambda k: _order((k + ("",), None)))
        by_backend = {b: ref for ref in references for b in ref.backends}
        if not mine:
            continue
        out += ["", f"{datasets.get(dataset).label}: the data path's images/s per core against a published loader's "
                f"per vCPU ({references[0].source}; its pipeline: load, random-resized crop to 224 px, flip; "
                "ours: read, parse or decode, crop to 227 px, mirror, subtract the mean):", "",
                "| setup | backend | warm | cold | reference, per vCPU | ours / reference (the better cache) |",
                "|---|---|---|---|---|---|"]
        for key in mine:
            by_cache, ref = rates[key], by_backend.get(key[2])
            out.append(f"| {' / '.join(key[1])} | {key[2]} | "
                       + " | ".join(f"{by_cache[c]:,.0f}" if c in by_cache else "-" for c in ("warm", "cold"))
                       + (f" | {ref.name}: {ref.per_vcpu:,.0f} ({ref.images_per_second:,} on {ref.vcpus}) | "
                          f"{max(by_cache.values()) / ref.per_vcpu:.2f}x |" if ref else " | - | - |"))
        out += [""] + [f"- {ref.name}: {ref.what}." for ref in references] + [""]
    return "\n".join(out)


def figure_per_core(records, dataset, out):
    """Bars: images/s per core of each backend (warm, cold), with the outside references as lines.
    A bar whose runs did not have the cache asked (cache_had: "partly warm") is hatched and says
    the state they had beside it, never plain warm."""
    rates = {k: v for k, v in per_core_rates(records).items() if k[0] == dataset}
    references = OUTSIDE_REFERENCES.get(dataset, ())
    if not rates or not references:
        return None
    plt = pyplot()
    keys = sorted(rates, key=lambda k: _order((k + ("",), None)), reverse=True)
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(keys) + 2.4))
    for i, key in enumerate(keys):
        for j, cache in enumerate(("warm", "cold")):
            if cache in rates[key]:
                had = cache_had(records, key + (cache,))
                ax.barh(i + 0.2 * (1 - 2 * j), rates[key][cache], height=0.38, color=backends.get(key[2]).color,
                        alpha=1.0 if cache == "warm" else 0.5, edgecolor="black", linewidth=0.4,
                        hatch=None if had == cache else "///")
                if had != cache:
                    ax.text(rates[key][cache] * 1.08, i + 0.2 * (1 - 2 * j), had, fontsize=6, va="center")
    for ref, style in zip(references, ("-", "--", ":")):
        ax.axvline(ref.per_vcpu, color="black", linestyle=style, linewidth=1,
                   label=f"{ref.name}: {ref.per_vcpu:,.0f} per vCPU")
    n_runs = collections.Counter(curve_of(r)[:3] for r in records)
    ax.set_yticks(range(len(keys)), [f"{k[2]} ({n_runs[k]} solver runs)\n" + textwrap.fill(' / '.join(k[1][1:]), 42)
                                     for k in keys], fontsize=7)
    ax.set_xscale("log")
    ticks = [t for t in (100, 1_000, 10_000, 100_000, 1_000_000)
             if t <= 2 * max(max(v.values()) for v in rates.values())]
    ax.set_xticks(ticks, [f"{t:,}" for t in ticks])
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
    ax.set_xlabel("train images per CPU second of the data path (log scale)")
    from matplotlib.patches import Patch
    caches = [Patch(facecolor="grey", edgecolor="black", label="warm"),
              Patch(facecolor="grey", alpha=0.5, edgecolor="black", label="cold (lighter)"),
              Patch(facecolor="white", edgecolor="black", hatch="///",
                    label="hatched: its runs did not have the cache asked (what they had beside the bar)")]
    ax.legend(handles=caches + ax.get_legend_handles_labels()[0], fontsize=7, loc="upper center",
              bbox_to_anchor=(0.4, -0.07), ncol=1, frameon=False)
    machines = sorted({k[1][0] for k in keys})
    ax.set_title(textwrap.fill(f"{datasets.get(dataset).label}: images/s per core, ours ({'; '.join(machines)}) "
                               f"and published; reference: {references[0].source}", 70), fontsize=8)
    path = Path(out) / f"fig_per_core_{dataset}.png"
    save(fig, path)
    return path


def _allows(records):
    found = cpu_allows(records)
    if found is None:
        return "-"
    n, share = found
    threads = data_threads(records[0])
    return f"{n:.1f}" if n else f"0 ({'one thread' if threads == 1 else f'{threads} threads'}: {share:.2f})"


def au_text(au, digits=2):
    """An AU with at least `digits` decimals and as many more as decide it against THRESHOLD: 0.8954
    is "0.895" and 0.8996 "0.8996", never a "0.90" that failed (or an "0.89" that held)."""
    text = f"{au:.{digits}f}"
    while digits < 6 and (float(text) >= THRESHOLD) != (au >= THRESHOLD):
        digits += 1
        text = f"{au:.{digits}f}"
    return text


def au_percent(au):
    """An AU in percent with as many decimals as decide it against THRESHOLD (au_text's rule):
    0.8954 is "89.5%", never a "90%" that failed."""
    digits = 0
    text = f"{100 * au:.0f}"
    while digits < 4 and (float(text) / 100 >= THRESHOLD) != (au >= THRESHOLD):
        digits += 1
        text = f"{100 * au:.{digits}f}"
    return f"{text}%"


CONFIRM_RUNS = 3  # runs at N and at N + 1 that confirm an answer (benchmarks/capacity.py --confirm)


def missed_state(records, n):
    """' (partly warm)' where a run at N or N + 1 did not have the cache its curve asked for
    (record.cache_state: a warm run holding less than WARM_AT_LEAST of its data), else ''."""
    missed = sorted({r.cache_state for r in records if r.ok and solvers(r) in (n, n + 1) and r.cache_state != r.cache})
    return f" ({', '.join(missed)})" if missed else ""


def few_runs(at, above):
    """' (n = 1, 3)' where the answer rests on fewer runs than confirm one, else ''."""
    counts = [len(aus) if aus else 0 for aus in (at, above)]
    shown = [aus for aus in (at, above) if aus]  # N = 0 holds by definition; N + 1 may not have run
    return f" (n = {counts[0]}, {counts[1]})" if any(len(aus) < CONFIRM_RUNS for aus in shown) else ""


def _median(aus):
    return au_text(statistics.median(aus)) if aus else "-"


def _cell(aus):
    return f"{au_text(statistics.median(aus), 3)} ({len(aus)})" if aus else "-"


def _order(item):
    (dataset, setup, backend, cache), _ = item
    names = list(backends.REGISTRY)
    return (dataset, setup, names.index(backend) if backend in names else len(names), cache)


PANELS_PER_ROW = 3


def cache_had(records, curve):
    """A curve's cache as its runs had it (record.cache_state): "warm", "partly warm" where no run
    had it warm, "warm (partly warm at N = 1)" where only some Ns missed it."""
    cache, mine = curve[3], [r for r in records if r.ok and curve_of(r) == curve]
    missed = sorted({solvers(r) for r in mine if r.cache_state != cache})
    if not missed:
        return cache
    if all(r.cache_state != cache for r in mine):
        return MISSED[cache]
    return f"{cache} ({MISSED[cache]} at N = {', '.join(map(str, missed))})"


def figure(records, dataset, out):
    """AU against N, one panel per setup, at most three panels a row; one colour per backend (its
    registry colour, as in every figure), warm solid, partly warm dash-dotted and cold dashed; the
    legend below the panels, each curve named by the cache its runs had (cache_had), never warm where
    they were partly warm."""
    found = {k: v for k, v in curves(records).items() if k[0] == dataset}
    if not found:
        return None
    setups = sorted({k[1] for k in found})
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter
    cols = min(PANELS_PER_ROW, len(setups))
    rows = -(-len(setups) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.8 * rows + 0.9), squeeze=False)
    shown = {}
    for ax, setup in zip(axes.flat, setups):
        for (ds, s, backend, cache), by_n in sorted(found.items(), key=_order):
            if s != setup:
                continue
            ns = sorted(by_n)
            had = cache_had(records, (ds, s, backend, cache))
            line, = ax.plot(ns, [100 * statistics.median(by_n[n]) for n in ns], marker="o", markersize=3,
                            color=backends.get(backend).color,
                            linestyle="--" if cache == "cold" else "-" if had == "warm" else "-.")
            shown.setdefault(f"{backends.get(backend).label}, {had}", line)
        ax.axhline(100 * THRESHOLD, color="grey", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("solvers at once (N)", fontsize=8)
        ax.set_ylabel("group AU, % (median)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_ylim(0, 105)
        n_runs = sorted({len(v) for k, by_n in found.items() if k[1] == setup for v in by_n.values()})
        title = textwrap.fill(' / '.join(setup[1:]), 48)  # the machine is in the figure's title
        ax.set_title(f"{title}\nn = {n_runs[0]}..{n_runs[-1]} runs per point", fontsize=7)
    for ax in list(axes.flat)[len(setups):]:
        ax.axis("off")
    ncol = min(4, 2 * cols)  # a one-panel figure is too narrow for four of the longer names ("warm (partly warm at N = 1)")
    fig.legend(shown.values(), shown.keys(), loc="lower center", ncol=ncol, fontsize=7, frameon=False)
    machines = sorted({s[0] for s in setups})
    title = textwrap.fill(f"{datasets.get(dataset).label}: how many accelerators one host feeds "
                          f"(grey line: AU 90%); {'; '.join(machines)}", 38 * cols + 20)  # the figure's width
    fig.suptitle(title, fontsize=9)
    legend_rows = -(-len(shown) // ncol)
    top = 1 - 0.15 * (title.count("\n") + 1) / (3.8 * rows + 0.9)  # room for the title's lines
    fig.tight_layout(rect=(0, 0.03 * legend_rows + 0.02, 1, top))
    path = Path(out) / f"fig_capacity_{dataset}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def client_hosts(r):
    """Over how many client hosts a run's solvers ran (run.py --client-hosts), None: this host alone."""
    return (r.concurrent or {}).get("client_hosts")


def figure_hosts(records, dataset, out):
    """Where some runs spread their solvers over client hosts (benchmarks/multihost.py): AU against
    N in one panel, a line per number of client hosts (and one for the runs on this host alone)."""
    mine = [r for r in records if r.dataset == dataset]
    if not any(client_hosts(r) for r in mine):
        return None
    lines = {}
    for r in mine:
        seeds = (r.location or {}).get("seeds") if not client_hosts(r) else None
        lines.setdefault((client_hosts(r) or 0, seeds or "", r.backend, r.cache), []).append(r)
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    shades = plt.get_cmap("viridis")
    most = max(key[0] for key in lines)
    for (h, seeds, backend, cache), rs in sorted(lines.items()):
        by_n = next(iter(curves(rs).values()), {})
        if not by_n:
            continue
        ns = sorted(by_n)
        n_runs = sorted({len(v) for v in by_n.values()})
        where = (f"{h} client host{'s' * (h > 1)}" if h else
                 f"this host alone, the cluster at {seeds}" if seeds else "this host alone, the project's cluster")
        ax.plot(ns, [100 * statistics.median(by_n[n]) for n in ns], marker="o", markersize=3,
                color=shades(0.85 * h / most) if h else "black" if not seeds else "grey", linestyle="-" if h else "--",
                label=f"{where}: {backends.get(backend).label}, {cache} (n = {n_runs[0]}..{n_runs[-1]})")
    ax.axhline(100 * THRESHOLD, color="grey", linewidth=0.8)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("solvers at once, all client hosts together (N)", fontsize=8)
    ax.set_ylabel("group AU, % (median)", fontsize=8)
    ax.set_ylim(0, 105)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=7, loc="lower left", frameon=False)
    machine = sorted({r.machine_label() for r in mine})
    ax.set_title(textwrap.fill(f"{datasets.get(dataset).label}: solvers spread over client hosts (network "
                               f"namespaces sharing one machine's cores: {'; '.join(machine)}); grey: AU 90%",
                               80), fontsize=8)
    path = Path(out) / f"fig_hosts_{dataset}.png"
    save(fig, path)
    return path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", type=Path)
    p.add_argument("--out", type=Path)
    p.add_argument("--readme", action="store_true", help="also write the compact tables into README.md")
    a = p.parse_args(argv)
    records = [r for r in load([a.results]) if not r.superseded]  # kept, counted nowhere
    if not any(r.concurrent for r in records):
        # an empty table would overwrite the README's with nothing
        p.error(f"no capacity sweep recorded under {a.results} (run benchmarks/capacity.py first; "
                f"this project's own: {catalogue.relative('ci-2core-capacity')})")
    out = a.out or a.results / "report"
    out.mkdir(parents=True, exist_ok=True)
    (out / "capacity.md").write_text(table(records))
    print((out / "capacity.md").read_text())
    if a.readme:
        readme.replace_block(README_BEGIN, README_END, compact(records, a.results) + against_outside(records)
                             + f"\n(records: `{a.results}`)\n")
    for dataset in sorted({r.dataset for r in records}):
        for path in (figure(records, dataset, out), figure_per_core(records, dataset, out),
                     figure_hosts(records, dataset, out)):
            if path:
                print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
