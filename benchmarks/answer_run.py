#!/usr/bin/env python3
"""imgstore answer: the README's answer table measured on this host, in one command. Per dataset
(MNIST, CIFAR-10, ImageNet at the paper's sizing) and backend: the emulated 2016 machine's
training seconds warm and cold (run.py --profile paper2016), the emulated H100's AU warm and
cold (--accelerator h100), n = 3 each, and how many emulated H100s this host feeds at AU >= 0.90,
warm and cold, with what stopped it (the capacity sweep, `imgstore capacity`); one host, one
Caffe build. The README's own table is assembled from three committed folders made on other
hosts: this one is this host's.

  imgstore answer --dry-run        # the plan and its time; runs nothing
  imgstore answer                  # the whole table: at most ~3 hours on 2 cores, data included
  imgstore answer --quick          # ~10 minutes once the data exists: H100 columns at n = 1, feeds predicted
  imgstore answer --readme         # the README's table again from its committed folders (analysis/answer.py)

It prints its plan and estimated time first (per run, from the committed 2-core records'
wall seconds: ESTIMATED_FROM); where the whole plan would take longer than BUDGET_S, every run's
iterations are cut by one factor (run.py --iters, the reason recorded) and the plan says so.
A progress line gives the elapsed time and the time left. Runs go to run.py one by one,
interleaved (repeat by repeat, the cells rotated), as subprocesses; a run already recorded in
the folder is not run again, so an interrupted answer (Ctrl-C, kill) goes on where it stopped
when started again with the same arguments. Superseded and failed runs never feed the table.

--quick: the emulated H100's AU measured at n = 1 with fewer iterations (said), the H100s one
host feeds predicted from those runs' own CPU per image (experiments/data_path_cpu.py
cpu_allows) instead of swept, and the 2016 machine's fast cells measured at n = 1 while its
slow ones (image files cold: minutes each on its emulated disk) are left for the full run.
Each cell of the table says whether it was measured, predicted or left.

Results: results/answer/<CPU model>-<cores>c-probe<images/s>/ (--out chooses another), with
paper2016/, h100/ and capacity/ (each run's record), plan.json (the cells asked), answer.md
(the table, the host named above it), answer.json (the cells, each with its mark) and
answer.png (the figure). Exit status: 0 every run finished; 1 a solver failed; 2 refused (bad
input, run.py refused a run); 3 a run went past its time limit; 4 internal error; 130 interrupted.
"""
import argparse
import functools
import json
import math
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import catalogue
import processes
from analysis import answer as render
from data_prep import backends, build, datasets
from experiments import config as config_module, exit_codes, record, run
from monitor import cpu_probe

ROOT = Path(__file__).resolve().parents[1]

PROFILE = "paper2016"
ACCELERATOR = "h100"
REPEATS = 3
BUDGET_S = 3 * 3600        # the whole answer on a 2-core host, data included; longer plans are cut
QUICK_BUDGET_S = 10 * 60   # --quick once the data exists
QUICK_START = 0.5         # --quick: this share of the reference iterations at most
QUICK_SLOW_S = 120         # a 2016 cell estimated longer than this is left by --quick (image files cold)
MIN_CUT = 0.05             # iterations are never cut below this share of their reference
RUN_OVERHEAD_S = 8         # per run.py process beyond its record's wall seconds: the interpreter, the cache
                           # warmed or dropped, the CPU probe each record carries (an allowance, not measured)
SWEEP_MAX = 48             # the largest N a sweep tries (make capacity's CAPACITY_ARGS)
SWEEP_CONFIRM = 3
# The sweeps' iterations, as the committed sweeps ran them (ci-2core-capacity); ImageNet's sweep
# keeps each solver's page-cache share as analysis/answer.py CAPACITY_SETUP quotes it.
SWEEP_ITERS = {"mnist": 1000, "cifar10": 1000, "imagenet": 150}
SWEEP_FLAGS = {"imagenet": ["--mem-limit", "1G", "--mem-per-solver", "800M"]}
# The data prepared where missing, per dataset and backend (seconds on 2 cores; an allowance:
# no committed record times a conversion of the full datasets).
PREPARE_S = {"mnist": 60, "cifar10": 60, "imagenet": 120}

# The committed records of the 2-core CI kind the estimates come from: one run per cell of the
# 2016 machine (the profile's 188 IOPS) and of the emulated H100, at stock iterations (ImageNet at
# its matrix sizing), and the capacity sweeps on the emulated H100 at SWEEP_ITERS. A cell a folder
# lacks (Redis on the 2016 machine) takes its dataset's LMDB's.
ESTIMATED_FROM = {PROFILE: "ci-2core-paper2016-calibrated", ACCELERATOR: "ci-2core-emulated-h100-calibrated",
                  "sweep": "ci-2core-capacity"}
