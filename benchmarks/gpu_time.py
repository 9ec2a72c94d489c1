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
CaffeNet (51 ms/iteration) the per-layer sync is noise. `--train N` therefore also trains each
net for N iterations with the stock solver (test passes included, from constant DummyData
too; test_interval capped at N, as `run.py --iters N --test-interval N` does) through
`caffe train`, and reports the solver time from its log, as the runner does: that is the
ceiling to hold a backend's solver time against.

  python benchmarks/gpu_time.py [--gpu 0 | --cpu] [--iterations 100] [--train N [--test-iter K]]
                                [--nets mnist,cifar10] [--json FILE]
  --train mnist=2000,cifar10=2000,imagenet=60   N per net (CaffeNet's iteration is 30x LeNet's)

The trained rows also give the time per iteration without the test passes (the solver time less
the test passes' time, from the same log), which is what an emulated accelerator's train_ms is.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path


os.environ.setdefault("GLOG_minloglevel", "1")
import caffe  # noqa: E402
from caffe import layers as L  # noqa: E402

from experiments import caffe_log  # noqa: E402
import processes  # noqa: E402
import toolchain  # noqa: E402
from data_prep import datasets  # noqa: E402
from models.nets import net_proto, solver_text  # noqa: E402



def constant_data(model):
    """A data layer for net_proto: constant DummyData of the net's input shape (crop included)."""
    def layer(batch, phase):
        return L.DummyData(shape=[dict(dim=[batch, *model.input_shape]), dict(dim=[batch])],
                           data_filler=[dict(type="constant", value=0.5), dict(type="constant", value=1)], ntop=2)
    return layer


def ceiling_net(model):
    """The train net with its data layer replaced by constant DummyData."""
    return str(net_proto(model, constant_data(model), caffe.TRAIN))


def caffe_train(model, device, iterations, work, test_iter=None):
    """Solver seconds of `iterations` of the stock solver on constant data, from Caffe's log."""
    for phase, name in [(caffe.TRAIN, "train"), (caffe.TEST, "test")]:
        (work / f"{name}.prototxt").write_text(str(net_proto(model, constant_data(model), phase)))
    interval = min(model.solver.test_interval, iterations)
    (work / "solver.prototxt").write_text(solver_text(
        model, work / "train.prototxt", work / "test.prototxt", work / "snap", gpu=device >= 0,
        max_iter=iterations, test_interval=interval, test_iter=test_iter))
    parsed = caffe_log.parse(run_caffe(["train", f"--solver={work / 'solver.prototxt'}"], device, cwd=work))
    if not parsed["done"]:
        raise SystemExit(f"caffe train of {model.name} did not finish")
    return parsed["solver_seconds"], sum(parsed["test_pass_seconds"])


def caffe_time(prototxt, device, iterations):
    log = run_caffe(["time", f"--model={prototxt}", f"--iterations={iterations}"], device)
    found = re.search(r"Average Forward-Backward: ([\d.]+) ms", log)
    if not found:
        raise SystemExit(f"caffe time printed no average:\n{log[-2000:]}")
    return float(found.group(1))


def run_caffe(args, device, cwd=None):
    """Caffe's command-line tool on `device` (-1: CPU); returns its log, or stops with its tail."""
    cmd = [str(toolchain.caffe_tool("caffe")), *args] + ([f"--gpu={device}"] if device >= 0 else [])
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd,
                         env=dict(os.environ, GLOG_logtostderr="1", GLOG_minloglevel="0"),
                         preexec_fn=processes.child_setup())
    if out.returncode:
        raise SystemExit(f"caffe {args[0]} failed:\n{out.stderr[-2000:]}")
    return out.stderr


def train_iterations(text, nets):
    """--train N or --train mnist=N,cifar10=M: {dataset: iterations} for the nets timed."""
    if text is None:
        return {}
    if "=" not in text:
        return {net: int(text) for net in nets}
    given = dict(part.split("=", 1) for part in text.split(","))
    unknown = set(given) - set(nets)
    if unknown:
        raise SystemExit(f"--train names {', '.join(sorted(unknown))}, not among --nets {','.join(nets)}")
    return {net: int(n) for net, n in given.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpu", type=int, default=0)
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--iterations", type=int, default=100)
    p.add_argument("--train", metavar="N", help="also train N iterations with the stock solver (or "
                   "DATASET=N,... per net)")
    p.add_argument("--test-iter", type=int, help="test batches per test pass (default: the stock solver's; "
                   "the runner uses fewer when the test set is smaller, e.g. a small ImageNet stand-in)")
    p.add_argument("--nets", default="mnist,cifar10,imagenet", help="datasets whose nets to time")
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    device = -1 if a.cpu else a.gpu
    nets = a.nets.split(",")
    train = train_iterations(a.train, nets)
    rows = {}
    print(f"{'net':14s} {'batch':>5s} {'ms/iter':>9s} {'iter/s':>8s} {'stock solver (s)':>17s}"
          + (f" {'trained (ms/iter)':>18s}" if a.train else ""))
    for dataset in nets:
        model = datasets.get(dataset).model
        with tempfile.TemporaryDirectory() as work:
            (Path(work) / "time.prototxt").write_text(ceiling_net(model))
            ms = caffe_time(Path(work) / "time.prototxt", device, a.iterations)
            row = {"net": model.name, "batch": model.batch, "ms_per_iteration": ms,
                   "stock_iterations": model.solver.max_iter, "stock_seconds": ms * model.solver.max_iter / 1000}
            if dataset in train:
                n = train[dataset]
                seconds, tests = caffe_train(model, device, n, Path(work), a.test_iter)
                row.update(train_iterations=n, train_solver_seconds=seconds, train_test_seconds=tests,
                           train_ms_per_iteration=1000 * seconds / n,
                           train_ms_without_tests=1000 * (seconds - tests) / n)
        rows[dataset] = row
        print(f"{model.name:14s} {model.batch:5d} {ms:9.3f} {1000 / ms:8.1f} {row['stock_seconds']:17.1f}"
              + (f" {row['train_ms_per_iteration']:18.3f}" if dataset in train else ""))
    if a.json:
        from experiments.runner import environment
        a.json.write_text(json.dumps({"device": "cpu" if a.cpu else f"gpu{a.gpu}", "nets": rows,
                                      "environment": environment()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
