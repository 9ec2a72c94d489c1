"""Re-derive a results folder's log-derived record fields with today's rules, from each run's
own Caffe log (RESULTS/DATASET/runs/RUN_ID/caffe.log): AU over the accelerator work inside the
solver's window, start-up without the test pass at iteration 0, that pass on its own, and the
test passes' measured time. Nothing measured is changed; records without a log are left as they
are; each changed record says so in `revised`. Records are rewritten whole (temp file, rename).

    .venv/bin/python experiments/rederive.py RESULTS [RESULTS ...]   # e.g. the catalogue's folders (catalogue.py)
"""
import argparse
import json
import os
from pathlib import Path

from experiments import accelerators, caffe_log
from experiments.record import RECORD_FILES, Record

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
    """Rewrites every DATASET/records*.jsonl under `results`; returns (records, changed)."""
    total = changed = 0
    for path in sorted(Path(results).glob("*/" + RECORD_FILES)):
        lines, out = path.read_text().splitlines(), []
        for line in lines:
            if not line.strip():
                continue
            before = json.loads(line)
            after = rederive(before, results)
            total, changed = total + 1, changed + (after is not None)
            out.append(json.dumps(after or before, sort_keys=True))
        tmp = path.with_suffix(".jsonl.tmp")
        tmp.write_text("\n".join(out) + "\n")
        os.replace(tmp, path)
    return total, changed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", help="results folders (holding DATASET/records.jsonl)")
    for results in ap.parse_args(argv).results:
        total, changed = rederive_folder(results)
        print(f"{results}: {changed} of {total} records re-derived from their logs")


if __name__ == "__main__":
    main()
