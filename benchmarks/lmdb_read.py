#!/usr/bin/env python3
"""Cold read rate of Caffe's two LMDB read paths against `dd` of the same data.mdb, under the
same limits: the stock memory-mapped cursor (lmdb_read: MMAP) and LMDBIO's DIO + COAL
(lmdb_read: COALESCED, caffe/patches/0012).

For each dataset and limit, in one run: the page cache dropped, then `dd bs=4M` of data.mdb
(sequential, large requests: what the disk can give); dropped again, then one pass over the
train split through Caffe's Data layer with no transform, in its own process, once per read
path (dropped before each). All inside a cgroup with the limit (v1 or v2, as the runner's
--riops/--rbps). MB/s = data.mdb's bytes / seconds; the last columns are each path's rate over
dd's; "warm" is the coalesced pass repeated on the page cache it left: the Data layer's own
ceiling (parsing Datums, copying them into the batch), which a faster disk cannot raise.
--rounds N repeats every cell N times in turn and prints medians and the spread.

  python benchmarks/lmdb_read.py [--datasets mnist,imagenet] [--rounds 1] [--read-ahead-kb 128] [--json FILE]

The kernel's readahead decides how much a page fault brings in: with a large read_ahead_kb
(this project's CI machine: 8192) the stock path's faults become large sequential reads, the
coalescing LMDBIO does by hand; --read-ahead-kb sets the data's disk to another value for the
run (128 is the common default) and puts it back after.

Needs root (drop_caches, cgroups).
"""
import argparse
import json
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import processes
import toolchain
from data_prep import build, cache, datasets, disk, locations
from data_prep.backends import lmdb_store
from experiments import cgroup, runner

LIMITS = {"unlimited": cgroup.Limits(), "paper2016 disk (150 IOPS, 600 MB/s)": cgroup.Limits(riops=150, rbps=600 * 10**6)}

# one pass over the net's Data layer (written by the backend: Backend.write_data_net)
ONE_PASS = """
import sys, time, caffe
net_file, batch, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
start = time.time()
net = caffe.Net(net_file, caffe.TEST)
for _ in range(count // batch):
    net.forward()
print(time.time() - start)
"""


def timed(cmd, group):
    start = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=processes.child_setup(group))
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed: {p.stderr[-1500:]}")
    return time.time() - start, p.stdout


# (column, lmdb_read, drop the page cache first): "warm" is the coalesced pass again on what it
# left in the page cache (all of it, when the data fits): the Data layer's own ceiling
PASSES = (("mmap", "mmap", True), ("coalesced", "coalesced", True), ("warm", "coalesced", False))


def pass_net(path, lmdb_dir, dataset, read):
    """The train split's Data layer with no transform, read as `read` (an lmdb_read value)."""
    import caffe
    return lmdb_store.LMDBBackend().write_data_net(path, lmdb_dir.parent, dataset, dataset.model.batch, caffe.TRAIN,
                                                   {"lmdb_read": read}, transform=False)


def one_round(lmdb_dir, dataset, count, limits, tmp):
    """Seconds of `dd` and of each of PASSES, by column."""
    mdb = lmdb_dir / "data.mdb"
    location = locations.LocalFolder(lmdb_dir, [mdb])
    group = cgroup.create(limits, f"lmdb-read-{uuid.uuid4().hex[:6]}", location) if limits.any() else None
    try:
        cache.drop_caches()
        seconds = {"dd": timed(["dd", f"if={mdb}", "of=/dev/null", "bs=4M"], group)[0]}
        for column, read, drop in PASSES:
            if drop:
                cache.drop_caches()
            net = pass_net(tmp / f"{read}.prototxt", lmdb_dir, dataset, read)
            _, out = timed([str(toolchain.PYTHON), "-c", ONE_PASS, str(net), str(dataset.model.batch), str(count)],
                           group)
            seconds[column] = float(out.strip().splitlines()[-1])
        return seconds
    finally:
        if group:
            group.remove()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default="mnist,imagenet")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--data", default=str(runner.ROOT / "data"))
    p.add_argument("--json", type=Path)
    p.add_argument("--read-ahead-kb", type=int, help="the data disk's read_ahead_kb during the run")
    a = p.parse_args(argv)
    with disk.read_ahead_kb_set(a.data, a.read_ahead_kb) as read_ahead_kb:
        return measure_all(a, read_ahead_kb)


def measure_all(a, read_ahead_kb):
    tmp = Path(f"/tmp/lmdb-read-{uuid.uuid4().hex[:6]}")
    tmp.mkdir()
    cells = {}
    print(f"read_ahead_kb of the data's disk: {read_ahead_kb}; {a.rounds} round(s), medians (range)")
    print(f"{'dataset':<9} {'limit':<36} {'data.mdb':>9} {'dd MB/s':>9} {'mmap MB/s':>17} {'coalesced MB/s':>17} "
          f"{'mmap/dd':>8} {'coal./dd':>8} {'warm MB/s':>17}")
    for name in a.datasets.split(","):
        ds = datasets.get(name)
        lmdb_dir = Path(a.data) / name / "lmdb" / "train_lmdb"
        manifest = build.load_manifest(lmdb_dir.parent.parent, "lmdb")
        count, size = manifest.splits["train"].count, (lmdb_dir / "data.mdb").stat().st_size
        for label, limits in LIMITS.items():
            runs = [one_round(lmdb_dir, ds, count, limits, tmp) for _ in range(a.rounds)]
            seconds = {k: [r[k] for r in runs] for k in runs[0]}
            cells[f"{name}/{label}"] = dict(seconds=seconds, bytes=size, records=count)
            mb = {k: sorted(size / s / 1e6 for s in v) for k, v in seconds.items()}
            med = {k: statistics.median(v) for k, v in mb.items()}
            spread = {k: f"{med[k]:7.1f} ({v[0]:.0f}-{v[-1]:.0f})" if len(v) > 1 else f"{med[k]:7.1f}"
                      for k, v in mb.items()}
            print(f"{name:<9} {label:<36} {size / 2**20:7.0f}Mi {spread['dd']:>9} {spread['mmap']:>17} "
                  f"{spread['coalesced']:>17} {med['mmap'] / med['dd']:8.2f} {med['coalesced'] / med['dd']:8.2f} "
                  f"{spread['warm']:>17}", flush=True)
    if a.json:
        a.json.write_text(json.dumps({"cells": cells, "read_ahead_kb": read_ahead_kb,
                                      "machine": runner.environment()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
