"""Only the processes the project started are signalled, and those whose lifetime is their
caller's end with it (data_prep/redis_cluster/servers.py, data_prep/cache.py), each with real processes:

- a pid file naming a process that is not the one started there (its number taken by another
  later) never gets it signalled, though its command line looks like a redis-server's, the
  keeper's or the delay proxy's;
- a node slow to start listening is waited for; one that exits is named;
- the warm-up reader dies with the process that started it;
- a cluster started from the command line outlives the command, its keeper and proxy too.
"""
import os
import subprocess
import sys
import time

import psutil
import pytest

import toolchain
from conftest import ROOT, line_within, run


def gone(proc, timeout):
    """Whether `proc` (a psutil.Process: a pid and its start time) has exited within `timeout` s."""
    from data_prep.redis_cluster.servers import _zombie
    deadline = time.monotonic() + timeout
    while proc.is_running() and not _zombie(proc.pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def started_ticks(pid):
    """When process `pid` started, in clock ticks after boot (field 22 of /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


@pytest.fixture
def stand_ins(tmp_path, redis_port):
    """Three long sleeps whose command lines pass for a cluster's: a `redis-server` working in node
    0's folder, `python -m data_prep.redis_cluster.keeper ROOT` (a module of that name that sleeps) and a
    process whose argv[0] is the delay proxy's path. Yields (cluster, {pid file: Popen})."""
    from data_prep.redis_cluster.cluster import Cluster
    c = Cluster(tmp_path / "redis-cluster", port=redis_port, nodes=1)
    c.node_dir(0).mkdir(parents=True)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "redis-server").symlink_to("/bin/sleep")  # its name: the link's
    keeper_module = tmp_path / "elsewhere" / "data_prep" / "redis_cluster"
    keeper_module.mkdir(parents=True)
    (keeper_module.parent / "__init__.py").write_text("")
    (keeper_module / "__init__.py").write_text("")
    (keeper_module / "keeper.py").write_text("import time\ntime.sleep(60)\n")
    procs = {c.node_dir(0) / "redis.pid": subprocess.Popen([str(tmp_path / "bin" / "redis-server"), "60"],
                                                           cwd=c.node_dir(0)),
             c.root / "keeper.pid": subprocess.Popen([sys.executable, "-m", "data_prep.redis_cluster.keeper", str(c.root)],
                                                     cwd=tmp_path / "elsewhere"),
             c.root / "proxy.pid": subprocess.Popen(["bash", "-c", f"exec -a {toolchain.DELAY_PROXY} sleep 60"])}
    deadline = time.monotonic() + 10  # until each has exec'd into what it stands for
    while not (c.server_pids()[0] and c.keeper_pid() and c.proxy_pid()):
        assert time.monotonic() < deadline, "the stand-ins do not pass for the cluster's processes"
        for pidfile, p in procs.items():
            pidfile.write_text(f"{p.pid}\n")
        time.sleep(0.1)
    try:
        yield c, procs
    finally:
        for p in procs.values():
            p.kill()
            p.wait(timeout=10)


def test_a_pid_file_naming_a_process_started_after_the_one_it_recorded_never_gets_it_signalled(stand_ins):
    c, procs = stand_ins
    for pidfile, p in procs.items():  # each file recorded a start time: another process had the number then
        pidfile.write_text(f"{p.pid}{' 0123456789abcdef' if pidfile.name == 'proxy.pid' else ''} "
                           f"started={started_ticks(p.pid) - 1}\n")
    assert c.server_pids() == [None] and c.keeper_pid() is None and c.proxy_pid() is None
    c.stop()
    c.stop_keeper()
    assert all(p.poll() is None for p in procs.values())
    for pidfile, p in procs.items():  # the start times they were started at: these are stopped
        pidfile.write_text(f"{p.pid} started={started_ticks(p.pid)}\n")
    assert c.server_pids() == [procs[c.node_dir(0) / "redis.pid"].pid] and c.keeper_pid() and c.proxy_pid()
    c.stop()
    assert all(p.poll() is not None for p in procs.values())


