"""run.py killed with SIGKILL on a Redis cell leaves nothing it started running: its
redis-servers, their keeper and delay proxy stop with it (a death signal), as Caffe and the
monitor do; and what a killed owner still left running (its death signal could not act) is
stopped by the next run, which says so. Real run.py, Caffe and redis-server processes, on a
cluster of its own (one master, one replica: a keeper runs; a round trip asked: a proxy runs).

In each phase of a local cell too (preparing the data in forked workers, warming the cache in a
reader, training, recording), a SIGKILLed run.py leaves no process that carries its environment
(a marker variable set for it alone, looked for in every /proc/PID/environ)."""
import os
import signal
import subprocess
import sys
import time
import uuid

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


MARK = "IMGSTORE_TEST_KILLED_RUN"  # set in the environment of one run.py, inherited by all it starts
PHASE_WAIT_S = 300  # the most a phase is waited for on a loaded 2-core machine


def marked(mark):
    """Pids (not zombies) whose environment holds MARK=mark: what that run.py started, itself too."""
    found, needle = [], f"{MARK}={mark}".encode() + b"\0"
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                if needle in f.read() + b"\0":
                    found.append(psutil.Process(int(entry.name)))
        except (OSError, psutil.Error):
            pass
    return alive(found)


def start_local_run(data, out, tmp_path, *args):
    mark = uuid.uuid4().hex
    env = dict(os.environ, IMGSTORE_LOCK=str(tmp_path / "run.lock"), **{MARK: mark})
    argv = [sys.executable, str(ROOT / "experiments" / "run.py"), "cifar10", "lmdb", "warm", "--accelerator", "5ms",
            "--data", str(data), "--out", str(out), "--quiet", *args]
    return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True), mark


def kill_when(run_py, mark, ready, what):
    """SIGKILLs run.py once ready() is true (polled; bounded), then waits (bounded) for every
    process its environment marks to be gone; returns what ready() returned."""
    try:
        deadline = time.monotonic() + PHASE_WAIT_S
        while not (got := ready()):
            assert run_py.poll() is None, f"run.py ended before {what}: {stderr_tail(run_py)}"
            assert time.monotonic() < deadline, f"no {what} within {PHASE_WAIT_S} s"
            time.sleep(0.005)
        run_py.kill()
        run_py.wait(timeout=10)
        deadline = time.monotonic() + 10
        while marked(mark) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not marked(mark), describe(marked(mark))
        return got
    finally:
        run_py.kill()
        run_py.wait(timeout=10)
        for p in marked(mark):  # only what this test's run.py started
            p.kill()


@pytest.fixture(scope="module")
def cifar_ready(tmp_path_factory):
    """The CIFAR-10 stand-in, 400 + 100 images, as LMDB: a run's phases after preparing."""
    from data_prep import build
    data = tmp_path_factory.mktemp("killed-run-cifar")
    build.prepare("cifar10", ["lmdb"], data, count=400, progress=False, log=lambda *_: None)
    return data


@pytest.mark.timeout(600)
def test_run_py_killed_while_preparing_leaves_no_worker(tmp_path):
    if os.cpu_count() < 2:
        pytest.skip("one core: preparing forks no workers")
    data = tmp_path / "data"
    run_py, mark = start_local_run(data, tmp_path / "out", tmp_path, "--count", "30000", "--iters", "2")

    def workers_writing():
        partial = data / "cifar10" / ".lmdb.partial"
        return partial.is_dir() and len(marked(mark)) >= 3  # run.py and its forked workers
    kill_when(run_py, mark, workers_writing, "forked workers writing the LMDB")
    assert not (data / "cifar10" / "lmdb" / "manifest.json").exists()  # nothing half written looks finished


READER = "sys.stdin.read().splitlines()"  # data_prep/cache.py's warm-up reader's program


@pytest.mark.timeout(900)
def test_run_py_killed_while_warming_leaves_no_reader(cifar_ready, tmp_path):
    """The reader lives a fraction of a second: once seen it is stopped (SIGSTOP) so that run.py
    is killed while it waits on it; a reader missed is tried again, a few runs at most."""
    for attempt in range(5):
        run_py, mark = start_local_run(cifar_ready, tmp_path / f"out{attempt}", tmp_path, "--iters", "2")

        def reader():
            for p in marked(mark):
                try:
                    if any(READER in a for a in p.cmdline()):
                        p.send_signal(signal.SIGSTOP)
                        return p
                except psutil.Error:
                    pass
            return run_py.poll() is not None and "missed"
        if kill_when(run_py, mark, reader, "the warm-up reader") != "missed":
            return
    pytest.fail("the warm-up reader was not seen running in 5 runs")


def caffe_log_says(out, words):
    return lambda: any(words in log.read_text(errors="replace") for log in out.glob("cifar10/runs/*/caffe.log"))


@pytest.mark.timeout(900)
def test_run_py_killed_while_training_leaves_no_process(cifar_ready, tmp_path):
    out = tmp_path / "out"
    run_py, mark = start_local_run(cifar_ready, out, tmp_path, "--iters", "100000")
    kill_when(run_py, mark, caffe_log_says(out, "Iteration"), "Caffe training")


@pytest.mark.timeout(900)
def test_run_py_killed_while_recording_leaves_no_process_and_no_partial_record(cifar_ready, tmp_path):
    import json
    out = tmp_path / "out"
    run_py, mark = start_local_run(cifar_ready, out, tmp_path, "--iters", "4")
    kill_when(run_py, mark, caffe_log_says(out, "Optimization Done"), "Caffe's end of training")
    records = out / "cifar10" / "records.jsonl"
    for line in records.read_text().splitlines() if records.exists() else []:
        json.loads(line)  # a whole record or none
