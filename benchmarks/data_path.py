#!/usr/bin/env python3
"""The data path's own limit: each backend feeding real Caffe (data layer, prefetch thread,
transformer, page cache, disk) with an emulated accelerator of 0 ms, warm and cold, and the
images per second delivered. That rate says which backend can feed which accelerator: with
data and compute overlapped, AU = min(1, delivered / consumed), so a backend keeps an
accelerator at AU >= 90% when it delivers 0.9 of what the accelerator consumes (h100 profile:
LeNet ~48,600 images/s, cifar10_quick ~55,400, CaffeNet ~5,000).

  python benchmarks/data_path.py [--datasets mnist,cifar10] [--rounds 3] [--json FILE]
  python benchmarks/data_path.py --probe --json FILE     # this host's data-path probe (host-check's cells)

Cold runs need root (drop_caches). Each cell is the median over rounds; the spread is printed.

The probe (probe()): the same measurement, warm, on the cells make host-check asks about, each
run sized to about PROBE_SECONDS of solver time: this host's images/s per backend and data set,
and per CPU second of its data threads, which experiments/data_path_model.py predicts cells
from. monitor/cpu_probe.py stays the host's label (folder names, tables).
"""
import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from data_prep import backends, build, datasets
from experiments import accelerators, run, runner
from experiments.config import RunConfig
from experiments.data_path_cpu import data_path_cpu, prefetch_cpu, trained_iterations

ITERATIONS = {"mnist": 2000, "cifar10": 1000, "imagenet": 60}

PROBE_CELLS = (("mnist", "lmdb"), ("mnist", "images"), ("cifar10", "images"), ("cifar10", "lmdb"),
               ("imagenet", "lmdb"))  # make host-check's cells
PROBE_ROUNDS = 2
MONITOR_S = 0.2  # threads' CPU sampled this often: a thread's last interval goes unsampled, a share of a short run
PROBE_SECONDS = 5.0  # solver seconds a probe run aims at (its start-up and warming come on top): at 2 s the
                     # first batches' start-up weighed in (ImageNet: 20 iterations, a third below the cells' rate)
MIN_ITERATIONS = 60  # and never fewer iterations than this
# Images/s the warm data path delivered at 0 ms on the 2-core CI host (the catalogue's ci-2core,
# benchmarks/data_path.json; ImageNet's LMDB stand-in: its images per prefetch CPU second in one probe on a
# busy 2-core host): they size a probe run's iterations only, a host twice as fast runs half as long.
EXPECTED_RATE = {("mnist", "lmdb"): 830_000, ("mnist", "images"): 55_000, ("cifar10", "images"): 23_000,
                 ("cifar10", "lmdb"): 310_000, ("imagenet", "lmdb"): 3_000}


def delivered(record, batch):
    """Images per second over the solver's time (iteration 0 is before its clock starts)."""
    return (record.iterations - 1) * batch / record.solver_seconds if record.ok and record.solver_seconds else None


def probe_iterations(dataset, backend, seconds=PROBE_SECONDS):
    """Iterations that take about `seconds` of solver time at the expected rate (at least MIN_ITERATIONS)."""
    return max(MIN_ITERATIONS, round(seconds * EXPECTED_RATE[(dataset, backend)] / datasets.get(dataset).model.batch))


def rates_of(record, batch):
    """One probe run's images/s (delivered) and images per CPU second of its prefetch thread, of
    its data threads (experiments/data_path_cpu.py) and of the whole process in its training window."""
    images = trained_iterations(record) * batch
    per = lambda cpu: images / cpu if cpu else None  # noqa: E731
    return {"solver_seconds": record.solver_seconds, "images_per_s": delivered(record, batch),
            "images_per_prefetch_cpu_s": per(prefetch_cpu(record)),
            "images_per_data_path_cpu_s": per(data_path_cpu(record)),
            "images_per_process_cpu_s": per(record.training_cpu_seconds)}


def summarised(values):
    """{n, median, min, max, spread}: spread is (max - min) / median."""
    vals = [v for v in values if v]
    if not vals:
        return {"n": 0, "median": None, "min": None, "max": None, "spread": None}
    med = statistics.median(vals)
    return {"n": len(vals), "median": med, "min": min(vals), "max": max(vals),
            "spread": (max(vals) - min(vals)) / med}


