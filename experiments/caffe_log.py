"""What a Caffe training log says: solver time, iterations, test accuracy and loss (the
fields Caffe's tools/extra/parse_log.py reads), when the first iteration was logged, the
solver's settings, and when each test pass ran and how long it took.

Caffe's solver loop (Solver::Step, Solver::Solve) logs iteration 0 after its forward and
backward pass; from that line to "Optimization Done" run max_iter - 1 more training iterations,
the test passes at multiples of test_interval after 0, and, when display divides max_iter, one
more forward pass to log the final loss. That is the window `solver_seconds` measures."""
import re
from datetime import datetime

GLOG = re.compile(r"^[IWEF](\d{8}|\d{4}) +(\d\d:\d\d:\d\d\.\d+)")  # glog >= 0.6 prints the year
ITERATION = re.compile(r"Iteration (\d+)(?: \(.*?\))?, loss = ([0-9.eE+-]+|nan|inf)")
TESTING = re.compile(r"Iteration (\d+), Testing net")
TEST_OUTPUT = re.compile(r"Test net output #\d+: (\w+) = ([0-9.eE+-]+|nan|inf)")
FAILOVER = re.compile(r"Redis failover: node (\S+) lost, its slots served by (.+?) after ([0-9.]+) s; "
                      r"(\d+) requests asked again")  # caffe/patches/0011
RING_JOINED = re.compile(r"lmdb_read SHARED (\S+): joined ring (\S+) \((\d+) bytes of records \+ (\d+) bytes of "
                         r"table .*?shared by (\d+) solvers\) at record (\d+) of pass (\d+)")  # caffe/patches/0013
RING_LEFT = re.compile(r"lmdb_read SHARED (\S+): left ring \S+; the ring took (\d+) records from the file for all "
                       r"solvers, (\d+) writer takeovers")
RING_WRITER = re.compile(r"lmdb_read SHARED (\S+): this solver \(pid \d+\) writes the ring now")
RING_SKIPPED = re.compile(r"lmdb_read SHARED (\S+): this solver \(pid \d+\) kept the others waiting for \d+ s "
                          r"and was left behind; it skips (\d+) records")
SETTING = re.compile(r"^(max_iter|display|test_iter|test_interval): (\d+)\s*$")
SOLVING = re.compile(r"\] Solving \S+$")


def _stamp(line):
    m = GLOG.match(line)
    if not m:
        return None
    date = m.group(1) if len(m.group(1)) == 8 else "2000" + m.group(1)
    return datetime.strptime(date + " " + m.group(2), "%Y%m%d %H:%M:%S.%f")


def fatal_messages(text):
    """The messages of a log's fatal lines (glog's "F... file:line] " taken off), in order."""
    return [line.split("] ", 1)[-1] for line in text.splitlines() if line.startswith("F")]


def parse(text):
    first = done = solving = None
    stopped_early = False
    last_iter, train_loss, tests, settings = 0, [], {}, {}
    passes = []  # [iteration, started, last output] per test pass
    failovers = []
    for line in text.splitlines():
        m = SETTING.match(line.strip())
        if m and m.group(1) not in settings:  # the solver's own, logged before the nets'
            settings[m.group(1)] = int(m.group(2))
        if solving is None and SOLVING.search(line):
            solving = _stamp(line)
        m = ITERATION.search(line)
        if m:
            last_iter = int(m.group(1))
            train_loss.append((last_iter, float(m.group(2))))
            if first is None:
                first = _stamp(line)
        m = TESTING.search(line)
        if m:
            passes.append([int(m.group(1)), _stamp(line), None])
        m = TEST_OUTPUT.search(line)
        if m:
            tests[m.group(1)] = float(m.group(2))  # the last test pass wins
            if passes:
                passes[-1][2] = _stamp(line)
        m = FAILOVER.search(line)
        if m:
            at = _stamp(line)
            failovers.append({"node": m.group(1), "served_by": m.group(2), "pause_seconds": float(m.group(3)),
                              "requests_asked_again": int(m.group(4)), "at": at.isoformat() if at else None})
        if "Optimization Done" in line:
            done = _stamp(line)
        stopped_early = stopped_early or "Optimization stopped early" in line
    if stopped_early:  # Caffe itself got a SIGINT: its tool still logs "Done" after
        done = None
    solver_seconds = _seconds(first, done)
    durations = [(i, _seconds(a, b)) for i, a, b in passes if a and b]
    initial = [p for p in passes if p[0] == 0]
    return {"solver_seconds": solver_seconds, "done": done is not None, "stopped_early": stopped_early,
            "last_iteration": last_iter,
            "first_iteration_at": first, "settings": settings,
            "first_loss": train_loss[0][1] if train_loss else None,
            "final_loss": train_loss[-1][1] if train_loss else None,
            "test_accuracy": tests.get("accuracy"), "test_loss": tests.get("loss"),
            "test_iteration": passes[-1][0] if passes else None,
            "tests_after_start": sum(1 for p in passes if p[0] > 0),
            "initial_test_at": initial[0][1] if initial else None,
            "initial_test_done_at": initial[0][2] if initial else None, "solving_at": solving,
            "test_pass_seconds": [d for i, d in durations if i > 0], "failovers": failovers}


