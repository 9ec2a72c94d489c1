#!/usr/bin/env python3
"""The data path's own limit: each backend feeding real Caffe (data layer, prefetch thread,
transformer, page cache, disk) with an emulated accelerator of 0 ms, warm and cold, and the
images per second delivered. That rate says which backend can feed which accelerator: with
data and compute overlapped, AU = min(1, delivered / consumed), so a backend keeps an
accelerator at AU >= 90% when it delivers 0.9 of what the accelerator consumes (h100 profile:
LeNet ~48,600 images/s, cifar10_quick ~55,400, CaffeNet ~5,000).

  python benchmarks/data_path.py [--datasets mnist,cifar10] [--rounds 3] [--json FILE]

Cold runs need root (drop_caches). Each cell is the median over rounds; the spread is printed.
"""
import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from data_prep import backends, build, datasets
from experiments import accelerators, run, runner

ITERATIONS = {"mnist": 2000, "cifar10": 1000, "imagenet": 60}


def delivered(record, batch):
    """Images per second over the solver's time (iteration 0 is before its clock starts)."""
    return (record.iterations - 1) * batch / record.solver_seconds if record.ok and record.solver_seconds else None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default="mnist,cifar10")
    p.add_argument("--backends", default="all")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--accelerator", default="h100", help="the profile whose AU >= 90%% is judged")
    p.add_argument("--data", default=str(runner.ROOT / "data"))
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
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
            spec = runner.RunSpec(name, backend, cache, r, iters, iters, accelerator="0ms", data_root=Path(a.data),
                                  results=out, progress=False)
            rates.setdefault((backend, cache), []).append(delivered(runner.run(spec, log=lambda *_: None), model.batch))
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
