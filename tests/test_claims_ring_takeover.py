"""docs/faults.md's claim for the shared LMDB ring (caffe/patches/0013): when the solver that
writes the ring is killed, another solver takes over writing within 100 ms. Each solver's
feeder thread asks for the writer's lock (a byte of the ring's file, which the kernel frees when
the writer dies) every 50 ms; the one that gets it logs "writes the ring now". The takeover is
timed from the SIGKILL to that line's glog stamp (the same wall clock), TRIES times."""
import statistics
import os
import re
import signal
import time
from datetime import datetime

from test_lmdb_read import databases  # noqa: F401 (a fixture)
from test_lmdb_shared import driver, finish, forward, no_ring_left_behind, small_ring  # noqa: F401

DOC_BOUND_S = 0.100  # docs/faults.md: within 100 ms (two looks)
LOOK_S = 0.050  # kWaitMs: how often a feeder asks for the writer's lock (caffe/patches/0013)
# On this project's 2-core machine with other suites running (load 7-11) single takeovers took
# 15-93 ms (n = 24, median 51 ms): a feeder woken late misses a look. The median of TRIES is held
# to the documented bound, which that median meets by half; each one to EACH_BOUND_S, far under
# the 20 s the others wait on a writer that stopped before giving up (docs/faults.md).
TRIES = 3
EACH_BOUND_S = 10 * LOOK_S
TOOK_OVER = re.compile(r"^I(\d{8} \d\d:\d\d:\d\d\.\d{6}) .*lmdb_read SHARED \S+: this solver \(pid (\d+)\) "
                       r"writes the ring now, from record (\d+)$", re.M)


def takeover_seconds(databases, tmp_path):
    """Two solvers on one ring, the writer killed after 4 batches each: seconds from the kill to
    the survivor's "writes the ring now" line, and the survivor's log."""
    _, _, net = small_ring(databases, tmp_path)
    writer = driver(net)  # alone at first: its feeder is the ring's writer
    other = driver(net)
    forward([writer, other], 4)
    time.sleep(0.2)  # both idle: the survivor's feeder is in its 50 ms wait loop, not starting up
    killed_at = datetime.now()
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait(timeout=30)
    forward([other], 10)  # records the survivor writes
    log = finish(other)
    [(stamp, pid, _)] = TOOK_OVER.findall(log)
    assert int(pid) == other.pid
    return (datetime.strptime(stamp, "%Y%m%d %H:%M:%S.%f") - killed_at).total_seconds(), log


def test_the_writer_killed_another_solver_writes_the_ring_within_the_bound(databases, tmp_path):
    took = []
    for i in range(TRIES):
        (tmp_path / str(i)).mkdir()
        seconds, log = takeover_seconds(databases, tmp_path / str(i))
        assert "1 writer takeovers; removed it" in log
        took.append(seconds)
    shown = ", ".join(f"{t * 1000:.0f}" for t in took)
    assert all(0 < t <= EACH_BOUND_S for t in took), \
        f"a takeover took over {EACH_BOUND_S * 1000:.0f} ms: {shown} ms (a feeder looks every {LOOK_S * 1000:.0f} ms)"
    assert statistics.median(took) <= DOC_BOUND_S, \
        f"the takeovers took {shown} ms, median over docs/faults.md's {DOC_BOUND_S * 1000:.0f} ms"
