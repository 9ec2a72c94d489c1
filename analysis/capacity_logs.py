"""A capacity run's own files and its training window: the caffe.log and monitor.csv of a run's
folder (or of DATASET/runs.tar.xz, where a results folder committed its runs packed), why its
solvers failed in words, and the monitor's samples inside the window from the first solver's first
training iteration to the last one's end."""
import collections
import csv
import functools
import io
import signal
import statistics
import tarfile
from pathlib import Path

from experiments import caffe_log


def run_log(results, run_dir):
    """A run's caffe.log: in its folder, or in DATASET/runs.tar.xz where a results folder
    committed its run folders packed ("" when neither has it)."""
    return run_file(results, run_dir, "caffe.log")


def run_file(results, run_dir, name):
    """The text of file `name` of a run's folder (caffe.log, monitor.csv): in the folder, or in
    DATASET/runs.tar.xz ("" when neither has it)."""
    path = results / run_dir / name
    if path.is_file():
        return path.read_text(errors="replace")
    dataset, *rest = Path(run_dir).parts or ("",)
    return _packed_texts(results / dataset / "runs.tar.xz").get(str(Path(*rest, name)), "")


PACKED_KEPT = ("/caffe.log", "/monitor.csv")


@functools.lru_cache(maxsize=None)
def _packed_texts(tar):
    """{runs/ID/NAME: its text} of the logs and monitor samples of a packed folder of runs (read once)."""
    if not tar.is_file():
        return {}
    with tarfile.open(tar) as t:
        return {m.name: t.extractfile(m).read().decode(errors="replace")
                for m in t.getmembers() if m.name.endswith(PACKED_KEPT)}


def failure_causes(records, results):
    """Why solvers failed, in words, most common first: the first fatal line of the solver's
    log, or else the signal that killed it (SIGKILL: the kernel's OOM killer, as a rule)."""
    causes = collections.Counter()
    for r in records:
        if r.ok:
            continue
        text = run_log(Path(results), r.run_dir or "")
        fatal = next(iter(caffe_log.fatal_messages(text)), None)
        if fatal is None and r.returncode is not None and r.returncode < 0:
            fatal = f"killed by {signal.Signals(-r.returncode).name}"
        causes[(fatal or f"exit {r.returncode}").split(" /")[0][:80]] += 1  # no paths: one cause, one line
    return [f"{n} x {cause}" for cause, n in causes.most_common()]


def training_window(group):
    """(start, end), seconds from the group's start, from the first solver's first training
    iteration to the last one's end (each solver's start-up and the test pass at iteration 0
    apart), or None without the records' timings."""
    spans = [(r.startup_seconds + (r.initial_test_seconds or 0), r.solver_seconds) for r in group
             if r.startup_seconds is not None and r.solver_seconds]
    if not spans:
        return None
    return min(s for s, _ in spans), max(s + d for s, d in spans)


def window_samples(group, window, results):
    """The monitor's rows (monitor.csv, one for the group, in its first solver's folder) taken
    inside the training window; None where the folder or window is not at hand or no sample
    fell inside (a window under a second)."""
    if window is None or results is None:
        return None
    text = next(filter(None, (run_file(Path(results), r.run_dir, "monitor.csv") for r in group if r.run_dir)), "")
    start, end, previous, rows = *window, 0.0, []
    for row in csv.DictReader(io.StringIO(text)):
        if not row.get("t"):
            continue
        t = float(row["t"])
        if start + 0.5 <= t <= end + 0.5:  # each row: the interval since the one before
            rows.append(dict(row, seconds=t - previous))
        previous = t
    return rows or None


def sampled_mean(rows, column):
    values = [float(row[column]) for row in rows or [] if row.get(column) not in (None, "")]
    return statistics.fmean(values) if values else None