def probe(cells, data_root, out, rounds=PROBE_ROUNDS, seconds=PROBE_SECONDS, count=None, shape=None, log=print):
    """This host's data-path probe: each (dataset, backend) of `cells` warm through real Caffe at
    0 ms, `rounds` runs each sized to about `seconds` (records in `out`), data prepared under
    data_root where missing (count: the ImageNet stand-in's train images), under `shape`'s limit
    ({"cpus": N} or {"cpu_quota": F}, run.py's flags: a host of another shape) where given. Returns
    {"cells": {"dataset/backend": {iterations, batch, runs, and per rate its summarised() form}},
    "failed": ["dataset/backend: why"]}."""
    found, failed = {}, []
    Path(data_root).mkdir(parents=True, exist_ok=True)
    for dataset in dict.fromkeys(d for d, _ in cells):
        names = [b for d, b in cells if d == dataset]
        build.prepare_missing(dataset, names, data_root, count=count if dataset == "imagenet" else None,
                              log=lambda m: log(m))
    for round_ in range(rounds):
        for dataset, backend in cells[round_ % len(cells):] + cells[:round_ % len(cells)]:
            batch, iters = datasets.get(dataset).model.batch, probe_iterations(dataset, backend, seconds)
            # no test pass in the solver's window, one test iteration before it (a shorter start)
            config = RunConfig(dataset, backend, "warm", iters=iters, test_interval=iters + 1, cpu=True,
                               accelerator="0ms", data=str(data_root), out=str(out), quiet=True,
                               iters_reason="sized for the data-path probe", **(shape or {}))
            key = f"{dataset}/{backend}"
            cell = found.setdefault(key, {"dataset": dataset, "backend": backend, "iterations": iters,
                                          "batch": batch, "runs": []})
            try:
                r = runner.run(config, runner.Cell(backend, "warm", round_), log=lambda *_: None, test_iter=1,
                               monitor_interval=MONITOR_S)
            except runner.RunError as e:
                failed.append(f"{key}: {e}")
                continue
            if not r.ok:
                failed.append(f"{key}: the run {r.status} (its log: {r.run_dir})")
                continue
            cell["runs"].append(rates_of(r, batch))
            log(f"data-path probe {key} round {round_ + 1}/{rounds}: {cell['runs'][-1]['images_per_s']:,.0f} images/s")
    for cell in found.values():
        for rate in ("images_per_s", "images_per_prefetch_cpu_s", "images_per_data_path_cpu_s",
                     "images_per_process_cpu_s"):
            cell[rate] = summarised(run[rate] for run in cell["runs"])
    return {"cells": found, "failed": failed}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default="mnist,cifar10")
    p.add_argument("--backends", default="all")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--accelerator", default="h100", help="the profile whose AU >= 90%% is judged")
    p.add_argument("--data", help=f"data root (default: {runner.ROOT / 'data'}; --probe: make host-check's own)")
    p.add_argument("--json", type=Path)
    p.add_argument("--probe", action="store_true", help="this host's data-path probe (make host-check's cells, "
                   f"warm, {PROBE_ROUNDS} rounds of about {PROBE_SECONDS:g} s each); --json: where its results go")
    a = p.parse_args(argv)
    if a.probe:
        from benchmarks import host_check  # it imports this module
        with tempfile.TemporaryDirectory(prefix="data-path-probe-") as scratch:
            found = probe(list(PROBE_CELLS), a.data or host_check.DATA, Path(scratch), count=host_check.IMAGENET_COUNT,
                          log=lambda m: print(m, file=sys.stderr))
        text = json.dumps(dict(found, machine=runner.environment()), indent=1)
        a.json.write_text(text) if a.json else print(text)
        return 1 if found["failed"] else 0
    a.data = a.data or str(runner.ROOT / "data")
    with tempfile.TemporaryDirectory(prefix="data-path-") as scratch:
        return measure_backends(a, Path(scratch))


def measure_backends(a, out):
    """Runs every backend with no accelerator time (records in out); prints the table."""
    table = {}
    for name in a.datasets.split(","):
        ds = datasets.get(name)
        model, iters = ds.model, ITERATIONS[name]
        need = model.batch / (accelerators.from_profile(a.accelerator, model).ms_per_iteration / 1000)
        names = [b for b in backends.names(a.backends) if not backends.get(b).unsupported(ds)]
        build.prepare_missing(name, names, a.data, log=lambda m: print(m, file=sys.stderr))
        rates = {}
        for backend, cache, r in run.plan(name, ",".join(names), "all", a.rounds):
            config = RunConfig(name, backend, cache, iters=iters, test_interval=iters, cpu=True, accelerator="0ms",
                               data=str(a.data), out=str(out), quiet=True)
            record = runner.run(config, runner.Cell(backend, cache, r), log=lambda *_: None)
            rates.setdefault((backend, cache), []).append(delivered(record, model.batch))
        print(f"\n{ds.label} ({model.name}, batch {model.batch}, {iters} iterations, {a.rounds} rounds): "
              f"images/s delivered; {a.accelerator} consumes {need:,.0f}")
        print(f"{'backend':<9} {'warm':>22} {'cold':>22}  AU >= 90% on {a.accelerator}")
        for backend in names:
            cells, keeps = [], []
            for cache in ("warm", "cold"):
                vals = [v for v in rates.get((backend, cache), []) if v]
                med = statistics.median(vals) if vals else None
                cells.append(f"{med:9,.0f} ({min(vals):,.0f}-{max(vals):,.0f})" if vals else "failed")
                keeps.append("yes" if med and med >= 0.9 * need else "no")
                table[f"{name}/{backend}/{cache}"] = {"median": med, "all": vals, "need": need}
            print(f"{backend:<9} {cells[0]:>22} {cells[1]:>22}  warm {keeps[0]}, cold {keeps[1]}")
    if a.json:
        a.json.write_text(json.dumps({"accelerator": a.accelerator, "cells": table,
                                      "machine": runner.environment()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
