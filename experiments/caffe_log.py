"""What a Caffe training log says: solver time, iterations, test accuracy and loss (the
fields Caffe's tools/extra/parse_log.py reads), when the first iteration was logged and at
which iterations the test net ran."""
import re
from datetime import datetime

GLOG = re.compile(r"^[IWEF](\d{8}|\d{4}) +(\d\d:\d\d:\d\d\.\d+)")  # glog >= 0.6 prints the year
ITERATION = re.compile(r"Iteration (\d+)(?: \(.*?\))?, loss = ([0-9.eE+-]+|nan|inf)")
TESTING = re.compile(r"Iteration (\d+), Testing net")
TEST_OUTPUT = re.compile(r"Test net output #\d+: (\w+) = ([0-9.eE+-]+|nan|inf)")


def _stamp(line):
    m = GLOG.match(line)
    if not m:
        return None
    date = m.group(1) if len(m.group(1)) == 8 else "2000" + m.group(1)
    return datetime.strptime(date + " " + m.group(2), "%Y%m%d %H:%M:%S.%f")


def parse(text):
    first = done = None
    last_iter, train_loss, tests, test_iters = 0, [], {}, []
    for line in text.splitlines():
        m = ITERATION.search(line)
        if m:
            last_iter = int(m.group(1))
            train_loss.append((last_iter, float(m.group(2))))
            if first is None:
                first = _stamp(line)
        m = TESTING.search(line)
        if m:
            test_iters.append(int(m.group(1)))
        m = TEST_OUTPUT.search(line)
        if m:
            tests[m.group(1)] = float(m.group(2))  # the last test pass wins
        if "Optimization Done" in line:
            done = _stamp(line)
    solver_seconds = (done - first).total_seconds() if first and done else None
    if solver_seconds is not None and solver_seconds < 0:  # crossed midnight (no year in old glog)
        solver_seconds += 86400
    return {"solver_seconds": solver_seconds, "done": done is not None, "last_iteration": last_iter,
            "first_iteration_at": first,
            "first_loss": train_loss[0][1] if train_loss else None,
            "final_loss": train_loss[-1][1] if train_loss else None,
            "test_accuracy": tests.get("accuracy"), "test_loss": tests.get("loss"),
            "test_iteration": test_iters[-1] if test_iters else None,
            "tests_after_start": sum(1 for i in test_iters if i > 0)}


def last_iteration(text):
    """The last iteration a (growing) log shows, for progress."""
    found = ITERATION.findall(text)
    return int(found[-1][0]) if found else None
