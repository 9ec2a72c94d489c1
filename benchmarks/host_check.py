#!/usr/bin/env python3
"""make host-check: do the committed answers apply to this host? Measures this host's CPU probe
(monitor/cpu_probe.py: the host's label) and its data-path probe (benchmarks/data_path.py
probe(): Caffe's own data layer over each cell's data as prepared, at 0 ms of compute), predicts
a handful of reference cells from that probe (experiments/data_path_model.py: the prediction the
check stands by) and, beside it, from the reference host's committed records scaled by the two
hosts' CPU probes (experiments/prediction.py), measures the same cells here through
experiments/run.py (n rounds, interleaved), and prints per cell the reference, predicted and
measured solver seconds, measured over predicted, and whether the committed answer applies here
(measured within 15% of the reference's) or moves (and whether the prediction saw it coming).

  python benchmarks/host_check.py                          # about 5 minutes on a 2-core host, its data prepared first
  python benchmarks/host_check.py --dry-run                # the plan, its commands and time
  python benchmarks/host_check.py --cells mnist-lmdb --rounds 1
  python benchmarks/host_check.py --reference FOLDER      # another host's check as reference
  python benchmarks/host_check.py --report --out FOLDER   # the table again from a folder it wrote, nothing run
  python benchmarks/host_check.py --cpus 1                # a host of another shape: one core (a cpuset)
  python benchmarks/host_check.py --cpu-quota 0.5         # half of one core's time (a CPU quota)

The cells (emulated H100, warm page cache): MNIST LMDB (compute-bound: should not move with the
probe), MNIST and CIFAR-10 image files (data-path-bound on the per-file work), ImageNet LMDB
(pixel work), and CIFAR-10 LMDB as one capacity point: one solver's AU and the number of
solvers the data path's CPU allows on this host's cores (analysis/capacity.py cpu_allows).
Each cell's reference is the newest committed folder that holds it with CPU probes (REFERENCE).

A host of another shape is simulated with --cpus N (a cpuset of N cores) or --cpu-quota F (F
cores' worth of CPU time, all threads together): the probe and every run then run under the
same limit (a cgroup; root), and the shape is in host-check.json and the folder's name.

Records land in the catalogue's host-check folder, in <CPU model>-<shape>-probe<images/s>/,
the shape being <cores>c, <N>c-cpuset or <F>c-quota, with benchmarks/host_check_probe.json
(this host's CPU probe), data_path_probe.json (its data-path probe: each cell's n, median and
spread; the probe's runs under data-path-probe/) and host-check.json (the table's numbers).
The data lives under the check's own root (--data, by default data/host-check/), so that its
smaller stand-ins (ImageNet's IMAGENET_COUNT images) are never what a default run.py run finds.
A check run again on the same host gets a folder of its own (its probe differs by noise); the cross-host table
(analysis/hosts_table.py) counts checks of one CPU model and shape whose probes lie within one
host's noise as one host. Runs already recorded in a folder are kept (run.py skips them), so a
check cut short goes on where it stopped. Exit status: 0 every run finished; 1 a run failed; 2 refused (bad input).
"""
import argparse
import dataclasses
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import catalogue
import processes
from analysis import capacity
from analysis.hosts_table import limited_cores, shape_label, shape_word
from data_prep import build
from data_prep.errors import SourceError
from benchmarks import data_path
from experiments import cgroup, data_path_model, prediction, record, runner
from experiments.config import RunConfig, arguments
from experiments.data_path_cpu import cpu_allows
from monitor import cpu_probe

ROOT = Path(__file__).resolve().parents[1]

TOLERANCE = 0.15   # a committed answer applies to a host where its cell lands within this
ROUNDS = 2  # with the data-path probe's runs first, 3 rounds no longer fit make host-check's 6 minutes
ACCELERATOR = "h100"
PROBE_REPEATS = 3
BUSY_LOAD = 0.5    # cores busy above this share of them just before the probe: other work is running here
IMAGENET_COUNT = 2000  # train images of the ImageNet stand-in where it must be prepared here
# The README's answer (ci-2core-emulated-h100-calibrated) was measured before records
# carried the CPU probe, so it cannot be scaled; the same 2-core CI host's newer folders can.
GPU_STEP_CELLS = catalogue.relative("ci-2core-gpu-step-cells")  # 2-core CI, both probes, the GPU step's cells
CAPACITY = catalogue.relative("ci-2core-make-capacity")         # 2-core CI, pixel probe, make capacity's cells
IMAGENET_LMDB = catalogue.relative("h200-calibrate")            # 16-core Xeon: the only ImageNet LMDB runs with a probe


