"""run.py killed with SIGKILL on a Redis cell leaves nothing it started running: its
redis-servers, their keeper and delay proxy stop with it (a death signal), as Caffe and the
monitor do; and what a killed owner still left running (its death signal could not act) is
stopped by the next run, which says so. Real run.py, Caffe and redis-server processes, on a
cluster of its own (one master, one replica: a keeper runs; a round trip asked: a proxy runs)."""
import os
import subprocess
import sys
import time

import psutil
import pytest

from conftest import ROOT, line_within, redis_port_in_environment, run, stderr_tail

WAIT_S = 120  # the most a cluster's start is waited for


@pytest.fixture(scope="module")
def tiny_redis(tmp_path_factory):
    """MNIST's first 640 + 640 images in a cluster of its own (ports of its own): (data root,
    cluster), stopped."""
    from data_prep import build
    from data_prep.redis_cluster.cluster import Cluster
    data = tmp_path_factory.mktemp("killed-run-data")
    with redis_port_in_environment() as port:
        cluster = Cluster(data / "redis-cluster", port=port, nodes=1, replicas=1)  # its shape is kept for later starts
        try:
            with cluster.session():
                build.prepare("mnist", ["redis"], data, limit=640, progress=False, log=lambda *_: None)
            yield data, cluster
        finally:
            cluster.stop()


def run_args(data, out, iters):
    return [sys.executable, str(ROOT / "experiments" / "run.py"), "mnist", "redis", "warm", "--rtt", "2ms",
            "--accelerator", "5ms", "--iters", str(iters), "--data", str(data), "--out", str(out), "--quiet"]


def run_env(tmp_path, cluster):
    return dict(os.environ, IMGSTORE_LOCK=str(tmp_path / "run.lock"), IMGSTORE_REDIS_PORT=str(cluster.port))


def cluster_processes(cluster):
    """The cluster's servers, keeper and proxy as their pid files name them (psutil.Process: a pid
    and its start time), each asserted to run."""
    pids = cluster.server_pids() + [cluster.keeper_pid(), cluster.proxy_pid()]
    assert all(pids) and len(pids) == 4, pids
    return [psutil.Process(pid) for pid in pids]


def alive(processes):
    from data_prep.redis_cluster.servers import _zombie
    out = []
    for p in processes:
        try:
            if p.is_running() and not _zombie(p.pid):
                out.append(p)
        except psutil.Error:
            pass
    return out


def describe(processes):
    out = []
    for p in processes:
        try:
            out.append(f"{p.pid} {' '.join(p.cmdline())}")
        except psutil.Error:
            out.append(str(p.pid))
    return out


def test_run_py_killed_with_sigkill_leaves_no_process_it_started(tiny_redis, tmp_path):
    data, cluster = tiny_redis
    assert not cluster.running()
    killed = subprocess.Popen(run_args(data, tmp_path / "out", 100000), env=run_env(tmp_path, cluster),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    started = []
    try:
        deadline = time.monotonic() + 180
        while not any("Iteration" in log.read_text(errors="replace")
                      for log in (tmp_path / "out").glob("mnist/runs/*/caffe.log")):
            assert killed.poll() is None and time.monotonic() < deadline, stderr_tail(killed)
            time.sleep(0.2)
        started = list({p.pid: p for p in cluster_processes(cluster) + psutil.Process(killed.pid).children(
            recursive=True)}.values())  # Caffe, the monitor too
        killed.kill()
        killed.wait(timeout=10)
        deadline = time.monotonic() + 5
        while alive(started) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(started), describe(alive(started))
    finally:
        killed.kill()
        killed.wait(timeout=10)
        for p in alive(started):  # only what this test's run.py started
            p.kill()


LEFT_BY = """
import sys, threading, time
from data_prep.redis_cluster.cluster import Cluster
cluster = Cluster(sys.argv[1], port=int(sys.argv[2]))
# from another thread: the death signal would come when that thread exits, so none is set
starting = threading.Thread(target=cluster.start, kwargs=dict(rtt_ms=2, stops_with_caller=True))
starting.start()
starting.join()
print(" ".join(str(pid) for pid in cluster.server_pids() + [cluster.keeper_pid(), cluster.proxy_pid()]), flush=True)
time.sleep(600)
"""


def test_what_a_killed_owner_left_running_is_stopped_by_the_next_run_which_says_so(tiny_redis, tmp_path):
    data, cluster = tiny_redis
    assert not cluster.running()
    owner = subprocess.Popen([sys.executable, "-c", LEFT_BY, str(cluster.root), str(cluster.port)],
                             env=run_env(tmp_path, cluster), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    left = []
    try:
        said = line_within(owner, "the pids of the cluster a process started", time.monotonic() + WAIT_S)
        assert len(said.split()) == 4 and "None" not in said, stderr_tail(owner)
        left = cluster_processes(cluster)
        owner.kill()
        owner.wait(timeout=10)
        time.sleep(1)
        assert alive(left) == left  # its death signal could not act: they outlive it
        after = run(run_args(data, tmp_path / "out", 20), env=run_env(tmp_path, cluster))
        servers = ", ".join(str(p.pid) for p in left[:2])
        said = [line for line in after.stderr.splitlines() if line.startswith("stopping the Redis cluster")]
        assert said == [f"stopping the Redis cluster under {cluster.root} (redis-server pids {servers}; keeper pid "
                        f"{left[2].pid}; delay proxy pid {left[3].pid}): the process that started them (pid "
                        f"{owner.pid}) exited without stopping them, and they were to stop with it"], after.stderr
        assert not alive(left), describe(alive(left))
        assert not cluster.running() and not cluster.keeper_pid() and not cluster.proxy_pid()  # the run's own: stopped
    finally:
        owner.kill()
        owner.wait(timeout=10)
        for p in alive(left):
            p.kill()
