#!/usr/bin/env python3
"""What N solvers on one host cost the storage and the CPU, per LMDB read path: the stock
memory-mapped cursor (lmdb_read MMAP), LMDBIO's DIO + COAL (COALESCED, caffe/patches/0012)
and LMDBIO's LMM (SHARED, caffe/patches/0013: one reader per host, a ring in /dev/shm).

A cell is one path at one N: N processes, each a Caffe Data layer alone (the solver's data
path without the net), import Caffe and wait; the data's pages are evicted (fadvise
DONTNEED, verified with mincore: the libraries stay cached, the data is cold); then all N
build their layer at once and read --passes passes over the train split. Per cell:

  device    bytes read from the data's disk during the cell / (passes x data.mdb): 1.0 = the
            group read the data once per pass, N = every solver read it all
  CPU/1k    CPU-ms of the N processes (all threads, from building the layer to the last
            batch) per 1,000 records delivered to solvers
  rec/s     records delivered to all solvers / the group's wall time

Cells run in turn (paths rotated within each N, rounds outside), medians over --rounds with
the spread; the ratio lines compare N with N = 1 and each path with MMAP at the same N.

  python benchmarks/lmdb_shared.py [--datasets cifar10,imagenet] [--solvers 1,2,4,8,16]
                                   [--rounds 3] [--passes 2] [--mem-limit 2G] [--read-ahead-kb 128]
                                   [--stagger 2] [--json FILE]

--stagger starts the solvers that many seconds apart: then they no longer move together, and
the stock path's readers stop sharing what the page cache holds.

--mem-limit puts the N processes in one memory cgroup of that size (the page cache they
share included), so that the data does not fit beside them. Needs root (cgroups, /proc).
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
from data_prep.child_line import first_line
from experiments import cgroup, runner
from monitor import sampler

PATHS = ("mmap", "coalesced", "shared")
READY_WITHIN_S = 300  # a reader's start: it imports Caffe and says "ready" (the net is built after "go")

# One solver's data path: imports Caffe, says "ready", waits for "go", then builds the net of
# one Data layer (written by the backend: Backend.write_data_net) and reads `records` records;
# prints its CPU seconds since "go" (all its threads).
READER = """
import sys, time, caffe
net_file, batch, records = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
print("ready", flush=True)
sys.stdin.readline()
cpu = time.process_time()
net = caffe.Net(net_file, caffe.TEST)
for _ in range(records // batch):
    net.forward()
del net
print(time.process_time() - cpu, flush=True)
"""


def reader_net(path, lmdb_dir, read, batch):
    """The train split's Data layer with no transform, read as `read` (an lmdb_read value)."""
    import caffe
    dataset = datasets.get(lmdb_dir.parent.parent.name)
    return lmdb_store.LMDBBackend().write_data_net(path, lmdb_dir.parent, dataset, batch, caffe.TRAIN,
                                                   {"lmdb_read": read}, transform=False)


def one_cell(lmdb_dir, read, solvers, records, batch, limits, tmp, stagger=0.0):
    """{device_bytes, cpu_seconds, seconds} of N readers of `records` records each."""
    mdb = lmdb_dir / "data.mdb"
    location = locations.LocalFolder(lmdb_dir, [mdb])
    group = cgroup.create(limits, f"lmdb-shared-{uuid.uuid4().hex[:6]}", location) if limits.any() else None
    procs = []
    net = reader_net(tmp / f"{read}.prototxt", lmdb_dir, read, batch)
    try:
        for i in range(solvers):
            procs.append(subprocess.Popen(
                [str(toolchain.PYTHON), "-c", READER, str(net), str(batch), str(records)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True, preexec_fn=processes.child_setup(group)))
        for p in procs:
            line = first_line(p, READY_WITHIN_S)
            if line != "ready":
                p.kill()
                why = f"within {READY_WITHIN_S} s" if line is None else f"(pid {p.pid})"
                raise RuntimeError(f"a reader did not start {why}: {p.communicate(timeout=30)[1][-1500:]}")
        cache.fadvise_dontneed([mdb])
        resident = cache.residency([mdb])
        if resident > 0.001:
            raise RuntimeError(f"{mdb}: {resident:.1%} still resident after fadvise: not cold")
        device = disk.block_device_of(mdb)
        before, start = sampler.disk_reads(device)[0], time.time()
        for i, p in enumerate(procs):
            if i and stagger:
                time.sleep(stagger)  # solvers that do not start together (other jobs, other users)
            p.stdin.write("go\n")
            p.stdin.flush()
        cpu, failed = 0.0, []
        for p in procs:
            out, err = p.communicate(timeout=3600)
            if p.returncode != 0:  # -9 under a memory limit: the cgroup's OOM killer
                fatal = [line for line in err.splitlines() if line.startswith("F")]
                failed.append(f"exit {p.returncode}" + (f": {fatal[0]}" if fatal else ""))
            else:
                cpu += float(out.strip().splitlines()[-1])
        cell = {"seconds": time.time() - start, "device_bytes": sampler.disk_reads(device)[0] - before,
                "cpu_seconds": cpu, "resident_before": resident}
        return dict(cell, failed=failed) if failed else cell
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for ring in lmdb_store.shared_rings(mdb):  # a reader that failed leaves its ring
            ring.unlink()
        if group:
            group.remove()


def spread(values, fmt):
    v = sorted(values)
    med = statistics.median(v)
    return med, (f"{fmt.format(med)} ({fmt.format(v[0])}-{fmt.format(v[-1])})" if len(v) > 1 else fmt.format(med))


def measure(name, a, passes, limits, tmp):
    lmdb_dir = Path(a.data) / name / "lmdb" / "train_lmdb"
    manifest = build.load_manifest(lmdb_dir.parent.parent, "lmdb")
    count, size = manifest.splits["train"].count, (lmdb_dir / "data.mdb").stat().st_size
    batch = a.batch
    records = count * passes // batch * batch
    ns = [int(n) for n in a.solvers.split(",")]
    runs = {(n, read): [] for n in ns for read in PATHS}
    for r in range(a.rounds):
        for n in ns:
            order = PATHS[r % 3:] + PATHS[:r % 3]
            for read in order:
                runs[(n, read)].append(one_cell(lmdb_dir, read, n, records, batch, limits, tmp, a.stagger))
                failed = runs[(n, read)][-1].get("failed")
                print(f"  round {r + 1}, N = {n}, {read}: " + (f"{len(failed)} readers failed" if failed else "done"),
                      file=sys.stderr, flush=True)
    print(f"\n{name}: {count} records, data.mdb {size / 2**20:.0f} MiB, {passes} pass(es) of batch {batch} per "
          f"solver, {limits.label()}" + (f", solvers started {a.stagger:g} s apart" if a.stagger else "")
          + f"; medians of {a.rounds} (range)")
    print(f"{'N':>3} {'path':<10} {'device / data':>20} {'CPU-ms / 1k rec':>22} {'rec/s (all)':>24}")
    med = {}
    for (n, read), all_cells in runs.items():
        cells = [c for c in all_cells if not c.get("failed")]
        if not cells:
            med[(n, read)] = (float("nan"),) * 3
            print(f"{n:3d} {read:<10} every run failed: {all_cells[0]['failed'][0]} "
                  f"({len(all_cells[0]['failed'])} of {n} readers)")
            continue
        if len(cells) < len(all_cells):
            print(f"    ({len(all_cells) - len(cells)} of {len(all_cells)} runs of {read} at N = {n} failed: "
                  f"{next(c for c in all_cells if c.get('failed'))['failed'][0]})")
        device = [c["device_bytes"] / (passes * size) for c in cells]
        cpu = [c["cpu_seconds"] * 1e6 / (n * records) for c in cells]
        rate = [n * records / c["seconds"] for c in cells]
        (md, sd), (mc, sc), (mr, sr) = spread(device, "{:.2f}"), spread(cpu, "{:.1f}"), spread(rate, "{:.0f}")
        med[(n, read)] = (md, mc, mr)
        print(f"{n:3d} {read:<10} {sd:>20} {sc:>22} {sr:>24}")
    top = max(ns)
    print(f"ratios, N = {top} over N = {ns[0]} (device bytes, CPU per record): " + "; ".join(
        f"{read} {med[(top, read)][0] / med[(ns[0], read)][0]:.2f}x, {med[(top, read)][1] / med[(ns[0], read)][1]:.2f}x"
        for read in PATHS))
    for n in ns:
        print(f"N = {n}: shared / mmap: device {med[(n, 'shared')][0] / med[(n, 'mmap')][0]:.2f}x, CPU per record "
              f"{med[(n, 'shared')][1] / med[(n, 'mmap')][1]:.2f}x, rec/s {med[(n, 'shared')][2] / med[(n, 'mmap')][2]:.2f}x;"
              f" shared / coalesced: CPU {med[(n, 'shared')][1] / med[(n, 'coalesced')][1]:.2f}x, rec/s "
              f"{med[(n, 'shared')][2] / med[(n, 'coalesced')][2]:.2f}x")
    return {"records": count, "data_bytes": size, "passes": passes, "batch": batch, "stagger_seconds": a.stagger,
            "cells": {f"{n}/{read}": cells for (n, read), cells in runs.items()}}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default="cifar10,imagenet")
    p.add_argument("--solvers", default="1,2,4,8,16", help="N, comma-separated")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--passes", default="2", help="passes over the train split per solver: one number, or "
                   "one per dataset (2,1)")
    p.add_argument("--batch", type=int, default=50, help="records per batch (default 50: ImageNet's 256 "
                   "would hold 1 GB of float batches per reader)")
    p.add_argument("--mem-limit", help="memory cgroup of the N readers together, e.g. 2G")
    p.add_argument("--stagger", type=float, default=0.0, metavar="SECONDS",
                   help="start the solvers this long apart instead of together")
    p.add_argument("--riops", type=int, help="read IOPS limit on the data's disk")
    p.add_argument("--rbps", type=int, help="read bytes/s limit on the data's disk")
    p.add_argument("--read-ahead-kb", type=int, help="the data disk's read_ahead_kb during the run (put back after)")
    p.add_argument("--data", default=str(runner.ROOT / "data"))
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    with disk.read_ahead_kb_set(a.data, a.read_ahead_kb) as read_ahead_kb:
        return measure_all(a, read_ahead_kb)


def measure_all(a, read_ahead_kb):
    limits = cgroup.Limits.from_args(mem=a.mem_limit, riops=a.riops, rbps=a.rbps)
    print(f"read_ahead_kb of the data's disk: {read_ahead_kb}")
    tmp = Path(f"/tmp/lmdb-shared-{uuid.uuid4().hex[:6]}")
    tmp.mkdir()
    names, passes = a.datasets.split(","), [int(x) for x in a.passes.split(",")]
    out = {name: measure(name, a, passes[min(i, len(passes) - 1)], limits, tmp) for i, name in enumerate(names)}
    if a.json:
        a.json.write_text(json.dumps({"datasets": out, "limits": limits.as_dict(), "rounds": a.rounds,
                                      "read_ahead_kb": read_ahead_kb, "command": sys.argv,
                                      "machine": runner.environment()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