@dataclasses.dataclass(frozen=True)
class Cell:
    name: str
    dataset: str
    backend: str
    iters: int
    reference: str
    estimate_s: float     # one run here, run.py's start-up and warming included (2-core CI host)
    startup_s: float      # of which start-up and warming (estimate_s less the reference's solver seconds)
    capacity: bool = False

    def matches(self, r):
        """Whether record r is a run of this cell: warm, one solver, the emulated accelerator, stock reading."""
        compute = r.compute or {}
        return ((r.dataset, r.backend, r.cache, r.iterations_setting) == (self.dataset, self.backend, "warm", self.iters)
                and not r.read_options and not r.concurrent
                and (compute.get("mode"), compute.get("accelerator")) == ("emulated", ACCELERATOR))


CELLS = [Cell("mnist-lmdb", "mnist", "lmdb", 5000, GPU_STEP_CELLS, 12, 6),
         Cell("mnist-images", "mnist", "images", 5000, GPU_STEP_CELLS, 18, 6),
         Cell("cifar10-images", "cifar10", "images", 1500, GPU_STEP_CELLS, 17, 7),
         Cell("imagenet-lmdb", "imagenet", "lmdb", 200, IMAGENET_LMDB, 25, 14),
         Cell("cifar10-lmdb-capacity", "cifar10", "lmdb", 1000, CAPACITY, 10, 8, capacity=True)]
PREPARE_S = {"mnist": 10, "cifar10": 15, "imagenet": 20}  # a dataset's backends prepared where missing (2 cores)
DATA = ROOT / "data" / "host-check"  # not run.py's data root: its stand-ins are smaller than a default run's


def host_name(cpu_model, cores, pixels, shape=None):
    """This host's folder name under the catalogue's host-check: the CPU model, its shape
    (shape_word) and its pixel probe."""
    model = re.sub(r"[^A-Za-z0-9]+", "-", re.sub(r"\((R|TM)\)", "", cpu_model or "unknown-cpu")).strip("-")
    return f"{model}-{shape_word(cores, shape)}-probe{round(pixels) if pixels else 'unknown'}"


def shape_of(a):
    """The limit a check runs under, as run.py's flags name it: {"cpus": N}, {"cpu_quota": F} or {}."""
    return {k: v for k, v in (("cpus", a.cpus), ("cpu_quota", a.cpu_quota)) if v is not None}


def run_argv(cell, repeat, a, out):
    config = RunConfig(cell.dataset, cell.backend, "warm", accelerator=ACCELERATOR, iters=cell.iters,
                       iters_reason="cut to fit make host-check", repeats=repeat, data=str(a.data), out=str(out),
                       quiet=True, count=IMAGENET_COUNT if cell.dataset == "imagenet" else None, gpu=a.gpu,
                       cpus=a.cpus, cpu_quota=a.cpu_quota)
    return [sys.executable, str(ROOT / "experiments" / "run.py")] + arguments(config)


def missing_data(cells, data):
    """{dataset: its backends with no complete artifact under `data`}: run.py prepares these before
    its first run (an artifact that is there is used as it is, whatever it was made from)."""
    missing = {}
    for c in cells:
        if build.load_manifest(Path(data) / c.dataset, c.backend) is None:
            missing.setdefault(c.dataset, []).append(c.backend)
    return missing


def plan(cells, a, out, prepared=False):
    """[(label, argv, estimated seconds)]: the rounds, the cells rotated each round so that a drift
    of the host does not land on one cell; a cell's first run prepares its data where missing
    (prepared: the data-path probe will have prepared it)."""
    missing, steps = {} if prepared else missing_data(cells, a.data), []
    for round_ in range(a.rounds):
        shift = round_ % len(cells)
        for c in cells[shift:] + cells[:shift]:
            prepares = round_ == 0 and c.backend in missing.get(c.dataset, ())
            label = f"round {round_ + 1}/{a.rounds}: {c.name}" + (" (its data prepared first)" if prepares else "")
            steps.append((label, run_argv(c, round_ + 1, a, out), c.estimate_s + (PREPARE_S[c.dataset] if prepares else 0)))
    return steps


