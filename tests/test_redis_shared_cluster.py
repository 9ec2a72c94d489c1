"""A Redis Cluster the user runs, as a small lab runs one: a single redis-server with
cluster-enabled yes holding all 16384 slots, with a password, started by the test on its own
ports. prepare.py, run.py and clean work against it; two checkouts (data folders) that prepare
the same source there each remove only their own data set, never one another's write in
progress; a data set whose name holds Redis's glob characters removes its own keys alone; the
delay proxy's start is waited for with a limit."""
import os
import subprocess
import sys
import time

import pytest

from conftest import ROOT, environment_kept, redis_ports

PY = str(ROOT / ".venv" / "bin" / "python")
UP_WITHIN_S = 30


def one_master_server(folder, port, secret):
    """A redis-server on `port` with cluster-enabled yes and every slot (ADDSLOTSRANGE), its
    password given on stdin (never on its command line); returns the process once the cluster
    says cluster_state:ok."""
    import redis
    folder.mkdir(parents=True, exist_ok=True)
    config = (f"port {port}\nbind 127.0.0.1\ndir {folder}\ncluster-enabled yes\n"
              f"cluster-config-file {folder / 'nodes.conf'}\nrequirepass {secret}\nsave \"\"\nappendonly no\n"
              f"logfile {folder / 'redis.log'}\n")
    proc = subprocess.Popen(["redis-server", "-"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    proc.stdin.write(config.encode())
    proc.stdin.close()
    node = redis.Redis(host="127.0.0.1", port=port, password=secret, socket_timeout=5)
    deadline = time.monotonic() + UP_WITHIN_S
    while True:
        try:
            node.ping()
            break
        except redis.ConnectionError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"redis-server on {port} not up within {UP_WITHIN_S} s (exit {proc.poll()}); "
                            f"its log: {folder / 'redis.log'}")
            time.sleep(0.05)
    node.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
    while b"cluster_state:ok" not in node.execute_command("CLUSTER", "INFO"):
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the one-master cluster on {port} not ok within {UP_WITHIN_S} s")
        time.sleep(0.05)
    node.close()
    return proc


@pytest.fixture(scope="module")
def one_master(tmp_path_factory):
    """(its seeds, its password, an admin client: a plain connection to the one node)."""
    import redis
    secret = "lab-" + os.urandom(8).hex()
    with redis_ports() as port:
        proc = one_master_server(tmp_path_factory.mktemp("one-master"), port, secret)
        admin = redis.Redis(host="127.0.0.1", port=port, password=secret, socket_timeout=30)
        try:
            yield f"127.0.0.1:{port}", secret, admin
        finally:
            admin.close()
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def lab(one_master):
    """The one-master cluster, emptied after the test (the test's own server: FLUSHALL is its to send)."""
    try:
        yield one_master
    finally:
        one_master[2].flushall()


def cli(script, args, secret, tmp_path):
    """One of the project's commands as the cluster's default user, its password in the environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMGSTORE_REDIS")}
    env.update(IMGSTORE_REDIS_PASSWORD=secret, IMGSTORE_LOCK=str(tmp_path / "run.lock"))
    return subprocess.run([PY, str(ROOT / script), *map(str, args)], capture_output=True, text=True, env=env,
                          timeout=600)


def ours(admin):
    return {k.decode(): admin.dump(k) for k in admin.scan_iter(match="imgstore:*", count=1000)}


def test_a_one_master_cluster_is_prepared_trained_from_and_cleaned(lab, tmp_path):
    """redis-py answers INFO sent to one node with that node's INFO alone (to several, {node: INFO}):
    the run's record names the one master, its server and its INFO's CPU."""
    from experiments import record
    seeds, secret, admin = lab
    data, out = tmp_path / "data", tmp_path / "results"
    p = cli("data_prep/prepare.py", ["mnist", "redis", "--limit", "100", "--out", data, "--cluster", seeds, "--quiet"],
            secret, tmp_path)
    assert p.returncode == 0, p.stderr
    assert len(ours(admin)) == 2 * (100 + 3)  # records, ~writer, ~index, ~complete per phase
    p = cli("experiments/run.py", ["mnist", "redis", "warm", "--iters", "10", "--cluster", seeds, "--data", data,
                                   "--out", out, "--quiet"], secret, tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    r, = record.recorded(out, "mnist")
    assert r.ok and r.location["external"] and r.location["masters"] == 1 and r.location["server"] == "redis"
    assert list(r.location["servers"]) == [seeds] and r.location["servers"][seeds]["cpu_seconds"] > 0
    p = cli("data_prep/prepare.py", ["clean", "mnist", "redis", "--out", data, "--cluster", seeds], secret, tmp_path)
    assert p.returncode == 0, p.stderr
    assert ours(admin) == {} and not (data / "mnist" / "redis").exists()


def test_two_checkouts_of_one_source_each_remove_only_their_own(lab, tmp_path):
    """Two data folders prepare the same source under the same prefix: the same marker (count,
    fingerprint). The second's --force makes the data set its own; the first's clean then
    removes nothing, nor, once the marker is gone (the second's rewrite in progress), the
    second's records; the second's clean removes it all."""
    seeds, secret, admin = lab
    first, second = tmp_path / "first", tmp_path / "second"

    def prepare(*args):
        return cli("data_prep/prepare.py", [*args, "--cluster", seeds], secret, tmp_path)
    assert prepare("mnist", "redis", "--limit", "60", "--out", first, "--quiet").returncode == 0
    p = prepare("mnist", "redis", "--limit", "60", "--out", second, "--quiet")
    assert p.returncode == 2 and "already holds a complete data set imgstore:mnist:train" in p.stderr, p.stderr
    assert prepare("mnist", "redis", "--limit", "60", "--out", second, "--quiet", "--force").returncode == 0
    held = ours(admin)

    p = prepare("clean", "mnist", "redis", "--out", first)
    assert p.returncode == 2 and "Traceback" not in p.stderr and "another checkout's" in p.stderr, p.stderr
    assert "written by data folder" in p.stderr and ours(admin) == held
    assert (first / "mnist" / "redis" / "manifest.json").exists()

    admin.delete("imgstore:mnist:train:~complete")  # the second's rewrite under way: records, no marker yet
    in_progress = ours(admin)
    p = prepare("clean", "mnist", "redis", "--out", first)
    assert p.returncode == 2 and "write in progress" in p.stderr and ours(admin) == in_progress, p.stderr

    p = prepare("clean", "mnist", "redis", "--out", second)
    assert p.returncode == 0, p.stderr
    assert ours(admin) == {}


def test_a_data_set_named_with_glob_characters_removes_its_own_keys_alone(lab):
    """SCAN MATCH reads * ? [ ] \\ as a pattern: a data set named a* must not take ab's keys, nor
    a? a1's; a name with a colon (it would nest under another data set's prefix) is refused."""
    from data_prep.errors import SourceError
    from data_prep.redis_cluster import external, keys
    seeds, secret, admin = lab
    names = ["ab", "a1", "a*", "a?", "a[b]", "a\\", "a"]
    cluster = external.ExternalCluster(external.parse_seeds(seeds))
    with environment_kept(IMGSTORE_REDIS_PASSWORD=secret, IMGSTORE_REDIS_USER=None,
                          IMGSTORE_REDIS_PASSWORD_FILE=None):
        c = cluster.client()
        try:
            for name in names:
                c.set(f"{keys.prefix_for(name, 'train', cluster)}:00000000", name)
            for gone, name in enumerate(["a*", "a?", "a[b]", "a\\"], 1):
                prefix = keys.prefix_for(name, "train", cluster)
                assert keys._holds_any(c, prefix)
                keys.delete_prefix(c, prefix)
                assert not keys._holds_any(c, prefix)
                assert set(ours(admin)) == {f"imgstore:{n}:train:00000000" for n in names[gone + 2:] + ["ab", "a1"]}
            with pytest.raises(SourceError, match=r"named 'mnist:train' .*holds ':'"):
                keys.prefix_for("mnist:train", "train", cluster)
            with pytest.raises(SourceError, match=r"named 'a b' .*holds ' '"):
                keys.prefix_for("a b", "train", cluster)
        finally:
            for name in names:
                c.delete(f"imgstore:{name}:train:00000000")
            c.close()


HANGS = """
import time
time.sleep(20)
"""


@pytest.mark.timeout(60)
def test_a_delay_proxy_that_never_says_ready_is_stopped_and_named(tmp_path, monkeypatch):
    """A proxy that says nothing within READY_WITHIN_S is killed and the error names the wait and
    its log; the start never waits past that limit."""
    import toolchain
    from data_prep.redis_cluster.cluster import Cluster
    from data_prep.redis_cluster.servers import ClusterError
    stand_in = tmp_path / "silent-proxy"
    stand_in.write_text(f"#!{sys.executable}\n{HANGS}")
    stand_in.chmod(0o755)
    monkeypatch.setattr(toolchain, "delay_proxy", lambda: stand_in)
    cluster = Cluster(tmp_path / "redis-cluster", port=1)
    cluster.root.mkdir()
    monkeypatch.setattr(Cluster, "READY_WITHIN_S", 1)
    started = time.monotonic()
    with pytest.raises(ClusterError, match="delay proxy did not say ready within 1 s"):
        cluster._start_proxy((1.0, 0.0))
    assert time.monotonic() - started < 10


def test_a_childs_first_line_is_read_and_the_rest_left_for_its_pipe():
    from data_prep.child_line import first_line
    p = subprocess.Popen([sys.executable, "-c", "print('ready'); print('next', flush=True)"], stdout=subprocess.PIPE,
                         text=True)
    assert first_line(p, 30) == "ready" and p.stdout.read() == "next\n"
    p.wait()
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(20)"], stdout=subprocess.PIPE)
    started = time.monotonic()
    assert first_line(p, 1) is None and time.monotonic() - started < 10
    p.kill()
    p.wait()
