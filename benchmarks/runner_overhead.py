#!/usr/bin/env python3
"""The runner's cost: the same solver trained by a bare `caffe train` and through
experiments/run.py (cache state, monitor, record), side by side; plus the monitor's own CPU.

  python benchmarks/runner_overhead.py [--iters 300] [--rounds 3]
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from data_prep import build  # noqa: E402
from experiments import runner  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iters", type=int, default=300)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="runner-bench-"))
    build.prepare("mnist", ["lmdb"], work, limit=5000, progress=False, log=lambda *_: None)
    bare, ours, monitor, startup = [], [], [], []
    for i in range(a.rounds):
        spec = runner.RunSpec("mnist", "lmdb", "warm", i, a.iters, a.iters, data_root=work, results=work / "r")
        r = runner.run(spec, log=lambda *_: None)
        ours.append(r["wall_seconds"])
        monitor.append(r["monitor"].get("monitor_cpu_fraction_of_core", float("nan")))
        startup.append(r["monitor"].get("monitor_startup_cpu_seconds") or float("nan"))
        solver = work / "r" / r["run_dir"] / "solver.prototxt"
        t = time.time()
        subprocess.run([str(runner.CAFFE / "bin" / "caffe"), "train", f"--solver={solver}"],
                       check=True, capture_output=True, cwd=solver.parent)
        bare.append(time.time() - t)
    ratio = statistics.median(ours) / statistics.median(bare)
    print(f"LeNet {a.iters} iterations on the CPU, {a.rounds} rounds, interleaved")
    print(f"bare caffe train: {statistics.median(bare):.2f} s   runner: {statistics.median(ours):.2f} s   "
          f"ratio: {ratio:.3f} (goal <= 1.01)")
    print(f"monitor CPU while sampling: {statistics.median(monitor) * 100:.2f}% of one core (goal < 1%), "
          f"plus {statistics.median(startup):.2f} CPU-s once at start (imports, NVML)")
    print(json.dumps({"bare": bare, "runner": ours, "monitor_fraction": monitor, "monitor_startup_s": startup}))


if __name__ == "__main__":
    sys.exit(main())
