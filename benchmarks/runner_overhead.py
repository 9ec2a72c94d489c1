#!/usr/bin/env python3
"""The runner's cost: the same solver trained by a bare `caffe train` and through
experiments/run.py (cache state, monitor, process tracking, record), side by side, in pairs;
plus the monitor's own CPU. A shared 2-core machine is noisy, so the figure is the median of
the per-pair ratios (runner / bare, each pair run back to back, in alternating order), with
the spread of those ratios.

  python benchmarks/runner_overhead.py [--iters 300] [--rounds 9]
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import processes
import toolchain
from data_prep import build
from experiments import runner
from experiments.config import RunConfig


def bare_run(solver):
    t = time.time()
    subprocess.run([str(toolchain.caffe_tool("caffe")), "train", f"--solver={solver}"],
                   check=True, capture_output=True, cwd=solver.parent, preexec_fn=processes.child_setup())
    return time.time() - t


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iters", type=int, default=300)
    p.add_argument("--rounds", type=int, default=9)
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="runner-bench-") as scratch:
        return measure_pairs(a, Path(scratch))


def measure_pairs(a, work):
    """Runs a.rounds pairs (the runner, bare caffe train) on a 5,000-image MNIST LMDB in work; prints the table."""
    build.prepare("mnist", ["lmdb"], work, limit=5000, progress=False, log=lambda *_: None)
    pairs, monitor, startup = [], [], []
    for i in range(a.rounds):
        config = RunConfig("mnist", "lmdb", "warm", iters=a.iters, test_interval=a.iters, cpu=True, data=str(work),
                           out=str(work / "r"), quiet=True)
        solver = None
        if i % 2:  # alternate which of the pair goes first
            first = work / "r" / "mnist" / "runs"
            solver = next(first.glob("*/solver.prototxt")) if first.exists() else None
        bare_first = bare_run(solver) if solver else None
        r = runner.run(config, runner.Cell("lmdb", "warm", i), log=lambda *_: None)
        bare = bare_first if bare_first is not None else bare_run(work / "r" / r.run_dir / "solver.prototxt")
        pairs.append((r.wall_seconds, bare))
        monitor.append(r.monitor.get("monitor_cpu_fraction_of_core", float("nan")))
        startup.append(r.monitor.get("monitor_startup_cpu_seconds") or float("nan"))
    ratios = sorted(ours / bare for ours, bare in pairs)
    q1, q3 = ratios[len(ratios) // 4], ratios[(3 * len(ratios)) // 4]
    print(f"LeNet {a.iters} iterations on the CPU, {a.rounds} pairs (runner, bare caffe train) back to back")
    print(f"runner / bare, median of per-pair ratios: {statistics.median(ratios):.3f} (goal <= 1.01); "
          f"quartiles {q1:.3f}..{q3:.3f}, range {ratios[0]:.3f}..{ratios[-1]:.3f}")
    print(f"bare caffe train: median {statistics.median(b for _, b in pairs):.2f} s "
          f"(range {min(b for _, b in pairs):.2f}..{max(b for _, b in pairs):.2f})")
    print(f"monitor CPU while sampling: {statistics.median(monitor) * 100:.2f}% of one core (goal < 1%), "
          f"plus {statistics.median(startup):.2f} CPU-s once at start (imports, NVML)")
    print(json.dumps({"pairs": pairs, "monitor_fraction": monitor, "monitor_startup_s": startup}))


if __name__ == "__main__":
    sys.exit(main())