SWEEP_RUNS = 8
COLUMN_OF = {PROFILE: "seconds", ACCELERATOR: "au", "sweep": "feeds"}


@dataclass
class Step:
    kind: str          # PROFILE, ACCELERATOR (one run.py run) or "sweep" (one capacity sweep)
    dataset: str
    backend: str
    cache: str
    repeat: int        # 0-based; a sweep's: 0
    argv: list
    estimate_s: float
    done: bool = False

    @property
    def label(self):
        what = {PROFILE: "2016 machine s", ACCELERATOR: "H100 AU", "sweep": "H100s fed (sweep)"}[self.kind]
        return f"{what}: {self.dataset} {self.backend} {self.cache}" + (
            f" (repeat {self.repeat + 1})" if self.kind != "sweep" else "")


def reference_iters(dataset):
    """The iterations the estimates' runs trained: the stock solver's, ImageNet's its matrix sizing's."""
    ds = datasets.get(dataset)
    return (ds.matrix_config or {}).get("iters") or ds.model.solver.max_iter


def sizing_flags(dataset, iters, cut_reason):
    """run.py's flags for a dataset's runs: ImageNet at the paper's sizing (its matrix's count and
    memory, which run.py applies by itself only without a profile), iterations where cut."""
    sized = dict(datasets.get(dataset).matrix_config or {})
    if iters != reference_iters(dataset):
        sized.update(iters=iters, iters_reason=cut_reason)
    return config_module.flag_words(sized)


def run_argv(kind, dataset, backend, cache, repeat, iters, a, out, cut_reason):
    machine = ["--profile", PROFILE] if kind == PROFILE else ["--accelerator", ACCELERATOR]
    return [sys.executable, str(ROOT / "experiments" / "run.py"), dataset, backend, cache, *machine,
            "--repeats", str(repeat + 1), *sizing_flags(dataset, iters, cut_reason), "--data", str(a.data),
            "--out", str(out / kind), "--quiet"]


def sweep_argv(dataset, backend, cache, iters, a, out):
    return [sys.executable, str(ROOT / "cli.py"), "capacity", dataset, backend, cache, "--iters", str(iters),
            "--max", str(SWEEP_MAX), "--confirm", str(SWEEP_CONFIRM), "--accelerator", ACCELERATOR,
            *SWEEP_FLAGS.get(dataset, []), "--data", str(a.data), "--out", str(out / "capacity")]


@functools.lru_cache(maxsize=None)
def committed_walls(kind):
    """{(dataset, backend, cache): (mean wall s, mean solver s)} of one solver's ok runs at the
    reference iterations in ESTIMATED_FROM[kind]."""
    found = {}
    for r in record.load(catalogue.tracked_records(ESTIMATED_FROM[kind])):
        if (r.ok and not r.concurrent and r.wall_seconds and r.solver_seconds
                and (r.iterations_setting or r.iterations) == reference_iters(r.dataset)
                and (kind == PROFILE or (r.compute or {}).get("accelerator") == ACCELERATOR)):
            found.setdefault((r.dataset, r.backend, r.cache), []).append((r.wall_seconds, r.solver_seconds))
    return {k: tuple(statistics.mean(x) for x in zip(*v)) for k, v in found.items()}


@functools.lru_cache(maxsize=None)
def committed_sweeps():
    """{(dataset, backend, cache): the committed sweeps' groups' makespans summed} on the emulated
    H100 at SWEEP_ITERS (the solvers of a group run at once)."""
    groups = {}
    for r in record.load(catalogue.tracked_records(ESTIMATED_FROM["sweep"])):
        if (r.ok and r.concurrent and r.iterations_setting == SWEEP_ITERS.get(r.dataset)
                and (r.compute or {}).get("accelerator") == ACCELERATOR):
            groups[(r.dataset, r.backend, r.cache, r.concurrent["group"])] = r.concurrent.get("makespan_seconds") or 0
    found = {}
    for (dataset, backend, cache, _), makespan in groups.items():
        found[(dataset, backend, cache)] = found.get((dataset, backend, cache), 0) + makespan
    return found


def _committed(table, dataset, backend, cache):
    """A cell's entry, else its dataset's LMDB's (the other cache state's where LMDB lacks this one)."""
    for key in ((dataset, backend, cache), (dataset, "lmdb", cache), *((dataset, "lmdb", c) for c in render.CACHES)):
        if key in table:
            return table[key]
    raise KeyError(f"no committed run of {dataset} to estimate {backend} {cache} from")