def test_a_process_that_ignores_sigterm_is_killed_after_the_wait():
    from data_prep.redis_cluster.cluster import Cluster
    stubborn = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                                 "signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"],
                                stdout=subprocess.PIPE, text=True)
    try:
        said = line_within(stubborn, "'ready' from a process ignoring SIGTERM", time.monotonic() + 60)
        assert said.strip() == "ready"
        t = time.monotonic()
        Cluster._stop(psutil.Process(stubborn.pid), timeout=0.5)
        assert stubborn.poll() is not None and 0.5 <= time.monotonic() - t < 5  # (reaped by _stop: no status left)
    finally:
        stubborn.kill()
        stubborn.wait(timeout=10)


def slow_redis_server(folder, before):
    """A `redis-server` first on PATH that runs the shell lines `before`, then the real one."""
    folder.mkdir()
    wrapper = folder / "redis-server"
    wrapper.write_text(f"#!/bin/sh\n{before}\nexec /usr/bin/redis-server \"$@\"\n")
    wrapper.chmod(0o755)
    return folder


def test_a_node_slow_to_start_listening_is_waited_for(tmp_path, monkeypatch, redis_port):
    """Slower than redis-py's own retries of a refused connection (10, about 5 s at most)."""
    from data_prep.redis_cluster.cluster import Cluster
    folder = slow_redis_server(tmp_path / "bin", "sleep 7")
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    c = Cluster(tmp_path / "redis-cluster", port=redis_port, nodes=1)
    try:
        t = time.monotonic()
        assert c.start() is True
        assert time.monotonic() - t >= 7 and c.node_client(0).ping()
    finally:
        c.stop()
    assert c.server_pids() == [None]


def test_a_node_that_exits_at_its_start_is_named(tmp_path, monkeypatch, redis_port):
    from data_prep.redis_cluster.cluster import Cluster, ClusterError
    folder = slow_redis_server(tmp_path / "bin", "sleep 1; exit 3")
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    c = Cluster(tmp_path / "redis-cluster", port=redis_port, nodes=1)
    with pytest.raises(ClusterError, match=rf"redis-server node 0 \(127.0.0.1:{redis_port}\) exited"):
        c.start(timeout=20)


READER_OWNER = """
import os, sys
from data_prep import cache
cache.warm([sys.argv[1]])
"""


def test_the_warm_up_reader_dies_with_the_process_that_started_it(tmp_path):
    fifo = tmp_path / "never-written"
    os.mkfifo(fifo)  # the reader blocks opening it: a warm-up as long as one likes
    owner = subprocess.Popen([sys.executable, "-c", READER_OWNER, str(fifo)])
    reader = None
    try:
        deadline = time.monotonic() + 30
        while not reader:
            assert owner.poll() is None and time.monotonic() < deadline, f"no warm-up reader under pid {owner.pid}"
            children = psutil.Process(owner.pid).children()
            reader = children[0] if children else None
            time.sleep(0.05)
        owner.kill()
        owner.wait(timeout=10)
        assert gone(reader, 5), reader.cmdline()
    finally:
        owner.kill()
        owner.wait(timeout=10)
        if reader and reader.is_running():
            reader.kill()


def test_a_cluster_started_from_the_command_line_outlives_the_command(tmp_path, monkeypatch, redis_port):
    from data_prep.redis_cluster.cluster import Cluster
    from data_prep.redis_cluster.servers import PASSWORD_ENV
    monkeypatch.setenv(PASSWORD_ENV, "outlives-the-command-0123456789")
    run([sys.executable, "-m", "data_prep.redis_cluster.cluster", "start", "--data", str(tmp_path), "--nodes", "1",
         "--replicas", "1", "--rtt", "2ms", "--port", str(redis_port)], cwd=ROOT)
    c = Cluster(tmp_path / "redis-cluster", port=redis_port)
    try:
        time.sleep(1)  # a death signal would have come when the command exited
        assert c.running() and c.keeper_pid() and c.proxy_pid()
        left = c.server_pids() + [c.keeper_pid(), c.proxy_pid()]
        with c.session():  # a caller that finds it running uses it as it is and leaves it running
            pass
        assert c.server_pids() + [c.keeper_pid(), c.proxy_pid()] == left
    finally:
        c.stop()
