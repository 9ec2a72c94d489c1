#!/usr/bin/env python3
"""How many accelerators one host keeps fed, from the records of runs with several solvers at
once (benchmarks/capacity.py, or run.py --concurrent N): per dataset, setup, backend and cache,
the group AU at each N (the mean of its solvers' AU; median over runs) and the largest N whose
median is >= 0.90, with the runs behind it; and the data path's images per second per core
(train images delivered over the CPU seconds of the threads that read and transform them;
the emulated compute sleeps), the figure that carries to a host with more cores; and the N that
figure allows (cores x images/s per core over 0.90 of what one accelerator eats; 0 when one
solver's prefetch thread cannot feed its accelerator on one core), so that an answer well
below it says something other than the CPU stopped the host (memory, a lock, the storage).

  python analysis/capacity.py results/ci-2core-capacity [--out DIR]

Writes DIR/capacity.md, DIR/fig_capacity_DATASET.png and, where a published rate exists to set
ours against (FFCV's ImageNet loader), DIR/fig_per_core_DATASET.png (default DIR: RESULTS/report).
"""
import argparse
import collections
import dataclasses
import functools
import signal
import statistics
import sys
import tarfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis import readme  # noqa: E402
from analysis.report import pyplot, save  # noqa: E402
from data_prep import backends, datasets  # noqa: E402
from experiments import caffe_log, proctrack  # noqa: E402
from experiments.record import load  # noqa: E402
from monitor import cpu_probe  # noqa: E402

THRESHOLD = 0.90
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


def solvers(r):
    return (r.concurrent or {}).get("solvers", 1)


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
    log = results / run_dir / "caffe.log"
    if log.is_file():
        return log.read_text(errors="replace")
    dataset, *rest = Path(run_dir).parts or ("",)
    return _packed_logs(results / dataset / "runs.tar.xz").get(str(Path(*rest, "caffe.log")), "")


@functools.lru_cache(maxsize=None)
def _packed_logs(tar):
    """{runs/ID/caffe.log: its text} of a packed folder of runs (read once)."""
    if not tar.is_file():
        return {}
    with tarfile.open(tar) as t:
        return {m.name: t.extractfile(m).read().decode(errors="replace")
                for m in t.getmembers() if m.name.endswith("/caffe.log")}


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


def data_path_cpu(r):
    """CPU seconds of the threads that read and transform the records: Caffe's prefetch thread
    (and LMDB's read-ahead, Redis' I/O thread) for Data and ImageData; the solver thread for
    HDF5Data and MemoryData, which read on it (that count includes the net's set-up: a bound
    from above)."""
    threads = (r.process or {}).get("thread_cpu_seconds") or {}
    prefetch = threads.get(proctrack.PREFETCH, 0) + proctrack.readers_cpu(threads)
    return prefetch if prefetch > 0 else threads.get(proctrack.SOLVER)


def prefetch_cpu(r):
    """CPU seconds of Caffe's prefetch thread alone: one per solver, it transforms every image."""
    return ((r.process or {}).get("thread_cpu_seconds") or {}).get(proctrack.PREFETCH)


def trained_iterations(r):
    """The iterations a finished run trained: its max_iter (the last one Caffe logs can be
    earlier: ImageNet's solver logs every 20, 140 of 150)."""
    return r.iterations_setting or datasets.get(r.dataset).model.solver.max_iter


def images_per_core_second(records, cpu=data_path_cpu):
    """Train images delivered per CPU second (of the data path, unless `cpu` says which threads),
    over the records."""
    images = seconds = 0.0
    for r in records:
        used = cpu(r)
        if r.ok and used:
            images += trained_iterations(r) * datasets.get(r.dataset).model.batch
            seconds += used
    return images / seconds if seconds else None


def cpu_allows(records):
    """(N, one thread's share) the data path's CPU alone would allow at AU 0.90, from the
    records' own rates: the host's cores x images/s per core over what 0.90 of one accelerator
    eats (its batch per emulated iteration), and 0 when one solver's prefetch thread cannot
    deliver that much on one core (its share: what it delivers over what is needed). Data on
    servers of the same host (Redis) costs their CPU too: their CPU seconds per image count in
    the rate. None for real compute and for backends read on the solver thread (its CPU
    includes the set-up)."""
    if not records:
        return None
    r = records[0]
    ms = (r.compute or {}).get("ms_per_iteration")
    one_thread = images_per_core_second(records, prefetch_cpu)
    if not ms or not one_thread:
        return None
    needed = THRESHOLD * datasets.get(r.dataset).model.batch * 1000 / ms
    cores = min((c for c in ((r.environment or {}).get("cpu_cores"), (r.limits or {}).get("cpus")) if c), default=None)
    if not cores:
        return None
    share = one_thread / needed
    per_image = 1 / images_per_core_second(records) + servers_cpu_per_image(records)
    return (cores / per_image / needed if share >= 1 else 0.0), share


