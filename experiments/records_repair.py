"""Repair a records file: move the lines that hold no whole record (a write cut short, records
glued onto it, not JSON) aside into rejected-STEM-UTCSTAMP.jsonl beside it, each with its line
number and why (kept, never deleted), and leave the good lines in order. Records glued on one
line are split back onto lines of their own; a cut record before them is what is moved aside.
Done under the lock appends take; killed midway, the file is the old one or the repaired one
(experiments/records_log.py).

    imgstore records repair results/mnist/records.jsonl
    imgstore records repair results/mnist          # every records*.jsonl in it
    imgstore records repair results                # every DATASET/records*.jsonl under it

Exit status: 0 repaired, or nothing to repair; 2 no such file or folder, no records file in it,
or the repair could not be written.
"""
import argparse
import json
import sys
from pathlib import Path

from experiments import records_log
from experiments.record import RECORD_FILES, record_files


def repair(path):
    """Repairs one records file; returns what it did, in words, or None when it was whole."""
    path = Path(path)
    with records_log.locked(path):
        lines = path.read_text(errors="replace").splitlines()
        kept, rejected, split = [], [], []
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                records_log.parse(line)
                kept.append(line)
                continue
            except ValueError as e:
                why = str(e)
            cut, records = records_log.split(line)
            if records:
                kept += [json.dumps(d, sort_keys=True) for d in records]
                split.append(f"line {n}: {len(records)} record{'s' * (len(records) > 1)} kept")
            if cut.strip():
                rejected.append((n, why, cut))
        if not rejected and not split:
            return None
        aside = records_log.set_aside(path, rejected) if rejected else None
        records_log.rewrite(path, kept)
    said = [f"{len(kept)} records kept in order"]
    if rejected:
        said.append(f"{len(rejected)} bad line{'s' * (len(rejected) > 1)} (line "
                    f"{', '.join(str(n) for n, _, _ in rejected)}) moved to {aside}")
    if split:
        said.append(f"records glued together split back onto lines of their own ({'; '.join(split)})")
    return f"{path}: " + "; ".join(said)


def files_of(target):
    """The records files a FILE|FOLDER argument names: the file, a dataset folder's, or a results folder's."""
    target = Path(target)
    if target.is_file():
        return [target]
    return record_files(target) or sorted(target.glob("*/" + RECORD_FILES)) if target.is_dir() else []


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target", nargs="+", metavar="FILE|FOLDER",
                    help="a records*.jsonl, a dataset's results folder, or a results folder")
    status = 0
    for target in ap.parse_args(argv).target:
        files = files_of(target)
        if not files:
            print(f"error: {target}: no records file (records*.jsonl) there", file=sys.stderr)
            status = 2
        for path in files:
            try:
                print(repair(path) or f"{path}: every line a record; nothing to repair")
            except OSError as e:
                print(f"error: {path}: not repaired ({e})", file=sys.stderr)
                status = 2
    return status


if __name__ == "__main__":
    sys.exit(main())
