"""What a Caffe training log says: solver time, iterations, test accuracy and loss
(the fields Caffe's tools/extra/parse_log.py reads)."""
import re
from datetime import datetime

GLOG = re.compile(r"^[IWEF](\d{8}|\d{4}) +(\d\d:\d\d:\d\d\.\d+)")  # glog >= 0.6 prints the year
ITERATION = re.compile(r"Iteration (\d+)(?: \(.*?\))?, loss = ([0-9.eE+-]+|nan|inf)")
TEST_OUTPUT = re.compile(r"Test net output #\d+: (\w+) = ([0-9.eE+-]+|nan|inf)")


def _stamp(line):
    m = GLOG.match(line)
    if not m:
        return None
    date = m.group(1) if len(m.group(1)) == 8 else "2000" + m.group(1)
    return datetime.strptime(date + " " + m.group(2), "%Y%m%d %H:%M:%S.%f")


def parse(text):
    first = done = None
    last_iter, train_loss, tests = 0, [], {}
    for line in text.splitlines():
        m = ITERATION.search(line)
        if m:
            last_iter = int(m.group(1))
            train_loss.append((last_iter, float(m.group(2))))
            if first is None:
                first = _stamp(line)
        m = TEST_OUTPUT.search(line)
        if m:
            tests[m.group(1)] = float(m.group(2))  # the last test pass wins
        if "Optimization Done" in line:
            done = _stamp(line)
    solver_seconds = (done - first).total_seconds() if first and done else None
    if solver_seconds is not None and solver_seconds < 0:  # crossed midnight (no year in old glog)
        solver_seconds += 86400
    return {"solver_seconds": solver_seconds, "done": done is not None, "last_iteration": last_iter,
            "first_loss": train_loss[0][1] if train_loss else None,
            "final_loss": train_loss[-1][1] if train_loss else None,
            "test_accuracy": tests.get("accuracy"), "test_loss": tests.get("loss")}
