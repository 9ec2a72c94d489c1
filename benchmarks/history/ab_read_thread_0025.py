"""Patch 0025 (the read-ahead on one named thread) side by side with 0024, on this VM: a
1,000-iteration CIFAR-10 training run (coalesced LMDB, default 64 MiB ahead, emulated H100,
warm), the builds alternated, 5 rounds: the process's CPU, the LMDB read-ahead threads' (sampled),
the CPU no sample saw, AU. Run from the project root:
    .venv/bin/python benchmarks/history/ab_read_thread_0025.py BEFORE_KEY AFTER_KEY"""
import json, shutil, statistics, subprocess, sys, tempfile
from pathlib import Path
sys.path.insert(0, str(Path.cwd()))
import toolchain

BUILDS = {"0024": sys.argv[1], "0025": sys.argv[2]}


def training(key, out):
    with toolchain.using_build(key):
        subprocess.run([sys.executable, "experiments/run.py", "cifar10", "lmdb", "warm", "--lmdb-read", "coalesced",
                        "--iters", "1000", "--accelerator", "h100", "--out", str(out)], check=True, capture_output=True)
    r = json.loads((out / "cifar10" / "records.jsonl").read_text().splitlines()[-1])
    assert r["environment"]["caffe_build_key"] == key, r["environment"]["caffe_build_key"]
    t = r["process"]["thread_cpu_seconds"]
    return r["process"]["cpu_seconds"], t.get("LMDB read-ahead", 0), t.get("not sampled", 0), r["au"]


cells = {}
scratch = Path(tempfile.mkdtemp(prefix="ab-read-thread-"))
try:
    for rnd in range(5):
        for label, key in BUILDS.items():
            cells.setdefault(label, []).append(training(key, scratch / f"{label}-{rnd}"))
        print(f"round {rnd + 1} done", file=sys.stderr, flush=True)
finally:
    shutil.rmtree(scratch, ignore_errors=True)
print("CIFAR-10 lmdb warm coalesced (64 MiB ahead), 1,000 iterations, emulated H100, 5 rounds: median (range)")
print("build: process CPU-s / LMDB read-ahead CPU-s (sampled) / not sampled CPU-s / AU")
for label, v in cells.items():
    print(f"  {label}: " + " / ".join(f"{statistics.median(c):.3f} ({min(c):.3f}-{max(c):.3f})" for c in zip(*v)))
print(json.dumps(cells))
