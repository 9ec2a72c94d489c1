"""experiments/proctrack.py on a real process: the CPU of threads that end between two samples
(as lmdb_read COALESCED's helper for each large read does) is kept in the record, not lost."""
import subprocess
import sys

import pytest

from experiments import proctrack

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
