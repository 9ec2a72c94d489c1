"""Faults and neighbours of the runner and the Redis path, each with real processes, servers and
files (the shared ring's and Caffe's records': test_ring_faults.py):

- run.py killed with SIGKILL leaves nothing training, and the next run removes its rings and
  cgroups;
- Redis servers left by a killed process whose password died with it are replaced, not a
  "refuses this password" for ever; a live owner's are not touched;
- a pid file naming an unrelated process never gets it signalled;
- training that stalls is stopped with an error; the run lock is the user's own;
- a data set whose marker is not the manifest's, or that lost a record, is refused;
- the delay proxy a record names is the build that ran.
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

import toolchain
from conftest import ROOT, ended_within, given_up, line_within, run
from test_redis import cluster, redis_cifar, running, scratch, scratch_cluster  # noqa: F401 (fixtures)

NOBODY = 65534


def processes_under(folder):
    """This user's processes whose working folder is `folder` or under it, a folder the test made
    (Caffe runs in its run folder): what the test's run started, and nothing another session runs.
    Until they are gone: a zombie whose other threads still exit still holds its files."""
    from data_prep.redis_cluster.servers import _zombie
    out = []
    for p in psutil.process_iter(["uids"]):
        try:
            if p.info["uids"].real == os.getuid() and Path(p.cwd()).is_relative_to(folder) and not _zombie(p.pid):
                out.append(p)
        except psutil.ZombieProcess:
            if not _zombie(p.pid):
                out.append(p)
        except psutil.Error:
            pass
    return out


def imgstore_cgroups():
    from experiments import cgroup
    root = cgroup.CGROUP_ROOT
    return sorted(p for p in list(root.glob("imgstore/*")) + list(root.glob("*/imgstore/*")) if p.is_dir())


def cgroups_of_runs(out):
    """The cgroups of the runs under the results folder `out` (a group is named after its run's
    group id, which starts each run folder's name): none of another session's."""
    runs = [d.name for d in out.glob("*/runs/*")]
    return [g for g in imgstore_cgroups() if any(r == g.name or r.startswith(g.name + "-s") for r in runs)]


def rings_of(lmdb_folder, used):
    """The shared LMDB rings of the databases under `lmdb_folder` (named after their data.mdb)
    that a solver holds (`used`) or that none holds: none of another data set's."""
    from data_prep.backends import lmdb_store
    unused = lmdb_store.unused_rings()
    return [r for mdb in sorted(lmdb_folder.glob("*/data.mdb")) for r in lmdb_store.shared_rings(mdb)
            if (r in unused) != used]


def other_runs_of_this_user(out):
    """Whether a run.py of this user's other than those writing to `out` runs now (another test
    session's): a run's start removes whatever any killed run of this user left."""
    for p in psutil.process_iter(["uids", "cmdline"]):
        cmdline = p.info["cmdline"] or []
        if p.info["uids"] and p.info["uids"].real == os.getuid() and any(a.endswith("experiments/run.py")
                                                                         for a in cmdline[:2]):
            if str(out) not in cmdline:
                return True
    return False


def test_run_py_killed_with_sigkill_leaves_nothing_after_the_next_start(mnist_small, tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, IMGSTORE_LOCK=str(tmp_path / "run.lock"))
    args = [sys.executable, str(ROOT / "experiments" / "run.py"), "mnist", "lmdb", "warm", "--accelerator", "5ms",
            "--lmdb-read", "shared", "--lmdb-shared-mb", "8", "--concurrent", "2", "--mem-limit", "2G",
            "--data", str(mnist_small.parent), "--out", str(out), "--quiet"]
    killed = subprocess.Popen(args + ["--iters", "100000"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not any("Iteration" in log.read_text(errors="replace") for log in out.glob("mnist/runs/*/caffe.log")):
            if killed.poll() is not None or time.monotonic() > deadline:
                given_up(killed, f"Caffe's first iteration within 120 s (exit status {killed.returncode})")
            time.sleep(0.2)
        rings, groups = rings_of(mnist_small / "lmdb", used=True), cgroups_of_runs(out)
        assert processes_under(out) and rings and groups
        others = other_runs_of_this_user(out)
    finally:
        killed.kill()  # the test's own step as well: run.py killed with SIGKILL
        killed.wait(timeout=10)
    deadline = time.monotonic() + 10
    while processes_under(out):  # the solvers and the monitor die with run.py
        assert time.monotonic() < deadline, [p.cmdline() for p in processes_under(out)]
        time.sleep(0.1)
    # what the next start must remove (a run of another test session of this user starting
    # meanwhile removes them as well: then they need only be gone)
    alone = not (others or other_runs_of_this_user(out))
    assert not alone or all(path.exists() for path in rings + groups)
    after = run(args + ["--iters", "20"], env=env)
    assert not [path for path in rings + groups if path.exists()]
    if alone and not other_runs_of_this_user(out):
        for path in rings:
            assert f"removed {path}, left by an earlier run" in after.stderr, after.stderr
        for path in groups:
            assert f"removed cgroup {path}, left by an earlier run" in after.stderr, after.stderr
    assert not rings_of(mnist_small / "lmdb", used=False) and not cgroups_of_runs(out)
    assert not processes_under(out)


def test_processes_under_a_folder_are_this_users_in_it_alone(tmp_path):
    """Another user's process in the folder, or this user's in a folder whose name merely starts
    the same, is none of the test's."""
    for folder in ("out", "out-sibling"):
        (tmp_path / folder).mkdir()
    sleep = ["sleep", "60"]  # (/bin: another user can run it)
    ours = subprocess.Popen(sleep, cwd=tmp_path / "out")
    sibling = subprocess.Popen(sleep, cwd=tmp_path / "out-sibling")
    others = subprocess.Popen(sleep, cwd=tmp_path / "out", user=NOBODY) if os.getuid() == 0 else None
    try:
        assert [p.pid for p in processes_under(tmp_path / "out")] == [ours.pid]
    finally:
        for p in (ours, sibling, others):
            if p:
                p.kill()
                p.wait(timeout=10)


OWNER_SCRIPT = """
import sys, time
from data_prep.redis_cluster.cluster import Cluster
Cluster(sys.argv[1], port=int(sys.argv[2]), nodes=3).start()
print("up", flush=True)
time.sleep(600)
"""


def test_servers_whose_starter_was_killed_are_replaced_a_live_starters_are_not(tmp_path, redis_port):
    from data_prep.redis_cluster.cluster import Cluster, ClusterError
    port, root = redis_port, tmp_path / "redis-cluster"
    env = {k: v for k, v in os.environ.items() if k != "IMGSTORE_REDIS_PASSWORD"}  # it makes its own
    owner = subprocess.Popen([sys.executable, "-c", OWNER_SCRIPT, str(root), str(port)], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    c, left = Cluster(root, port=port), []
    try:
        said = line_within(owner, "'up' from a process starting a cluster of 3", time.monotonic() + 120)
        if said.strip() != "up":
            given_up(owner, f"'up' from a process starting a cluster of 3, not {said!r}")
        left = c.server_pids()
        with pytest.raises(ClusterError, match="refuses this password"):  # its starter lives: not ours to stop
            c.start()
        owner.kill()
        owner.wait(timeout=10)
        assert c.server_pids() == left  # the servers outlive it (their own session)
        assert c.start() is True
        assert not set(left) & set(c.server_pids()) and c.node_client(0).ping()
    finally:
        owner.kill()
        c.stop()
        for pid in left:
            Cluster._stop_pid(pid)


def test_a_pid_file_naming_an_unrelated_process_never_gets_it_signalled(tmp_path, redis_port):
    from data_prep.redis_cluster.cluster import Cluster
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        c = Cluster(tmp_path / "redis-cluster", port=redis_port, nodes=1)
        c.node_dir(0).mkdir(parents=True)
        for pidfile in (c.root / "keeper.pid", c.root / "proxy.pid", c.node_dir(0) / "redis.pid"):
            pidfile.write_text(f"{bystander.pid}\n")
        assert c.keeper_pid() is None and c.proxy_pid() is None and c.server_pids() == [None]
        c.stop()
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait(timeout=10)


def test_training_that_stalls_is_stopped_with_an_error_naming_its_log(tmp_path):
    from experiments.training import Progress, Stalled, train_all
    (tmp_path / "run").mkdir()
    started = time.monotonic()
    with pytest.raises(Stalled, match=f"for [2-9] s .*{tmp_path / 'run' / 'caffe.log'}"):
        train_all([(["sleep", "60"], tmp_path / "run")], dict(os.environ), None,
                  Progress(tmp_path / "run" / "caffe.log", 10, 1, enabled=False), stall_seconds=2)
    assert time.monotonic() - started < 10
    assert not [p for p in psutil.Process().children(recursive=True) if p.cmdline() == ["sleep", "60"]]


def test_training_paused_longer_than_the_stall_limit_is_not_stopped(tmp_path):
    """A process stopped by a signal (Ctrl-Z, SIGSTOP) is the user's pause, not a stall: once
    continued, it finishes."""
    import threading
    from experiments.training import Progress, train_all
    (tmp_path / "run").mkdir()
    pausing = ["sh", "-c", "sleep 0.5; kill -STOP $$; exit 0"]  # quiet, then stopped by itself

    def continue_it_later():
        time.sleep(5)
        for p in psutil.Process().children(recursive=True):
            if p.cmdline() == pausing:
                p.send_signal(signal.SIGCONT)
    threading.Thread(target=continue_it_later, daemon=True).start()
    [done] = train_all([(pausing, tmp_path / "run")], dict(os.environ), None,
                       Progress(tmp_path / "run" / "caffe.log", 10, 1, enabled=False), stall_seconds=2)
    assert done.returncode == 0 and done.wall >= 4


def test_the_run_lock_is_the_users_own(tmp_path, monkeypatch):
    from experiments import runner
    lock = tmp_path / "run.lock"
    monkeypatch.setattr(runner, "LOCK", lock)
    lock.write_text("")
    os.chown(lock, NOBODY, NOBODY)
    with pytest.raises(runner.RunError, match=f"belongs to uid {NOBODY}, not this user"):
        with runner._run_lock(print):
            pass
    lock.unlink()
    lock.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(runner.RunError, match="cannot open the run lock"):
        with runner._run_lock(print):
            pass
    assert not (tmp_path / "elsewhere").exists()


def test_the_default_run_lock_is_in_the_users_folder():
    code = "from experiments import runner; print(runner.LOCK)"
    env = {k: v for k, v in os.environ.items() if k != "IMGSTORE_LOCK"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True).stdout
    assert out.strip() == str(Path.home() / ".cache" / "imgstore" / "run.lock")


def test_a_record_lost_before_the_marker_is_written_leaves_no_marker(scratch):
    from data_prep.backends import redis_store
    from data_prep.redis_cluster import keys as redis_keys
    from data_prep.errors import SourceError
    writer = redis_store._Writer(scratch, "lost:train", overwrite=True)
    for i in range(5):
        writer.add((f"{i:08d}", b"x" * 10))
    writer.commit()
    writer.client.delete("lost:train:00000003")  # as a failover forced before it was replicated
    with pytest.raises(SourceError, match="record lost:train:00000003 is not there"):
        writer.finish()
    c = redis_keys.client(scratch)
    assert c.get("lost:train:~complete") is None
    c.close()


def test_a_data_set_rewritten_by_another_prepare_is_refused_at_the_run(redis_cifar, running, tmp_path):
    from data_prep.redis_cluster import keys as redis_keys
    c = redis_keys.client(running)
    mark = "cifar10:train:~complete"
    kept = c.get(mark)
    count = kept.split()[0].decode()
    try:
        c.set(mark, f"{count} 0123456789abcdef0123")
        p = subprocess.run([sys.executable, str(ROOT / "experiments" / "run.py"), "cifar10", "redis", "warm",
                            "--iters", "5", "--data", str(redis_cifar.parent), "--out", str(tmp_path), "--quiet"],
                           capture_output=True, text=True)
        assert p.returncode != 0
        assert (f"cifar10:train holds {count} records of source 0123456789abcdef, the manifest here describes "
                f"{count} of") in p.stderr, p.stderr[-2000:]
        assert not (tmp_path / "cifar10" / "records.jsonl").exists()
    finally:
        c.set(mark, kept)
        c.close()


def test_a_running_proxy_of_another_build_is_replaced(scratch):
    scratch.start(rtt_ms=4)
    try:
        first = scratch.proxy_pid()
        assert scratch.proxy_source() == toolchain.delay_proxy_source()
        (scratch.root / "proxy.pid").write_text(f"{first} 0000000000000000\n")  # as a build of older source
        scratch.start(rtt_ms=4)
        assert scratch.proxy_pid() not in (None, first)
        assert scratch.describe()["delay_proxy_source"] == toolchain.delay_proxy_source()
        assert not psutil.pid_exists(first) or psutil.Process(first).status() == psutil.STATUS_ZOMBIE
    finally:
        scratch.start()


def test_the_cluster_bus_takes_no_password_but_listens_on_loopback_only(running):
    """Shown, not fixed: Redis 7's cluster bus has no authentication (a process on this host
    could join it); the servers the project starts keep it to this host's loopback."""
    import socket
    for port in running.node_ports():
        with socket.create_connection(("127.0.0.1", port + 10000), timeout=5):
            pass  # accepted without a password
    for pid in running.server_pids():
        bus = [c.laddr for c in psutil.Process(pid).net_connections()
               if c.status == psutil.CONN_LISTEN and c.laddr.port >= running.port + 10000]
        assert bus and all(a.ip == "127.0.0.1" for a in bus)
    json.dumps(running.describe())


class FakeNode:
    """A loopback server speaking just enough RESP: +OK to AUTH, `slots_reply` to CLUSTER SLOTS;
    it keeps every command it was sent."""

    def __init__(self, slots_reply):
        import socket
        import threading
        self.slots_reply, self.commands = slots_reply, []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                buffer = b""
                while True:
                    data = conn.recv(65536)
                    if not data:
                        break
                    buffer += data
                    while True:
                        command, buffer = _one_command(buffer)
                        if command is None:
                            break
                        self.commands.append(command)
                        conn.sendall(b"+OK\r\n" if command[0].upper() == b"AUTH" else self.slots_reply)

    def close(self):
        self.server.close()


def _one_command(buffer):
    """(the first RESP array of bulk strings in buffer, the rest), or (None, buffer)."""
    if not buffer.startswith(b"*") or b"\r\n" not in buffer:
        return None, buffer
    head, rest = buffer.split(b"\r\n", 1)
    parts = []
    for _ in range(int(head[1:])):
        if b"\r\n" not in rest:
            return None, buffer
        size, rest = rest.split(b"\r\n", 1)
        n = int(size[1:])
        if len(rest) < n + 2:
            return None, buffer
        parts.append(rest[:n])
        rest = rest[n + 2:]
    return parts, rest


def redis_data_net(path, source, batch=10):
    import caffe
    from caffe import layers as L, params as P
    n = caffe.NetSpec()
    n.data, n.label = L.Data(batch_size=batch, ntop=2, source=source, backend=P.Data.REDIS)
    path.write_text(str(n.to_proto()))
    return path


def test_a_seed_still_loading_is_passed_over_for_the_next(redis_cifar, running, tmp_path):
    from conftest import net_process
    loading = FakeNode(b"-LOADING Redis is loading the dataset in memory\r\n")
    try:
        seeds = ",".join([f"127.0.0.1:{loading.port}"] + [f"127.0.0.1:{p}" for p in running.node_ports()])
        net = redis_data_net(tmp_path / "net.prototxt", f"redis://{seeds}/cifar10:train")
        out, err = ended_within(net_process(net, 3), "the net's 3 forward passes", 120, stdin="go\n")
        assert "done" in out, err[-2000:]
        assert [b"CLUSTER", b"SLOTS"] in loading.commands  # it was asked first, and passed over
    finally:
        loading.close()


def test_the_reader_authenticates_where_the_slot_map_points_shown(redis_cifar, running, tmp_path):
    """Shown, not fixed: the reader sends its password to whatever address a node's slot map or
    MOVED names. Only a node that knows the password, or a process on this host joining the
    unauthenticated bus (loopback only), can name one; an ACL user with read rights only on
    the project's keys bounds what such a password can do."""
    from conftest import net_process
    elsewhere = FakeNode(b"-ERR nothing here\r\n")
    slots = (f"*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:{elsewhere.port}\r\n").encode()
    seed = FakeNode(slots)
    try:
        net = redis_data_net(tmp_path / "net.prototxt", f"redis://127.0.0.1:{seed.port}/cifar10:train")
        ended_within(net_process(net, 1), "the net's forward pass", 60, stdin="go\n")
        sent = os.environ["IMGSTORE_REDIS_PASSWORD"].encode()
        assert [b"AUTH", sent] in elsewhere.commands
    finally:
        seed.close()
        elsewhere.close()


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_a_limit_the_kernel_refuses_leaves_no_cgroup_folder(tmp_path, monkeypatch, version):
    """The kernel's refusal stood in for by a write that raises (EINVAL, as a cpuset the host
    lacks gets): this tests the clean-up, on both hierarchies' layouts."""
    from experiments import cgroup
    monkeypatch.setattr(cgroup, "CGROUP_ROOT", tmp_path)
    if version == "v2":
        (tmp_path / "cgroup.controllers").write_text("memory cpuset io\n")
    else:
        (tmp_path / "memory").mkdir()
        (tmp_path / "memory" / "memory.limit_in_bytes").write_text("max\n")
    real_write = cgroup._write

    def refusing(path, value, group=None):
        if path.name in ("memory.max", "memory.limit_in_bytes") and path.parent.name == "g1":
            raise OSError(22, "Invalid argument", str(path))
        real_write(path, value, group)
    monkeypatch.setattr(cgroup, "_write", refusing)
    with pytest.raises(cgroup.CgroupError, match="Invalid argument"):
        cgroup.create(cgroup.Limits(mem_bytes=1 << 30), "g1", None)
    assert cgroup.version() == version
    assert not [p for p in tmp_path.rglob("g1")]
