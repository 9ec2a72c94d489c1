#!/usr/bin/env python3
"""The GPU machine as another host: after the calibration's GPU steps (device/gpu_calibrate.py
runs these last, in the same results folder and loan), what its 16 cores do with Caffe's data
path, no GPU needed:

  1. make host-check (benchmarks/host_check.py --gpu -1): this host's CPU probe, the reference
     cells predicted from the 2-core CI host's records, and measured here. The GPU step's
     emulated runs of MNIST LMDB, MNIST and CIFAR-10 image files are host-check's runs of those
     cells (the same setup: run.py keeps them), so only ImageNet LMDB and the CIFAR-10 LMDB
     capacity point run, 2 rounds.
  2. an emulated capacity sweep (benchmarks/capacity.py): CIFAR-10 LMDB warm, up to one solver
     per core (16), starting from host-check's N = 1 runs and the N their data path's CPU
     allows; set against host-check's predicted N for these cores.

  .venv/bin/python device/gpu_host.py --dry-run        # any machine: these steps, their time
  python3 device/gpu_host.py                           # on the GPU machine: these steps alone

Run alone, the steps land in results/<gpu>-calibrate as well, packed into $OUT the same way.
"""
import argparse
import os
import sys
from pathlib import Path

from device.steps import Plan, Step, gpu_tag, run_plan
from experiments.config import RunConfig, arguments

ROOT = Path(__file__).resolve().parents[1]
HOST_CHECK_ROUNDS = 2
CAPACITY = ("cifar10", "lmdb", 1000)  # host-check's capacity cell: its N = 1 runs start the sweep
CAPACITY_MAX = 16                     # the GPU machines' cores: one solver per core at most
# seconds on the 16-core GPU host: host-check's probe, the data it adds (CIFAR-10 LMDB, the
# ImageNet stand-in of 2,000 images: ~10 s), 2 rounds of its two new cells (~14 + ~8 s) and
# run.py's start-up for the cells the GPU step already ran; the sweep: one run at N = 16 (and a
# few more if it fails there), ~15 s each. Not counted: the data-path probe host-check now runs
# first (~100 s on 2 cores by its dry run; never run on a GPU host), which the plan's one loan has
# no room for: host-check overruns this estimate, and a step that no longer fits the call's budget
# is left for a `gpu_calibrate.py --resume` call
HOST_CHECK_S, CAPACITY_S = 65, 35


def host_steps(results, data, python=sys.executable):
    """[(name, argv, estimated seconds)] of the host's steps, in the GPU step's results and data."""
    dataset, backend, iters = CAPACITY
    return [
        ("host-check", [python, str(ROOT / "benchmarks" / "host_check.py"), "--rounds", str(HOST_CHECK_ROUNDS),
                        "--gpu", "-1", "--data", str(data), "--out", str(results)], HOST_CHECK_S),
        (f"capacity sweep {dataset} {backend} warm", [
            python, str(ROOT / "benchmarks" / "capacity.py"),
            *arguments(RunConfig(dataset, backend, "warm", iters=iters, accelerator="h100", gpu=-1, data=str(data),
                                 out=str(results))),
            "--max", str(CAPACITY_MAX), "--confirm", "1"], CAPACITY_S),
    ]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dry-run", action="store_true", help="print the steps and their time; run nothing")
    p.add_argument("--budget", type=float, default=HOST_CHECK_S + CAPACITY_S + 60,
                   help="seconds these steps may take; a step that would not fit is skipped (default: %(default)s)")
    p.add_argument("--results", type=Path, help="results folder (default: results/<gpu>-calibrate)")
    p.add_argument("--data", type=Path, default=Path("/tmp/imgstore-calibrate-data"),
                   help="where the data is (default: %(default)s)")
    a = p.parse_args(argv)
    results = a.results or ROOT / "results" / f"{gpu_tag()}-calibrate"
    plan = Plan(results, a.data, [Step(*s) for s in host_steps(results, a.data)])
    if a.dry_run:
        for s in plan.steps:
            print(f"  {s.estimate_s:4.0f} s  {s.name}: {' '.join(s.argv[1:])}")
        return 0
    return run_plan(plan, a.budget, os.environ.get("OUT"))


if __name__ == "__main__":
    sys.exit(main())