def reference_runs(cell, folder=None):
    folder = ROOT / (folder or cell.reference)
    return [r for r in record.load([folder]) if r.ok and cell.matches(r)] if folder.exists() else []


def here_runs(cell, out, shape=None, boot=None):
    """The cell's ok runs in `out` made under `shape`'s limit (none: unlimited) and, where `boot`
    is given, on the machine whose boot id it is (on_machine)."""
    def limited_so(r):
        return all((r.limits or {}).get(k) == (shape or {}).get(k) for k in ("cpus", "cpu_quota"))
    found = [r for r in record.load([out]) if r.ok and cell.matches(r) and limited_so(r)] if Path(out).exists() else []
    return [r for r in found if on_machine(r, boot)]


def on_machine(r, boot):
    """Whether run r ran in boot `boot` (None: any); a run that recorded no boot id predates the
    field and counts."""
    return boot is None or (r.environment or {}).get("boot_id") in (None, boot)


def measure_probe(repeats=PROBE_REPEATS, shape=None):
    """{work: median images/s} over `repeats` probes, the probes themselves and, under `shape`'s
    limit (a cgroup, as run.py puts its runs in) where one is given, what the limit did
    (probes_limited), else None."""
    probes, limit = probes_limited(repeats, shape) if shape else ([cpu_probe.measure() for _ in range(repeats)], None)
    medians = {w: statistics.median(p[w] for p in probes if w in p)
               for w in (cpu_probe.PIXELS, cpu_probe.FILES) if any(w in p for p in probes)}
    return medians, probes, limit


def probes_limited(repeats, shape):
    """The probes of monitor/cpu_probe.py run in a cgroup with `shape`'s limit, and what the limit
    did: {"applied": control file: value, "throttling": the quota's throttled periods}; raises
    cgroup.CgroupError where no cgroup can be made (not root, none writable)."""
    group = cgroup.create(cgroup.Limits(**shape), f"host-check-probe-{os.getpid()}", location=None)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "probe.json"
            subprocess.run([sys.executable, "-m", "monitor.cpu_probe", "--repeats", str(repeats), "--json", str(out)],
                           cwd=ROOT, stdout=subprocess.DEVNULL, timeout=60 * repeats,
                           preexec_fn=processes.child_setup(group))
            probes = json.loads(out.read_text())["probes"] if out.is_file() else [{"error": "the probe wrote nothing"}]
        return probes, {"applied": dict(group.applied), "throttling": group.cpu_throttling()}
    finally:
        group.remove()


def cores_busy(seconds=2.0, cpus=None):
    """How many cores were busy (not idle, not waiting on I/O) over the next `seconds`, from
    /proc/stat: the work running now, unlike the load average, which still counts the last minute;
    cpus: the first N cores only (a cpuset's), all of them by default."""
    def idle_and_total():
        lines = Path("/proc/stat").read_text().splitlines()
        rows = [lines[0]] if cpus is None else [next(x for x in lines if x.startswith(f"cpu{i} ")) for i in range(cpus)]
        fields = [[int(x) for x in row.split()[1:]] for row in rows]
        return sum(f[3] + f[4] for f in fields), sum(sum(f[:8]) for f in fields)
    idle0, total0 = idle_and_total()
    time.sleep(seconds)
    idle1, total1 = idle_and_total()
    return (cpus or os.cpu_count()) * (1 - (idle1 - idle0) / max(1, total1 - total0))


def busy_words(busy, cores, probes):
    """Why this host's numbers may not be its own: other work on its cores (more than half of
    them busy just before the probe), or probes further apart than one host's noise."""
    words = []
    if busy > BUSY_LOAD * cores:
        words.append(f"the host was busy ({busy:.1f} of {cores} cores busy before the probe): its probe and runs "
                     "measured a share of it; run again when it is quiet")
    spread = cpu_probe.spread(p.get(cpu_probe.PIXELS) for p in probes)
    if spread and spread > cpu_probe.SAME_HOST_SPREAD:
        words.append(f"the probes differ {spread:.0%} (one host's noise: {cpu_probe.SAME_HOST_SPREAD:.0%})")
    return words


