#!/usr/bin/env python3
"""The compute ceiling: each stock net fed with no I/O at all, timed by Caffe's own
`caffe time` (forward + backward of one training batch, averaged). The data comes from a
DummyData layer with constant fillers, which Caffe fills once and never again (a random
filler would refill on the CPU at every pass). The ceiling's iterations/s bound what any
storage backend can reach; a backend's training time over the ceiling's is the share lost
to I/O.

Caveat, measured on an H100: `caffe time` synchronises the GPU after every layer, so for nets
whose layers take microseconds (LeNet, cifar10_quick) it overstates the ceiling: LeNet timed
1.32 ms/iteration (13.2 s for 10,000) while real training from LMDB solved in 11.5 s. For
CaffeNet (51 ms/iteration) the per-layer sync is noise.

  python benchmarks/gpu_time.py [--gpu 0 | --cpu] [--iterations 100] [--json FILE]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

os.environ.setdefault("GLOG_minloglevel", "1")
import caffe  # noqa: E402
from caffe import layers as L  # noqa: E402

from models.nets import MODELS  # noqa: E402

SHAPES = {"mnist": (1, 28, 28), "cifar10": (3, 32, 32), "imagenet": (3, 227, 227)}


def ceiling_net(model):
    """The train net with its data layer replaced by constant DummyData (crop size included)."""
    n = caffe.NetSpec()
    n.data, n.label = L.DummyData(
        shape=[dict(dim=[model.batch, *SHAPES[model.dataset]]), dict(dim=[model.batch])],
        data_filler=[dict(type="constant", value=0.5), dict(type="constant", value=1)], ntop=2)
    n.loss = L.SoftmaxWithLoss(model.body(n, n.data), n.label)
    return str(n.to_proto())


def caffe_time(prototxt, device, iterations):
    cmd = [str(ROOT / ".build/caffe/bin/caffe"), "time", f"-model={prototxt}", f"-iterations={iterations}"]
    cmd += [f"-gpu={device}"] if device >= 0 else []
    out = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, GLOG_logtostderr="1", GLOG_minloglevel="0"))
    found = re.search(r"Average Forward-Backward: ([\d.]+) ms", out.stderr)
    if out.returncode or not found:
        raise SystemExit(f"caffe time failed:\n{out.stderr[-2000:]}")
    return float(found.group(1))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpu", type=int, default=0)
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--iterations", type=int, default=100)
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    device = -1 if a.cpu else a.gpu
    rows = {}
    print(f"{'net':14s} {'batch':>5s} {'ms/iter':>9s} {'iter/s':>8s} {'stock solver (s)':>17s}")
    for model in MODELS.values():
        with tempfile.NamedTemporaryFile("w", suffix=".prototxt", delete=False) as f:
            f.write(ceiling_net(model))
        ms = caffe_time(f.name, device, a.iterations)
        os.unlink(f.name)
        rows[model.dataset] = {"net": model.name, "batch": model.batch, "ms_per_iteration": ms,
                               "stock_iterations": model.solver.max_iter,
                               "stock_seconds": ms * model.solver.max_iter / 1000}
        print(f"{model.name:14s} {model.batch:5d} {ms:9.3f} {1000 / ms:8.1f} {rows[model.dataset]['stock_seconds']:17.1f}")
    if a.json:
        a.json.write_text(json.dumps({"device": "cpu" if a.cpu else f"gpu{a.gpu}", "nets": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
