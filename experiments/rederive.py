"""Re-derive a results folder's log-derived record fields with today's rules, from each run's
own Caffe log (RESULTS/DATASET/runs/RUN_ID/caffe.log): AU over the accelerator work inside the
solver's window, start-up without the test pass at iteration 0, that pass on its own, and the
test passes' measured time. Nothing measured is changed; records without a log are left as they
are; each changed record says so in `revised`. The logs are read outside the lock; each file is
then rewritten whole under the lock appends take (experiments/records_log.py), from what it
holds by then: records appended meanwhile are kept, a record changed meanwhile is left as it is.
A file with lines that hold no record is refused (`imgstore records repair`), exit status 2.

    .venv/bin/python experiments/rederive.py RESULTS [RESULTS ...]   # e.g. the catalogue's folders (catalogue.py)
"""
import argparse
import json
import sys
from pathlib import Path

from experiments import accelerators, caffe_log, records_log
from experiments.record import RECORD_FILES, Record, RecordsDamaged

REVISION = "2026-11-23: AU over the timed window, initial test pass apart from start-up (experiments/rederive.py)"


def rederive(d, results):
    """The record (as stored: a dict, every key kept) with its log-derived fields re-derived;
    None when its log is gone or it is already re-derived."""
    record = Record.from_dict(d)
    log = Path(results) / (record.run_dir or "-") / "caffe.log"
    if not log.is_file() or record.revised == REVISION:
        return None
    parsed = caffe_log.parse(log.read_text(errors="replace"))
    compute = accelerators.Compute.from_dict(record.compute)
    timed = caffe_log.timing(parsed, compute, record.iterations_setting, log=log)
    d = dict(d)
    if record.initial_test_seconds is None and timed["initial_test_seconds"] and record.startup_seconds is not None:
        d["startup_seconds"] = round(record.startup_seconds - timed["initial_test_seconds"], 3)
    d.update(timed, revised=REVISION)
    return d


def rederive_folder(results):
    """Rewrites every DATASET/records*.jsonl under `results`; returns (records, changed).
    RecordsDamaged: a file holds bad lines (the files before it are rewritten)."""
    total = changed = 0
    for path in sorted(Path(results).glob("*/" + RECORD_FILES)):
        good, bad = records_log.read_locked(path)
        if bad:
            raise RecordsDamaged(path, bad)
        derived = {}  # the line as read -> the record re-derived
        for _, d in good:
            after = rederive(d, results)
            if after is not None:
                derived[json.dumps(d, sort_keys=True)] = json.dumps(after, sort_keys=True)
        total += len(good)
        if derived:
            changed += _rewrite_with(path, derived)
    return total, changed


def _rewrite_with(path, derived):
    """Rewrites the file under the lock with each record whose line is still as read replaced by
    its re-derived one; returns how many were."""
    with records_log.locked(path):
        good, bad = records_log.read(path)
        if bad:
            raise RecordsDamaged(path, bad)
        lines = [json.dumps(d, sort_keys=True) for _, d in good]
        out = [derived.get(line, line) for line in lines]
        records_log.rewrite(path, out)
    return sum(a != b for a, b in zip(lines, out))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", help="results folders (holding DATASET/records.jsonl)")
    for results in ap.parse_args(argv).results:
        try:
            total, changed = rederive_folder(results)
        except (RecordsDamaged, OSError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"{results}: {changed} of {total} records re-derived from their logs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