def compare(cell, reference, here, here_probe, cores, shape=None, path_probe=None):
    """One cell's row: reference, predicted and measured seconds, their ratio, and the verdict;
    reference: (its folder, its runs); cores: the host's (the limit's: limited_cores), shape: the
    limit the check ran under; path_probe: this host's data-path probe (data_path_probe.json).
    predicted_s, bound and measured_over_predicted are the data-path probe's prediction
    (data_path_model), the one the check stands by; cross_host_* the reference's records scaled by
    the CPU probes (prediction.predict)."""
    folder, ref = reference
    p = prediction.predict(ref, here_probe)
    new = data_path_model.predict(path_probe, cell.dataset, cell.backend, cell.iters, ACCELERATOR)
    measured = statistics.mean(r.solver_seconds for r in here) if here else None
    row = {"cell": cell.name, "reference_folder": folder, "reference_n": p.n, "reference_s": p.reference_seconds,
           "reference_au": p.reference_au, "reference_bound": p.bound, "bound": new["bound"],
           "predicted_s": new["seconds"], "predicted_au": new["au"], "predicted_compute_s": new["compute_s"],
           "predicted_data_path_s": new["data_path_s"], "work": p.work, "probe_ratio": p.probe_ratio,
           "cross_host_bound": p.bound, "cross_host_predicted_s": p.seconds, "cross_host_predicted_au": p.au,
           "measured_n": len(here), "measured_s": measured,
           "measured_au": statistics.mean(r.au for r in here if r.au is not None) if here else None,
           "why": new["why"], "cross_host_why": p.why}
    row["measured_over_predicted"] = ratio(measured, new["seconds"])
    row["cross_host_measured_over_predicted"] = ratio(measured, p.seconds)
    row["measured_over_reference"] = ratio(measured, p.reference_seconds)
    if cell.capacity:
        quota = (shape or {}).get("cpu_quota")
        old = prediction.predict_cpu_allows(ref, here_probe, prediction.probe_cores(cores, quota))
        allows = data_path_model.cpu_allows(path_probe, cell.dataset, cell.backend, ACCELERATOR, cores)
        found = cpu_allows(here) if here else None  # its records carry the limit
        row["predicted_cpu_allows"], row["cross_host_predicted_cpu_allows"], row["measured_cpu_allows"] = (
            x[0] if x else None for x in (allows, old, found))
    row["verdict"] = verdict(row)
    return row


def verdict(row):
    moved, held = row["measured_over_reference"], row["measured_over_predicted"]
    if moved is None:
        return "not measured here"
    if abs(moved - 1) <= TOLERANCE:
        return "applies here"
    said = "predicted" if held is not None and abs(held - 1) <= TOLERANCE else \
        "not predicted" if held is not None else "no prediction"
    return f"moves {moved:.2f}x here ({said})"


def fmt(x, spec=".2f"):
    return "-" if x is None else format(x, spec)


def data_path_cells(rows):
    """The measured cells whose time is the data path's: at the reference or here (predicted)."""
    return [r for r in rows
            if r["measured_s"] is not None and "data path" in (r.get("bound"), r.get("reference_bound"))]


def summary(rows):
    """The verdict in words: how many data-path cells hold here, which committed answers apply and
    which do not, and how often each prediction held."""
    measured = [r for r in rows if r["measured_s"] is not None]
    if not measured:
        return "no cell was measured here: nothing to judge"
    path = data_path_cells(rows)
    missed = [r for r in path if abs(r["measured_over_reference"] - 1) > TOLERANCE]
    if not path:
        words = "no data-path cell was measured here"
    elif missed:
        words = (f"{len(missed)} of {len(path)} data-path cells miss here: the committed answers of "
                 f"{', '.join(r['cell'] for r in missed)} do not apply; measure them on this host "
                 f"(experiments/run.py DATASET BACKEND warm --accelerator {ACCELERATOR})")
    else:
        words = f"all {len(path)} data-path cells hold here: their committed answers apply"
    compute = [r for r in measured if r not in path]
    held = lambda rows, key: sum(r[key] is not None and abs(r[key] - 1) <= TOLERANCE for r in rows)  # noqa: E731
    return (words + (f"; compute-bound cells: {held(compute, 'measured_over_reference')} of {len(compute)} hold"
                     if compute else "")
            + f". Predicted within {TOLERANCE:.0%}: {held(measured, 'measured_over_predicted')} of {len(measured)} "
            f"cells from this host's data-path probe, {held(measured, 'cross_host_measured_over_predicted')} of "
            f"{len(measured)} from "
            "the reference host's runs scaled by CPU probes.")


