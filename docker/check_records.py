#!/usr/bin/env python3
"""Check what `make DATASET-quick` wrote inside the project's Docker image (make docker-test):
every cell the matrix plans for the dataset (each backend that supports it, warm and cold) has
a record that trained to the end, cold cells say how they were made cold, and each record
names the container and the image it ran in.

  python docker/check_records.py RESULTS [--dataset mnist]

Prints one line per cell; exits 1, naming every cell that is missing or wrong.
"""
import argparse
import sys
from pathlib import Path

from experiments import run
from experiments.record import recorded


def problems_of(record):
    found = []
    if record.status != "ok":
        found.append(f"status {record.status} (returncode {record.returncode}; log in {record.run_dir})")
    if record.iterations_setting and record.iterations != record.iterations_setting:
        found.append(f"stopped at iteration {record.iterations} of {record.iterations_setting}")
    if record.cache == "cold" and not any(m in (record.cache_method or "") for m in ("drop_caches", "fadvise")):
        found.append(f"cold by {record.cache_method!r}: neither drop_caches nor fadvise")
    container = (record.environment or {}).get("container")
    if not container:
        found.append("the record does not say it ran in a container")
    elif not container.get("caffe_build"):
        found.append(f"the container's image description names no Caffe build: {container}")
    if record.au is None:
        found.append("no accelerator utilisation")
    return found


def check(results, dataset):
    records = recorded(results, dataset)
    failures = []
    for backend, cache, _ in run.plan(dataset, "all", "all", 1):
        cell = [r for r in records if r.backend == backend and r.cache == cache]
        if not cell:
            failures.append(f"{dataset} {backend} {cache}: no record")
            continue
        record = cell[-1]
        found = problems_of(record)
        failures += [f"{dataset} {backend} {cache}: {p}" for p in found]
        print(f"{dataset:8} {backend:8} {cache:5} {'ok' if not found else 'WRONG':5} "
              f"cache {record.cache_method}, resident {record.cache_resident_fraction}, "
              f"{record.wall_seconds} s, AU {record.au}")
    return failures


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", type=Path, help="the results folder mounted into the container")
    p.add_argument("--dataset", default="mnist")
    a = p.parse_args(argv)
    failures = check(a.results, a.dataset)
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