def servers_cpu_per_image(records):
    """The CPU seconds the servers holding the data (Redis nodes on this host) spent per train
    image delivered, over the complete groups of these records (0 without servers)."""
    images = seconds = 0.0
    for group in _groups([r for r in records if r.ok]).values():
        if len(group) == solvers(group[0]) and (group[0].location or {}).get("servers"):
            seconds += _servers_cpu(group[0])
            images += sum(trained_iterations(r) * datasets.get(r.dataset).model.batch for r in group)
    return seconds / images if images else 0.0


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


def _servers_cpu(r):
    """CPU seconds the servers holding the data (Redis nodes) spent over a run (0 without any)."""
    return sum(s["cpu_seconds"] for s in ((r.location or {}).get("servers") or {}).values() if s)


THREAD_BUSY = 0.85  # one thread busy this share of the solver's time has run out (Record.what_limited's)
CORES_BUSY = 0.85   # the group's cores busy this share of the run (start-up included) have run out


def stopped_by(records, results=None, held=None):
    """What ran out at the N that failed (records: that N's runs), with the figure that shows
    it, in a few words: the first that applies of solvers lost (a lock, memory), one thread
    saturated (Caffe's prefetch thread; the solver thread where the layer reads on it), all the
    group's cores busy, memory as the page cache (against `held`, the runs of the N that held:
    the data's residency after training fell and the device reads per image rose), the storage
    (reads at the cgroup's IOPS limit, or the device busy), the servers (a Redis node's CPU);
    else "not found" with the figures."""
    if not records:
        return "not found (no runs)"
    ok = [r for r in records if r.ok]
    if len(ok) < len(records):
        causes = failure_causes(records, results) if results else []
        refused = sum(int(c.split(" x ")[0]) for c in causes if "Failed to open leveldb" in c)
        killed = sum(1 for r in records if r.returncode == -signal.SIGKILL)
        if refused:
            return f"a lock (LevelDB's: {refused} of {len(records)} solvers refused)"
        if killed:
            return f"memory (OOM killer: {killed} of {len(records)} solvers)"
        return f"solvers failed ({'; '.join(causes) or failed_solvers(records)})"
    layer = backends.get(ok[0].backend).layer
    on_solver = layer in ("HDF5Data", "MemoryData")
    thread = _median_of(_solver_share(r) if on_solver else r.prefetch_share() for r in ok)
    cores = _median_of(max(filter(None, (_group_cpu(rs[0]), _processes_cpu(rs))), default=None)
                       for rs in _groups(ok).values())
    at_limit = _median_of(_reads_at_limit(r) for r in ok)
    busy = _median_of((r.monitor or {}).get("device_busy_mean") for r in ok)
    servers = _median_of(_busiest_server(r) for r in ok)
    if thread is not None and thread >= THREAD_BUSY:
        return f"one thread ({'solver thread, ' + layer if on_solver else 'prefetch'} {min(thread, 1):.0%})"
    if cores is not None and cores >= CORES_BUSY:
        return f"all cores ({cores:.0%})"
    squeezed = _page_cache_squeezed(held or [], ok)
    if squeezed:
        return squeezed
    if at_limit is not None and at_limit >= 0.90:
        return f"storage (IOPS limit, {at_limit:.0%})"
    if busy is not None and busy >= 0.90:
        return f"storage (device {busy:.0%} busy)"
    if servers is not None and servers >= THREAD_BUSY:
        return f"the servers (a Redis node {servers:.0%})"
    if on_solver and (ok[0].compute or {}).get("host_copy_latency_us"):
        return f"host-device copies ({layer}'s, per row, emulated)"
    figures = ", ".join(f"{name} {value:.0%}" for name, value in
                        (("thread", thread), ("cores", cores), ("device", busy), ("server", servers))
                        if value is not None)
    return f"not found ({figures or 'no figures'})"


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


