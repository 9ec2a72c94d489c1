"""What the project starts dies with its starter, each with real processes:

- the forked workers that prepare a dataset (data_prep/build.py) die when the process that forked
  them is SIGKILLed; a pool that is not killed still gives every record.
"""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest

from conftest import ROOT

WAIT_S = 10  # the most a death signal's effect is waited for


def gone(proc, timeout=WAIT_S):
    """Whether psutil.Process `proc` exited (or is a zombie) within `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


POOL = """
import os, sys, time
import numpy as np
from data_prep import build, datasets
folder = sys.argv[1]

def get(i):  # a record that never comes: the worker waits as one blocked on its work would
    open(os.path.join(folder, str(os.getpid())), "w").close()
    time.sleep(600)

split = datasets.Split("train", 512, (1, 2, 2), get, 2)
build.convert(split, None, None, 2, sink=lambda record: None, progress=False)
"""


def test_a_preparing_pools_forked_workers_die_with_the_process_that_forked_them(tmp_path):
    starter = subprocess.Popen([sys.executable, "-c", POOL, str(tmp_path)], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    workers = []
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.iterdir())) < 2:
            assert starter.poll() is None and time.monotonic() < deadline, starter.stderr.read()
            time.sleep(0.05)
        workers = [psutil.Process(int(p.name)) for p in tmp_path.iterdir()]
        assert all(w.ppid() == starter.pid for w in workers)
        starter.kill()
        starter.wait(timeout=WAIT_S)
        assert all(gone(w) for w in workers), [w.pid for w in workers if not gone(w, 0)]
    finally:
        starter.kill()
        starter.wait(timeout=WAIT_S)
        for w in workers:  # only this test's
            if not gone(w, 0):
                w.kill()


def test_a_pool_that_is_not_killed_gives_every_record_in_order():
    from data_prep import build, datasets
    images = np.arange(600 * 4, dtype=np.uint32).reshape(600, 1, 2, 2).astype(np.uint8)
    split = datasets.Split("train", 600, (1, 2, 2), lambda i: (str(i), i % 2, images[i]), 2)
    got = []
    total = build.convert(split, None, None, 2, sink=got.append, want_sum=True, progress=False)
    assert [r[0] for r in got] == [str(i) for i in range(600)]
    assert np.array_equal(total, images.astype(np.int64).sum(axis=0))