LEGEND = (f"Legend: a committed answer applies here where its cell's measured seconds lie within {TOLERANCE:.0%} "
          "of the reference's; bound: the longer of compute and data path in the prediction from this host's "
          "data-path probe (predicted s); cross-host: the reference's runs scaled by the two hosts' CPU probes "
          "(probe there/here, of the work named).")


def table(rows, here_probe, name, warnings=(), shape=""):
    head = (f"host-check: {name}{'; ' + shape if shape else ''}; "
            f"CPU probe here {fmt(here_probe.get(cpu_probe.PIXELS), '.0f')} images/s (pixels), "
            f"{fmt(here_probe.get(cpu_probe.FILES), '.0f')} small files/s")
    lines = [f"warning: {w}" for w in warnings] + [head, summary(rows), "",
             "| cell | reference (n) | bound here | predicted s | measured s (n) | measured/predicted | "
             "cross-host predicted s (probe there/here) | measured/cross-host | AU predicted / measured | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        why = "; ".join(w for w in (r.get("why"), r.get("cross_host_why")) if w)
        lines.append(f"| {r['cell']} | {fmt(r['reference_s'])} s ({r['reference_n']}, {r['reference_folder']}) | "
                     f"{r['bound'] or '-'} | {fmt(r['predicted_s'])} | {fmt(r['measured_s'])} ({r['measured_n']}) | "
                     f"{fmt(r['measured_over_predicted'], '.3f')} | {fmt(r.get('cross_host_predicted_s'))} "
                     f"({fmt(r['probe_ratio'], '.3f')} {r['work']}) | "
                     f"{fmt(r.get('cross_host_measured_over_predicted'), '.3f')} | "
                     f"{fmt(r['predicted_au'], '.3f')} / {fmt(r['measured_au'], '.3f')} | {r['verdict']}"
                     + (f"; {why}" if why else "") + " |")
        if "predicted_cpu_allows" in r:
            predicted, measured = r["predicted_cpu_allows"], r["measured_cpu_allows"]
            old = r.get("cross_host_predicted_cpu_allows")
            lines.append(f"| {r['cell']}: N the data path's CPU allows | | | {fmt(predicted, '.1f')} | "
                         f"{fmt(measured, '.1f')} | {fmt(ratio(measured, predicted), '.3f')} | {fmt(old, '.1f')} | "
                         f"{fmt(ratio(measured, old), '.3f')} | | |")
    return "\n".join(lines + ["", LEGEND])


def ratio(a, b):
    return a / b if a is not None and b else None


def probe_cells(cells):
    """The (dataset, backend) pairs of the cells, once each, for the data-path probe."""
    return list(dict.fromkeys((c.dataset, c.backend) for c in cells))


def probe_seconds(cells, missing):
    """The data-path probe's estimated seconds here: its runs and the data it prepares first."""
    startup = {(c.dataset, c.backend): c.startup_s for c in cells}
    return (data_path.PROBE_ROUNDS * sum(data_path.PROBE_SECONDS + startup[k] for k in probe_cells(cells))
            + sum(PREPARE_S[d] for d in missing))


def dry_run(steps, cells, a, out):
    # under a quota below one core the data path's CPU work is stretched: the runs' estimates at most 1/quota
    slower = 1 / min(1.0, a.cpu_quota or 1.0)
    missing = missing_data(cells, a.data)
    path_probe = probe_seconds(cells, missing) * slower
    total = sum(s for _, _, s in steps) * slower + PROBE_REPEATS * 3 + path_probe
    limit = shape_of(a)
    print(f"make host-check: {len(cells)} cells x {a.rounds} rounds, about {total:.0f} s on a 2-core host"
          + (f" under {shape_label(os.cpu_count(), limit)}" if limit else "") + "; data "
          + (", ".join(f"{d} {','.join(b)}" for d, b in missing.items()) + f" missing from {a.data}: prepared by "
             "the data-path probe first" if missing else f"in {a.data}"))
    print(f"  {PROBE_REPEATS * 3:4.0f} s  cpu probe x {PROBE_REPEATS}" + (
        f" in a cgroup: {shape_label(os.cpu_count(), limit)}" if limit else ""))
    print(f"  {path_probe:4.0f} s  data-path probe: {', '.join(f'{d}/{b}' for d, b in probe_cells(cells))} at 0 ms, "
          f"{data_path.PROBE_ROUNDS} rounds of about {data_path.PROBE_SECONDS:g} s each -> {data_path_probe_file(out)}")
    for label, argv, seconds in steps:
        print(f"  {seconds * slower:4.0f} s  {label}: {' '.join(argv[1:])}")
    print("predicted from:")
    for c in cells:
        ref, work = reference_runs(c, a.reference), prediction.work_of(c.dataset, c.backend)
        print(f"  {c.name}: {a.reference or c.reference}, {len(ref)} runs, probe {fmt(prediction.probe(ref, work), '.0f')} "
              f"({work})")
    print(f"results: {out}")


def run_steps(steps, log):
    """Runs each step, bounded; [(label, exit status)] of those that failed."""
    failed, started = [], time.time()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    for label, argv, seconds in steps:
        log(f"[{time.time() - started:4.0f} s] {label}")
        try:
            rc = subprocess.run(argv, cwd=ROOT, env=env, timeout=120 + 10 * seconds, stdout=sys.stderr,
                                preexec_fn=processes.child_setup()).returncode
        except subprocess.TimeoutExpired:
            rc = "timed out"
        if rc != 0:
            failed.append((label, rc))
            log(f"  failed: {label}: exit {rc}")
    return failed


def parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cells", default=",".join(c.name for c in CELLS),
                   help="comma-separated, of: %(default)s")
    p.add_argument("--rounds", type=int, default=ROUNDS, help="runs per cell, interleaved (default %(default)s)")
    p.add_argument("--reference", help="one results folder to predict every cell from (default: each cell's own)")
    p.add_argument("--data", type=Path, default=DATA, help="data root, the check's own so that a default run.py run "
                   "never finds its smaller stand-ins (default: %(default)s)")
    p.add_argument("--out", type=Path, help=f"results folder (default: {catalogue.relative('host-check')}/<this host>)")
    p.add_argument("--cpus", type=int, help="a host of another shape: the probe and every run on this many "
                   "cores (a cpuset; root)")
    p.add_argument("--cpu-quota", type=float, metavar="CORES", help="a host of another shape: the probe and every "
                   "run under this many cores' worth of CPU time, all threads together (a CPU quota; root)")
    p.add_argument("--gpu", type=int, help="run.py's --gpu (on a GPU host, -1: the emulated runs leave the GPU alone, "
                   "as the GPU step's emulated runs do)")
    p.add_argument("--dry-run", action="store_true", help="print the plan, its commands and time; run nothing")
    p.add_argument("--report", action="store_true", help="run nothing: the table again from the records in --out "
                   "(a check made where the reference records were not, a GPU machine's)")
    return p


