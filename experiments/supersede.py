"""Mark recorded runs as superseded, with the reason, instead of deleting them: their status
becomes "superseded" (reports and tables leave them out, as they leave out failed runs), the
reason goes to `revised`, and everything measured stays. Records are rewritten whole (temp
file, rename).

    .venv/bin/python experiments/supersede.py RESULTS/DATASET RUN_ID [RUN_ID ...] \\
        --why "ran while the test suite competed for the 2 cores"

RESULTS/DATASET: every records*.jsonl in it (records.jsonl and its shards); or one such file.
"""
import argparse
import fcntl
import json
import os
import sys
import time
from pathlib import Path

from experiments.record import record_files


def supersede(path, run_ids, why):
    """Marks the runs; returns the run ids that were not found."""
    path = Path(path)
    with open(path, "a") as lock:  # the lock record.append takes: no append is lost meanwhile
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _supersede_locked(path, run_ids, why)


def _supersede_locked(path, run_ids, why):
    lines, wanted, out = path.read_text().splitlines(), set(run_ids), []
    for line in lines:
        if not line.strip():
            continue
        d = json.loads(line)
        if d.get("run_id") in wanted:
            wanted.discard(d["run_id"])
            d.update(status="superseded", revised=f"{time.strftime('%Y-%m-%d')}: superseded ({why}); "
                                                  f"status was {d.get('status')}")
        out.append(json.dumps(d, sort_keys=True))
    if len(wanted) < len(set(run_ids)):
        tmp = path.with_suffix(".jsonl.tmp")
        tmp.write_text("\n".join(out) + "\n")
        os.replace(tmp, path)
    return sorted(wanted)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("records", help="a dataset's results folder, or one records*.jsonl")
    ap.add_argument("run_ids", nargs="+")
    ap.add_argument("--why", required=True, help="the reason, kept in each record")
    a = ap.parse_args(argv)
    missing = set(a.run_ids)
    for path in record_files(a.records) if Path(a.records).is_dir() else [a.records]:
        if missing:
            missing = set(supersede(path, sorted(missing), a.why))
    if missing:
        print(f"{a.records}: no run {', '.join(sorted(missing))}", file=sys.stderr)
        return 1
    print(f"{a.records}: {len(set(a.run_ids))} runs marked superseded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
