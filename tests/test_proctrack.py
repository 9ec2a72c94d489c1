"""experiments/proctrack.py on a real process: the CPU of threads that end between two samples
(as lmdb_read COALESCED's helper for each large read does) is kept in the record, not lost; a real
Caffe run's CPU in its training window is kept apart from its start-up."""
import subprocess
import sys

import pytest

from experiments import proctrack, runner
from experiments.config import RunConfig

SHORT_THREADS = """
import threading, time
def burn():
    end = time.process_time() + 0.02
    while time.process_time() < end:
        pass
for _ in range(60):  # 60 threads of ~20 ms of CPU each, one after another, ~1.2 s
    t = threading.Thread(target=burn); t.start(); t.join()
"""


def test_threads_that_end_between_samples_are_counted_as_not_sampled():
    child = subprocess.Popen([sys.executable, "-c", SHORT_THREADS])
    tracker = proctrack.Tracker(child.pid)
    try:
        while not tracker.wait(0.5):
            tracker.sample()
        found = tracker.summary()
    finally:
        if child.poll() is None:  # the tracker failed before the child ended
            child.kill()
        child.wait(timeout=10)
    roles = found["thread_cpu_seconds"]
    assert found["cpu_seconds"] >= 1.0, found
    assert roles[proctrack.UNSAMPLED] >= 0.5 * found["cpu_seconds"], roles  # most of it: no sample saw those threads
    assert sum(roles.values()) == pytest.approx(found["cpu_seconds"], abs=0.01)


def test_the_data_layers_transform_threads_count_in_the_data_path():
    """caffe/patches/0016 names the Data layer's pool threads caffe-transform: their CPU is the
    data path's, beside the prefetch thread's, as ImageData's caffe-decode threads' is."""
    by_role = proctrack.roles({1: ("python", 1.0), 2: ("caffe-prefetch", 2.0), 3: ("caffe-transform", 0.5),
                               4: ("caffe-transform", 0.25), 5: ("caffe-decode", 0.125)}, pid=1)
    assert by_role[proctrack.TRANSFORM] == 0.75 and by_role[proctrack.PREFETCH] == 2.0
    assert proctrack.readers_cpu(by_role) == 0.875 and proctrack.OTHER not in by_role


def test_a_run_records_its_cpu_in_the_training_window_apart_from_its_startup(mnist_small, tmp_path):
    """Record.training_cpu_seconds, from the tracker's samples: what the stoppers judge the cores
    on (analysis/capacity.py _processes_cpu), start-up and the initial test pass apart."""
    r = runner.run(RunConfig("mnist", "lmdb", "warm", iters=300, cpu=True, accelerator="4ms", data=str(mnist_small.parent),
                             out=str(tmp_path), quiet=True), log=lambda *_: None)
    whole = r.process["cpu_seconds"]
    assert r.ok and r.training_cpu_seconds is not None, r.training_cpu_seconds
    # the start-up (libraries, the nets, opening the data) and the test pass at iteration 0 used CPU too
    assert 0 < r.training_cpu_seconds < whole, (r.training_cpu_seconds, whole)
    # no more than every core for the whole window
    assert r.training_cpu_seconds <= r.solver_seconds * r.environment["cpu_cores"] + 0.05, r