def chosen_cells(p, a):
    known = {c.name: c for c in CELLS}
    names = [n for n in a.cells.split(",") if n]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        p.error(f"--cells: unknown {', '.join(unknown) or '(none given)'}; known: {', '.join(known)}")
    if a.rounds < 1:
        p.error("--rounds: at least 1")
    if a.cpus is not None and a.cpu_quota is not None:
        p.error("--cpus and --cpu-quota: one shape at a time")
    if a.cpus is not None and not 1 <= a.cpus <= os.cpu_count():
        p.error(f"--cpus: 1 to this host's {os.cpu_count()} cores, not {a.cpus}")
    if a.cpu_quota is not None and not 0 < a.cpu_quota <= os.cpu_count():
        p.error(f"--cpu-quota: above 0 and at most this host's {os.cpu_count()} cores, not {a.cpu_quota:g}")
    if a.reference and not (ROOT / a.reference).is_dir():
        p.error(f"--reference: {a.reference}: no such folder")
    return [known[n] for n in names]


def report(cells, a, out, host, log=print):
    """The table from the records under `out` and its probe file; host: its probe, cores, CPU model."""
    shape = host.get("shape") or {}
    boot = host.get("boot_id")
    path_probe = json.loads(data_path_probe_file(out).read_text()) if data_path_probe_file(out).is_file() else None
    rows = [compare(c, (a.reference or c.reference, reference_runs(c, a.reference)), here_runs(c, out, shape, boot),
                    host["medians"], host["cores"], shape, path_probe) for c in cells]
    elsewhere = {c.name: sum(not on_machine(r, boot) for r in here_runs(c, out, shape)) for c in cells}
    warnings = list(host.get("warnings", ())) + [
        f"{n} runs of {name} in {out.name} were made on another machine (another boot id than the "
        "probe's): not counted" for name, n in elsewhere.items() if n]
    (out / "host-check.json").write_text(json.dumps(dict(host, host=out.name, rows=rows, warnings=warnings),
                                                    indent=1))
    log(table(rows, host["medians"], out.name, warnings,
              shape_label(host.get("host_cores", host["cores"]), shape) if shape else ""))