def run_estimate(kind, dataset, backend, cache, scale):
    wall, solver = _committed(committed_walls(kind), dataset, backend, cache)
    return wall - solver + solver * scale + RUN_OVERHEAD_S


def sweep_estimate(dataset, backend, cache, scale):
    return _committed(committed_sweeps(), dataset, backend, cache) * scale + SWEEP_RUNS * RUN_OVERHEAD_S


def chosen(a):
    """[(dataset, backend)] the answer covers: each dataset's backends that can hold it here."""
    cells = []
    for dataset in a.datasets:
        ds = datasets.get(dataset)
        cells += [(dataset, b) for b in a.backends if not backends.get(b).unsupported(ds)]
    return cells


def cells_asked(pairs):
    """{(dataset, backend, column, cache)} the table asks of this run: every column's cells (the
    quick run measures some, predicts or leaves others)."""
    return {(d, b, column, c) for d, b in pairs for column in render.COLUMNS for c in render.CACHES}


def prepare_estimate(pairs, data):
    """(seconds to prepare every chosen dataset, [the datasets with a backend missing from `data`])."""
    missing = {d for d, b in pairs if build.load_manifest(Path(data) / d, b) is None}
    return sum(PREPARE_S[d] for d in {d for d, _ in pairs}), sorted(missing)


def plan(a, out, scale):
    """[Step], in the order they run: repeat by repeat, the cells rotated by one each repeat,
    warm and cold alternating which comes first; the sweeps last (each reuses the runs it has)."""
    pairs = chosen(a)
    kinds = [ACCELERATOR] + ([PROFILE] if not a.no_2016 else [])
    repeats = 1 if a.quick else REPEATS
    reason = (f"imgstore answer --iters {a.iters}" if a.iters else
              f"cut to {scale:.0%} of its reference to fit imgstore answer's {'--quick ' if a.quick else ''}time")
    steps = []
    for repeat in range(repeats):
        shift = repeat % max(1, len(pairs))
        for i, (dataset, backend) in enumerate(pairs[shift:] + pairs[:shift]):
            caches = list(render.CACHES) if (repeat + i) % 2 == 0 else list(render.CACHES)[::-1]
            for kind in kinds:
                for cache in caches:
                    if a.quick and kind == PROFILE and run_estimate(kind, dataset, backend, cache, 1) > QUICK_SLOW_S:
                        continue  # left for the full run
                    iters = a.iters or max(1, round(reference_iters(dataset) * scale))
                    steps.append(Step(kind, dataset, backend, cache, repeat,
                                      run_argv(kind, dataset, backend, cache, repeat, iters, a, out, reason),
                                      run_estimate(kind, dataset, backend, cache, iters / reference_iters(dataset))))
    if not a.quick:
        for dataset, backend in pairs:
            for cache in render.CACHES:
                iters = a.iters or max(1, round(SWEEP_ITERS[dataset] * scale))
                steps.append(Step("sweep", dataset, backend, cache, 0,
                                  sweep_argv(dataset, backend, cache, iters, a, out),
                                  sweep_estimate(dataset, backend, cache, iters / SWEEP_ITERS[dataset])))
    for s in steps:
        s.done = recorded(s)
    return steps


def recorded(step):
    """Whether a step's runs are all in its folder: a run.py step, its repeat of the cell; a
    sweep, its answer bracketed (N + 1 run) with SWEEP_CONFIRM runs at N and N + 1."""
    if step.kind == "sweep":
        folder = Path(step.argv[step.argv.index("--out") + 1])
        feeds = render.capacity_answers(render.Sources(None, None, str(folder))).get(
            (step.dataset, step.backend, step.cache))
        return bool(feeds and feeds.bracketed and not feeds.notes)
    config, _ = run.default_sizing(run.parse(step.argv[2:]))
    return any((r.backend, r.cache, r.repeat) == (step.backend, step.cache, step.repeat)
               for r in run.recorded_runs(config))


