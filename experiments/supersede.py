"""Mark recorded runs as superseded, with the reason, instead of deleting them: their status
becomes "superseded" (reports and tables leave them out, as they leave out failed runs), the
reason goes to `revised`, and everything measured stays. Each file is rewritten whole under
the lock appends take (experiments/records_log.py: no append is lost, a kill leaves the old
file or the new); a file with lines that hold no record is refused (`imgstore records repair`).

    .venv/bin/python experiments/supersede.py RESULTS/DATASET RUN_ID [RUN_ID ...] \\
        --why "ran while the test suite competed for the 2 cores"

RESULTS/DATASET: every records*.jsonl in it (records.jsonl and its shards); or one such file.
"""
import argparse
import json
import sys
import time
from pathlib import Path

from experiments import records_log
from experiments.record import RecordsDamaged, record_files


def supersede(path, run_ids, why):
    """Marks the runs; returns the run ids that were not found. RecordsDamaged: the file holds bad lines."""
    path = Path(path)
    with records_log.locked(path):
        good, bad = records_log.read(path)
        if bad:
            raise RecordsDamaged(path, bad)
        return _supersede_locked(path, good, run_ids, why)


def _supersede_locked(path, good, run_ids, why):
    wanted, out = set(run_ids), []
    for _, d in good:
        if d.get("run_id") in wanted:
            wanted.discard(d["run_id"])
            d.update(status="superseded", revised=f"{time.strftime('%Y-%m-%d')}: superseded ({why}); "
                                                  f"status was {d.get('status')}")
        out.append(json.dumps(d, sort_keys=True))
    if len(wanted) < len(set(run_ids)):
        records_log.rewrite(path, out)
    return sorted(wanted)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("records", help="a dataset's results folder, or one records*.jsonl")
    ap.add_argument("run_ids", nargs="+")
    ap.add_argument("--why", required=True, help="the reason, kept in each record")
    a = ap.parse_args(argv)
    missing = set(a.run_ids)
    try:
        for path in record_files(a.records) if Path(a.records).is_dir() else [a.records]:
            if missing:
                missing = set(supersede(path, sorted(missing), a.why))
    except (RecordsDamaged, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if missing:
        print(f"{a.records}: no run {', '.join(sorted(missing))}", file=sys.stderr)
        return 1
    print(f"{a.records}: {len(set(a.run_ids))} runs marked superseded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