def probe_file(out):
    return Path(out) / "benchmarks" / "host_check_probe.json"


def data_path_probe_file(out):
    return Path(out) / "data_path_probe.json"


def measure_data_path(cells, a, out, log):
    """This host's data-path probe for the cells (data_path.probe, its runs' records under
    out/data-path-probe/, under the check's limit) written to data_path_probe.json; one already
    there for this boot is kept (a check cut short goes on). Returns its failures."""
    path = data_path_probe_file(out)
    if path.is_file() and json.loads(path.read_text()).get("boot_id") == runner.boot_id():
        log(f"data-path probe: kept {path}")
        return []
    found = data_path.probe(probe_cells(cells), a.data, out / "data-path-probe", count=IMAGENET_COUNT,
                            shape=shape_of(a), log=log)
    tmp = path.with_suffix(".json.tmp")  # never a half-written probe file
    tmp.write_text(json.dumps(dict(found, boot_id=runner.boot_id(), shape=shape_of(a), rounds=data_path.PROBE_ROUNDS,
                                   seconds=data_path.PROBE_SECONDS), indent=1))
    tmp.replace(path)
    return found["failed"]


def main(argv=None):
    p = parser()
    a = p.parse_args(argv)
    cells = chosen_cells(p, a)
    cores, model, shape = os.cpu_count(), runner._cpu_model(), shape_of(a)
    if a.dry_run:
        out = a.out or catalogue.folder("host-check") / host_name(model, cores, None, shape).replace("unknown", "<N>")
        dry_run(plan(cells, a, out, prepared=True), cells, a, out)
        return 0
    if a.report:
        if not a.out or not probe_file(a.out).is_file():
            p.error(f"--report: {probe_file(a.out or '--out')}: missing (--out names a folder host-check wrote)")
        report(cells, a, a.out, json.loads(probe_file(a.out).read_text()))
        return 0
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    log(f"cpu probe x {PROBE_REPEATS} ({model}, {shape_label(cores, shape)})")
    busy = cores_busy(cpus=shape.get("cpus"))
    try:
        here_probe, probes, limit = measure_probe(shape=shape)
    except cgroup.CgroupError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if cpu_probe.PIXELS not in here_probe:
        print(f"error: the CPU probe failed: {probes[0].get('error')}", file=sys.stderr)
        return 2
    out = a.out or catalogue.folder("host-check") / host_name(model, cores, here_probe[cpu_probe.PIXELS], shape)
    host = {"medians": here_probe, "cores": limited_cores(cores, shape), "host_cores": cores, "cpu_model": model,
            "boot_id": runner.boot_id(), "shape": shape, "probe_limit": limit,
            "shape_label": shape_label(cores, shape), "probes": probes,
            "warnings": busy_words(busy, shape.get("cpus") or cores, probes)}
    for w in host["warnings"]:
        log(f"warning: {w}")
    probe_file(out).parent.mkdir(parents=True, exist_ok=True)
    probe_file(out).write_text(json.dumps(host, indent=1))
    log(f"results: {out}")
    try:
        failed = [(f"data-path probe {f}", 1) for f in measure_data_path(cells, a, out, log)]
    except SourceError as e:
        print(f"error: the data-path probe's data under {a.data}: {e}", file=sys.stderr)
        return 2
    failed += run_steps(plan(cells, a, out), log)
    report(cells, a, out, host)
    for label, rc in failed:
        print(f"failed: {label} (exit {rc})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