def fitted(a, out):
    """(the plan, the iterations' scale, the data's seconds, the datasets missing): the scale 1
    where the whole plan fits BUDGET_S (--quick: QUICK_BUDGET_S, data not counted), else the
    largest that does, never below MIN_CUT. The whole plan, recorded steps and data there or not:
    the same arguments cut the same way when started again, so that the runs recorded match.
    --quick where even MIN_CUT does not fit: the 2016 machine's cells are all left (a.crowded)."""
    budget = QUICK_BUDGET_S if a.quick else BUDGET_S
    a.crowded = False
    if a.quick and not a.no_2016 and not a.iters and sum(s.estimate_s for s in plan(a, out, MIN_CUT)) > budget:
        a.no_2016 = a.crowded = True
    prepare_s, missing = prepare_estimate(chosen(a), a.data)
    start = 1.0 if not a.quick else QUICK_START
    steps = plan(a, out, start)
    if a.iters:
        return steps, None, prepare_s, missing
    whole = sum(s.estimate_s for s in steps) + (0 if a.quick else prepare_s)
    if whole <= budget:
        return steps, start, prepare_s, missing
    fixed = sum(s.estimate_s for s in plan(a, out, 0.0)) + (0 if a.quick else prepare_s)
    scale = max(MIN_CUT, start * (budget - fixed) / max(1e-9, whole - fixed))
    scale = math.floor(scale * 100) / 100
    return plan(a, out, scale), scale, prepare_s, missing


def clock(seconds):
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def print_plan(steps, scale, prepare_s, missing, a, out):
    todo = [s for s in steps if not s.done]
    prepare_left = sum(PREPARE_S[d] for d in missing)
    total = sum(s.estimate_s for s in todo) + prepare_left
    print(f"imgstore answer{' --quick' if a.quick else ''}: {len(steps)} steps, {len(steps) - len(todo)} already "
          f"recorded; about {clock(total)} on a 2-core host (estimated from the committed 2-core records)")
    if missing:
        print(f"  data missing from {a.data}: {', '.join(missing)}, prepared by the first runs "
              f"(about {clock(prepare_left)}, counted)")
    if a.iters:
        print(f"  iterations: {a.iters} in every run and sweep (--iters)")
    elif scale is not None and scale < 1:
        why = (f"--quick: {QUICK_START:.0%} at most" if scale == QUICK_START else
               f"the whole plan would take longer than {clock(QUICK_BUDGET_S if a.quick else BUDGET_S)}")
        print(f"  iterations cut to {scale:.0%} of the stock solvers' (ImageNet: of its "
              f"{reference_iters('imagenet')}) in every run{'' if a.quick else ' and sweep'}: {why}")
    if a.crowded:
        print(f"  --quick: the 2016 machine's cells all left: the H100's alone fill its {clock(QUICK_BUDGET_S)}")
    if a.quick:
        print("  --quick: n = 1; H100s fed predicted from the runs' CPU per image, no sweep; the 2016 machine's "
              f"cells longer than {QUICK_SLOW_S} s each (image files cold) left for the full run")
    for s in steps:
        print(f"  {'recorded' if s.done else clock(s.estimate_s)}  {s.label}: {shlex.join(s.argv[2:])}")
    print(f"results: {out}")


class Interrupted(Exception):
    pass


def _interrupted(signum, frame):
    raise Interrupted


def run_steps(steps, log):
    """Runs the steps not yet recorded, one at a time, each bounded; returns the worst exit status
    of theirs as this command's (0, 1 a solver failed, 2 refused, 3 timed out) and the failures."""
    todo = [s for s in steps if not s.done]
    started, estimated_done, failures = time.time(), 0.0, []
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    for i, s in enumerate(todo):
        elapsed = time.time() - started
        pace = min(4.0, max(0.25, elapsed / estimated_done)) if estimated_done > 60 else 1.0
        left = sum(x.estimate_s for x in todo[i:]) * pace
        log(f"[{clock(elapsed)} elapsed, ~{clock(left)} left] step {i + 1}/{len(todo)}: {s.label}")
        rc = run_bounded(s.argv, env, 300 + 3 * s.estimate_s)
        estimated_done += s.estimate_s
        if rc != 0:
            failures.append((s, rc))
            log(f"  failed: {s.label}: {'timed out' if rc == 3 else f'exit {rc}'}")
    return exit_codes.worst(*(rc for _, rc in failures)), failures


def run_bounded(argv, env, limit):
    """A step's exit status; 3 where it ran past `limit` seconds (stopped: SIGTERM, then SIGKILL).
    Interrupted (Ctrl-C, SIGTERM): the step is stopped the same way and Interrupted raised."""
    # SIGTERM when this process dies: run.py and the sweep stop their training on it, unrecorded
    p = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=sys.stderr,
                         preexec_fn=processes.child_setup(death_signal=signal.SIGTERM))
    try:
        return p.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        stop(p)
        return exit_codes.STALLED
    except Interrupted:
        stop(p)
        raise


def stop(p):
    """Stops a step's process: run.py and the sweep stop their training on SIGTERM, unrecorded."""
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=30)


