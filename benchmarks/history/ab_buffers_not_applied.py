"""Patch 0025 (value buffers go round) side by side with 0024, on this VM, 3 rounds, the builds
alternated: (1) one pass of a Data layer with no transform after a warm-up pass (pycaffe), CPU
per record; (2) a 1,000-iteration CIFAR-10 training run (emulated H100, warm), the process's CPU
and the walker's, at lmdb_ahead_mb 64 (the default) and 8. Run from the project root:
    .venv/bin/python benchmarks/history/ab_buffers_not_applied.py BEFORE_KEY AFTER_KEY"""
import json, os, shutil, statistics, subprocess, sys, tempfile
from pathlib import Path
sys.path[:0] = [str(Path.cwd()), str(Path.cwd() / "tests")]
from test_lmdb_read import net_file
import toolchain

before, after = sys.argv[1:3]
BUILDS = {"0024": before, "0025": after}
SCRIPT = """
import sys, time, caffe
net = caffe.Net(sys.argv[1], caffe.TEST)
n = int(sys.argv[2])
for _ in range(n): net.forward()
c0 = time.process_time()
for _ in range(n): net.forward()
print(time.process_time() - c0, flush=True)
"""


def one_pass(key, db, records, read):
    net = net_file(Path(tempfile.gettempdir()) / f"ab25-{read}.prototxt", Path.cwd() / db, 100,
                   **({"lmdb_read": read} if read != "mmap" else {}))
    env = dict(os.environ, PYTHONPATH=str(toolchain.cached_build(key) / "python"), GLOG_minloglevel="2")
    p = subprocess.run([sys.executable, "-c", SCRIPT, str(net), str(records // 100)], capture_output=True,
                       text=True, env=env, check=True)
    return float(p.stdout) / records * 1e6


def training(key, ahead, out):
    with toolchain.using_build(key):
        subprocess.run([sys.executable, "experiments/run.py", "cifar10", "lmdb", "warm", "--lmdb-read", "coalesced",
                        "--lmdb-ahead-mb", str(ahead), "--iters", "1000", "--accelerator", "h100", "--out", str(out)],
                       check=True, capture_output=True)
    r = json.loads((out / "cifar10" / "records.jsonl").read_text().splitlines()[-1])
    assert r["environment"]["caffe_build_key"] == key, r["environment"]["caffe_build_key"]
    return r["process"]["cpu_seconds"], r["process"]["thread_cpu_seconds"].get("LMDB read-ahead"), r["au"]


cells = {}
scratch = Path(tempfile.mkdtemp(prefix="ab25-"))
try:
    for rnd in range(3):
        for db, records in (("data/mnist/lmdb/train_lmdb", 60000), ("data/cifar10/lmdb/train_lmdb", 50000)):
            name = db.split("/")[1]
            cells.setdefault((name, "mmap", "0025"), []).append(one_pass(after, db, records, "mmap"))
            for label, key in BUILDS.items():
                cells.setdefault((name, "coalesced", label), []).append(one_pass(key, db, records, "coalesced"))
        for ahead in (64, 8):
            for label, key in BUILDS.items():
                cells.setdefault(("train", ahead, label), []).append(training(key, ahead, scratch / f"{label}-{ahead}-{rnd}"))
        print(f"round {rnd + 1} done", file=sys.stderr, flush=True)
finally:
    shutil.rmtree(scratch, ignore_errors=True)

print("one pass, no transform, warm: CPU us per record, median (range) of 3")
for (name, read, label), v in cells.items():
    if name != "train":
        print(f"  {name:<8} {read:<10} {label}: {statistics.median(v):5.2f} ({min(v):.2f}-{max(v):.2f})")
print("CIFAR-10 lmdb warm coalesced, 1,000 iterations, emulated H100: process CPU s / walker CPU s / AU, median (range) of 3")
for (name, ahead, label), v in cells.items():
    if name == "train":
        cols = list(zip(*v))
        print(f"  ahead {ahead:>2} MiB {label}: " + " / ".join(
            f"{statistics.median(c):.3f} ({min(c):.3f}-{max(c):.3f})" for c in cols))
print(json.dumps({f"{k[0]}/{k[1]}/{k[2]}": v for k, v in cells.items()}))