def _groups(records):
    """{group id: its solvers' records} (a lone run is a group of one)."""
    found = {}
    for r in records:
        found.setdefault((r.concurrent or {}).get("group", r.run_id), []).append(r)
    return found


def _processes_cpu(group):
    """The share of the group's cores its solvers' threads (and the Redis servers, on the same
    host) used over the group's run: the processes' own accounting, where the monitor's 1 Hz
    mean can miss a short run's busiest seconds."""
    r = group[0]
    cores = min(filter(None, ((r.environment or {}).get("cpu_cores"), (r.limits or {}).get("cpus"))), default=None)
    used = _solvers_cpu(group) + _servers_cpu(r)
    wall = max(x.wall_seconds or 0 for x in group)
    return min(1.0, used / (wall * cores)) if cores and wall and used else None


def _group_cpu(r):
    """The share of the group's cores busy (user + system) during the run: the host's, scaled
    to a cpuset limit."""
    m = r.monitor or {}
    if m.get("cpu_user_mean") is None:
        return None
    host = (m["cpu_user_mean"] + m.get("cpu_system_mean", 0)) / 100
    cores, allowed = (r.environment or {}).get("cpu_cores"), (r.limits or {}).get("cpus")
    return min(1.0, host * cores / allowed) if cores and allowed and allowed < cores else host


def _reads_at_limit(r):
    """The group's reads per second over its cgroup's read IOPS limit (None without one)."""
    limits = r.limits or {}
    paced, riops = (limits.get("throttled_reads") or {}).get("read_ios"), limits.get("riops")
    return paced / r.wall_seconds / riops if paced and riops and r.wall_seconds else None


def _busiest_server(r):
    servers = ((r.location or {}).get("servers") or {}).values()
    used = [s["cpu_seconds"] for s in servers if s]
    return max(used) / r.wall_seconds if used and r.wall_seconds else None


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
                "| backend | warm: largest N | AU at N / N + 1 | cold: largest N | AU at N / N + 1 | images/s per core (warm, cold) "
                "| N the data path's CPU allows (warm, cold) | stopped by (warm; cold) |",
                "|---|---|---|---|---|---|---|---|"]
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
                out.append(f"| {backend} | {' | '.join(cells)} | {', '.join(rates)} | {', '.join(allows)} | "
                           f"{'; '.join(stops) or '-'} |")
        out.append("")
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
    """Bars: images/s per core of each backend (warm, cold), with the outside references as lines."""
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
                ax.barh(i + 0.2 * (1 - 2 * j), rates[key][cache], height=0.38, color=backends.get(key[2]).color,
                        alpha=1.0 if cache == "warm" else 0.5, edgecolor="black", linewidth=0.4,
                        label=f"{cache} (lighter: cold)" if i == 0 and cache == "warm" else None)
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
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.4, -0.07), ncol=1, frameon=False)
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
    return f"{n:.1f}" if n else f"0 (one thread: {share:.2f})"


def au_text(au, digits=2):
    """An AU with at least `digits` decimals and as many more as decide it against THRESHOLD: 0.8954
    is "0.895" and 0.8996 "0.8996", never a "0.90" that failed (or an "0.89" that held)."""
    text = f"{au:.{digits}f}"
    while digits < 6 and (float(text) >= THRESHOLD) != (au >= THRESHOLD):
        digits += 1
        text = f"{au:.{digits}f}"
    return text


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


def figure(records, dataset, out):
    """AU against N, one panel per setup, at most three panels a row; one colour per backend (its
    registry colour, as in every figure), warm solid and cold dashed; the legend below the panels."""
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
            line, = ax.plot(ns, [100 * statistics.median(by_n[n]) for n in ns], marker="o", markersize=3,
                            color=backends.get(backend).color, linestyle="-" if cache == "warm" else "--")
            shown.setdefault(f"{backends.get(backend).label}, {cache}", line)
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
    fig.legend(shown.values(), shown.keys(), loc="lower center", ncol=4, fontsize=7, frameon=False)
    machines = sorted({s[0] for s in setups})
    title = textwrap.fill(f"{datasets.get(dataset).label}: how many accelerators one host feeds "
                          f"(grey line: AU 90%); {'; '.join(machines)}", 38 * cols + 20)  # the figure's width
    fig.suptitle(title, fontsize=9)
    legend_rows = -(-len(shown) // 4)
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
                "this project's own: results/ci-2core-capacity)")
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