def host_folder(pixels=None):
    """results/answer/<CPU model>-<cores>c-probe<images/s>: this host's answer folder."""
    from experiments.runner import _cpu_model
    model = re.sub(r"[^A-Za-z0-9]+", "-", re.sub(r"\((R|TM)\)", "", _cpu_model() or "unknown-cpu")).strip("-")
    probe = round(pixels) if pixels else "<N>"
    return catalogue.RESULTS / "answer" / f"{model}-{os.cpu_count()}c-probe{probe}"


def write_answer(out, log):
    """answer.md, answer.json and answer.png from the folder's records alone."""
    text, marks = render.host_table(out)
    (out / "answer.md").write_text(text)
    found, _ = render.host_rows(out)
    cells = [dict(zip(("dataset", "backend", "column", "cache"), key.split("|")), mark=mark)
             for key, mark in marks.items()]
    (out / "answer.json").write_text(json.dumps({"host": render.host_line(out), "cells": cells,
                                                 "table": text}, indent=1))
    timed = any(c for r in found for c in r["seconds"])
    figure = render.figure(found, out / "answer.png", folder=str(out / (PROFILE if timed else ACCELERATOR)),
                           title=(f"The paper's 2016 machine, emulated on this host ({os.cpu_count()} cores)" if timed
                                  else f"The emulated H100's AU on this host ({os.cpu_count()} cores; dotted: 90%)"),
                           column="seconds" if timed else "au")
    log(text)
    log(f"written: {out / 'answer.md'}, {out / 'answer.json'}, {figure}")


def parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="~10 minutes once the data exists: n = 1, fewer iterations, "
                   "feeds predicted, the 2016 machine's slow cells left")
    p.add_argument("--dry-run", action="store_true", help="print the plan and its time; run nothing")
    p.add_argument("--readme", action="store_true", help="the README's table and figure from the committed folders "
                   "(analysis/answer.py --readme); nothing measured")
    p.add_argument("--out", type=Path, help="the answer folder (default: results/answer/<this host>)")
    p.add_argument("--data", type=Path, default=ROOT / "data", help="data root (default: %(default)s)")
    p.add_argument("--datasets", default=",".join(datasets.REGISTRY), help="comma-separated (default: %(default)s)")
    p.add_argument("--backends", default=",".join(backends.REGISTRY),
                   help="comma-separated; each dataset's that it supports (default: %(default)s)")
    p.add_argument("--iters", type=int, help="every run's and sweep's iterations (a smoke test; the table then "
                   "answers for those iterations, not the paper's)")
    p.add_argument("--no-2016", action="store_true", help="leave the 2016 machine's column out")
    return p


def checked(p, a):
    for name, known in (("datasets", datasets.REGISTRY), ("backends", backends.REGISTRY)):
        given = [x for x in getattr(a, name).split(",") if x]
        unknown = [x for x in given if x not in known]
        if unknown or not given:
            p.error(f"--{name}: unknown {', '.join(unknown) or '(none given)'}; known: {', '.join(known)}")
        setattr(a, name, given)
    if a.iters is not None and a.iters < 1:
        p.error("--iters: at least 1")
    if not chosen(a):
        p.error("no backend given can hold the datasets given here")
    return a


def main(argv=None):
    p = parser()
    a = p.parse_args(argv)
    if a.readme:
        return render.main(["--readme"])
    a = checked(p, a)
    try:
        return answer(a)
    except Exception as e:  # noqa: BLE001 -- a fault of this code: one line naming the traceback's log
        return exit_codes.internal_error(e, a.out or ROOT / "results" / "answer")


def answer(a):
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    if a.dry_run:
        out = a.out or host_folder()
        print_plan(*fitted(a, out), a, out)
        return 0
    signal.signal(signal.SIGTERM, _interrupted)
    signal.signal(signal.SIGINT, _interrupted)
    try:
        out = a.out or host_folder(pixels=cpu_probe.measure().get(cpu_probe.PIXELS))
        steps, scale, prepare_s, missing = fitted(a, out)
        print_plan(steps, scale, prepare_s, missing, a, out)
        out.mkdir(parents=True, exist_ok=True)
        asked = sorted(cells_asked(chosen(a)) | render.asked_cells(out))
        (out / render.PLAN_FILE).write_text(json.dumps({"cells": asked}, indent=1))
        status, failures = run_steps(steps, log)
        write_answer(out, print)
    except Interrupted:
        log("interrupted: the run in progress was not recorded; the same command goes on where it stopped")
        return exit_codes.INTERRUPTED
    for s, rc in failures:
        print(f"failed: {s.label} ({'timed out' if rc == 3 else f'exit {rc}'})")
    return status


if __name__ == "__main__":
    sys.exit(main())