def shared_rings(text):
    """Each lmdb_read SHARED ring the solver read (one per database): its memory, the solvers
    on it and the record where this one joined, and, once it left, how many records the ring
    took from the file for all solvers and how often its writer changed; records_skipped: how
    many records this solver skipped, left behind by the ring (it kept the others waiting)."""
    rings = {}
    for line in text.splitlines():
        m = RING_JOINED.search(line)
        if m:
            rings[m.group(1)] = {"database": m.group(1), "ring": m.group(2), "ring_bytes": int(m.group(3)),
                                 "table_bytes": int(m.group(4)), "solvers_at_join": int(m.group(5)),
                                 "joined_at_record": int(m.group(6)), "joined_at_pass": int(m.group(7)),
                                 "records_written": None, "takeovers": None, "took_over_writing": 0,
                                 "records_skipped": 0}
        m = RING_LEFT.search(line)
        if m and m.group(1) in rings:
            rings[m.group(1)].update(records_written=int(m.group(2)), takeovers=int(m.group(3)))
        m = RING_WRITER.search(line)
        if m and m.group(1) in rings:
            rings[m.group(1)]["took_over_writing"] += 1
        m = RING_SKIPPED.search(line)
        if m and m.group(1) in rings:
            rings[m.group(1)]["records_skipped"] += int(m.group(2))
    return list(rings.values())


def _seconds(a, b):
    if not (a and b):
        return None
    s = (b - a).total_seconds()
    return s + 86400 if s < 0 else s  # crossed midnight (no year in old glog)


def timed_compute(parsed, max_iter=None, test_iter=None):
    """(training iterations, extra forward passes, test iterations) of accelerator work inside
    `solver_seconds` (see the module's docstring), or None for an unfinished log. max_iter,
    test_iter: the solver's, when the log does not say them."""
    s = parsed["settings"]
    max_iter = s.get("max_iter", max_iter)
    if not parsed["done"] or not max_iter or parsed["first_iteration_at"] is None:
        return None
    display = s.get("display", 0)
    final_forward = 1 if display and max_iter % display == 0 else 0
    return max_iter - 1, final_forward, parsed["tests_after_start"] * (s.get("test_iter", test_iter) or 0)


class LogError(ValueError):
    pass


AU_TOLERANCE = 1e-9  # relative: float rounding only; more is compute counted that did not run


def carried_in(parsed, compute, test_iter=None):
    """Seconds of emulated compute the window may hold less of than timed_compute counts, at
    most. EmulatedCompute (caffe/patches/0010) takes back what a wait overshot from its next
    wait, so what the train layer overshot in iteration 0 and the test layer in the initial test
    pass, both before the window, comes off waits inside it. An overshoot is at most what that
    pass took beyond its time: iteration 0 (from the end of the initial test pass, or the
    solver's start, to its log line) and the initial test pass."""
    if parsed["first_iteration_at"] is None:
        return 0.0
    before = parsed["initial_test_done_at"] or parsed["solving_at"]
    iteration_0 = _seconds(before, parsed["first_iteration_at"])
    initial_test = _seconds(parsed["initial_test_at"], parsed["initial_test_done_at"])
    test_iter = parsed["settings"].get("test_iter", test_iter) or 0
    return (max(0.0, (iteration_0 or 0) - compute.ms_per_iteration / 1000)
            + max(0.0, (initial_test or 0) - test_iter * (compute.test_ms_per_iteration or 0) / 1000))


def timing(parsed, compute, max_iter=None, test_iter=None, log=None):
    """What a parsed Caffe log says about time, beyond the solver's seconds: the initial test
    pass, the test passes inside the solver's window and their time per test iteration, and the
    AU over the accelerator work in that window (timed_compute), for a Compute
    (experiments/accelerators.py). On emulated compute, more compute than the window, beyond
    what the layers carried into it (carried_in), was counted but did not run: a LogError naming
    `log` (the log's path), not an AU capped at 1; within the carry the window was all compute: 1.
    A real GPU measured against a ceiling (accelerators.real) that ran faster than it: 1."""
    first, initial = parsed["first_iteration_at"], parsed["initial_test_at"]
    tests, test_iter = parsed["test_pass_seconds"], parsed["settings"].get("test_iter", test_iter)
    work = timed_compute(parsed, max_iter, test_iter)
    compute_seconds = compute.seconds(work)
    au = (compute_seconds / parsed["solver_seconds"]
          if compute_seconds is not None and parsed["solver_seconds"] else None)
    checked = au is not None and compute.mode == "emulated"
    carried = carried_in(parsed, compute, test_iter) if checked else 0.0
    if checked and compute_seconds - carried > parsed["solver_seconds"] * (1 + AU_TOLERANCE):
        raise LogError(f"{log or 'a Caffe log'}: AU {au:.6f} > 1: {compute_seconds:.6f} s of "
                       f"{compute.accelerator or compute.mode} compute ({work[0]} iterations, {work[1]} final "
                       f"forward, {work[2]} test iterations) in a solver window of {parsed['solver_seconds']:.6f} s, "
                       f"{carried:.6f} s of it at most carried in from before it")
    return {"initial_test_seconds": round((first - initial).total_seconds(), 3) if first and initial else None,
            "test_seconds": round(sum(tests), 3) if tests else None,
            "test_ms_per_iteration": round(1000 * sum(tests) / (len(tests) * test_iter), 4) if tests and test_iter else None,
            "au": round(min(au, 1.0), 4) if au is not None else None}


def phases_begun(text):
    """Which of "initial test" (the test pass at iteration 0) and "training" (the first logged
    iteration) a piece of a log shows beginning, in order."""
    found = [(m.start(), "initial test") for m in TESTING.finditer(text) if m.group(1) == "0"][:1]
    m = ITERATION.search(text)
    found += [(m.start(), "training")] if m else []
    return [name for _, name in sorted(found)]


def last_iteration(text):
    """The last iteration a (growing) log shows, for progress."""
    found = ITERATION.findall(text)
    return int(found[-1][0]) if found else None
