#!/usr/bin/env python3
"""The README's tables of LMDB's three read paths with N solvers on one host, from what
benchmarks/lmdb_shared.py wrote (its --json files) and from training records made with
`run.py DATASET lmdb --concurrent N --lmdb-read PATH` (group AU: the mean of the solvers').

  python analysis/lmdb_shared.py FILE.json ... [--training FOLDER]   # e.g. the catalogue's ci-2core-lmdb-shared/unlimited.json
"""
import argparse
import json
import statistics
import sys
from pathlib import Path

from analysis.capacity_stats import group_aus
from experiments.cgroup import Limits
from experiments.data_path_cpu import solvers
from experiments.record import load

PATHS = ("mmap", "coalesced", "shared")
SHOWN_N = (1, 4, 16)  # the rows shown where they were measured (else every N)


def _median_of(cells, value):
    return statistics.median(value(c) for c in cells)


def benchmark_rows(path):
    """Rows of the data-path table: per dataset and N, device bytes / data, CPU-ms per 1,000
    records and records/s of each path (medians of the runs that did not fail)."""
    d = json.loads(Path(path).read_text())
    limit = Limits.from_record(d["limits"]).label()
    rows = []
    for name, ds in d["datasets"].items():
        per_solver = ds["records"] * ds["passes"] // ds["batch"] * ds["batch"]
        measured = sorted({int(key.split("/")[0]) for key in ds["cells"]})
        for n in [n for n in SHOWN_N if n in measured] or measured:
            cols = [[], [], []]
            for read in PATHS:
                runs = ds["cells"][f"{n}/{read}"]
                ok = [c for c in runs if not c.get("failed")]
                rec = n * per_solver
                cols[0].append(f"{_median_of(ok, lambda c: c['device_bytes'] / (ds['passes'] * ds['data_bytes'])):.2f}")
                cols[1].append(f"{_median_of(ok, lambda c: c['cpu_seconds'] * 1e6 / rec):.1f}")
                failed = len(runs) - len(ok)
                cols[2].append(f"{_median_of(ok, lambda c: rec / c['seconds']):,.0f}"
                               + (f" ({failed} of {len(runs)} runs OOM-killed)" if failed else ""))
            rows.append(f"| {_data_label(d, name)} | {n} | " + " | ".join(", ".join(c) for c in cols) + " |")
    return rows


def _data_label(d, name):
    """A row's data, short: the data set, and the memory limit where one was set (the rest in the caption)."""
    limits = Limits.from_record(d["limits"])
    return f"{name} in {limits.label()}" if limits.mem_bytes else name


def benchmark_caption(paths):
    """What the rows of benchmark_rows leave out: each file's data sets with their size, its limits and
    the disk's read_ahead_kb."""
    parts = []
    for path in paths:
        d = json.loads(Path(path).read_text())
        data = " and ".join(f"{name} ({ds['data_bytes'] / 2**20:,.0f} MiB)" for name, ds in d["datasets"].items())
        parts.append(f"{data}, {Limits.from_record(d['limits']).label()}, read_ahead_kb {d.get('read_ahead_kb', '8192')}")
    return "Data and limits: " + "; ".join(parts) + "."


def training_rows(folder):
    """Rows of the training table: group AU per N and cache, each path (median, range, n)."""
    cells = {}
    for r in load([folder]):
        if not r.superseded:
            key = ((r.read_options or {}).get("lmdb_read", "mmap"), r.cache, solvers(r))
            cells.setdefault(key, []).append(r)
    rows = ["| N | cache | " + " | ".join(PATHS) + " |", "|---|---|---|---|---|"]
    for n in sorted({k[2] for k in cells}):
        for cache in ("warm", "cold"):
            row = []
            for read in PATHS:
                aus = sorted(au for au, _ in group_aus(cells.get((read, cache, n), [])).values())
                row.append(f"{statistics.median(aus):.3f} ({aus[0]:.3f}-{aus[-1]:.3f}, n = {len(aus)})" if aus else "-")
            if any(cell != "-" for cell in row):
                rows.append(f"| {n} | {cache} | " + " | ".join(row) + " |")
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("benchmarks", nargs="*", type=Path, help="JSON files of benchmarks/lmdb_shared.py")
    p.add_argument("--training", type=Path, help="a results folder of run.py --concurrent runs")
    a = p.parse_args(argv)
    if a.benchmarks:
        print(benchmark_caption(a.benchmarks) + "\n")
        print("| data | N | device bytes / data: mmap, coalesced, shared | CPU-ms per 1,000 records: "
              "mmap, coalesced, shared | records/s, all solvers: mmap, coalesced, shared |\n|---|---|---|---|---|")
        for path in a.benchmarks:
            print("\n".join(benchmark_rows(path)))
    if a.training:
        print("\n".join(training_rows(a.training)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
