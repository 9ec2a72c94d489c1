"""A Redis Cluster the user runs (data_prep.redis_external), stood in for by a cluster of real
redis-server processes that the test starts on loopback, with an ACL user of its own, as a lab
would give each client: prepare.py and run.py reach it with --cluster, the records are LMDB's,
the project's keys are under imgstore: alone, and what goes wrong is named."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT

PY = str(ROOT / ".venv" / "bin" / "python")
USER = "lab-reader"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """(the cluster, its seeds, a password file of the ACL user's, readable by its owner alone)."""
    from data_prep.redis_cluster import Cluster
    c = Cluster(tmp_path_factory.mktemp("lab") / "redis-cluster", port=int(os.environ["IMGSTORE_REDIS_PORT"]) + 40)
    c.start()
    secret = "lab-" + os.urandom(8).hex()
    for i in range(len(c.node_ports())):
        node = c.node_client(i)
        node.execute_command("ACL", "SETUSER", USER, "reset", "on", f">{secret}", "~imgstore:*", "+@all")
        node.close()
    password_file = tmp_path_factory.mktemp("secret") / "password"
    password_file.write_text(secret + "\n")
    password_file.chmod(0o600)
    yield c, f"127.0.0.1:{c.port}", password_file, secret
    c.stop()


def cli(script, args, password_file, user=USER):
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMGSTORE_REDIS_PASSWORD")}
    env.update(IMGSTORE_REDIS_USER=user, IMGSTORE_REDIS_PASSWORD_FILE=str(password_file))
    return subprocess.run([PY, str(ROOT / script), *args], capture_output=True, text=True, env=env, timeout=600)


def test_a_cluster_the_user_runs_is_prepared_and_trained_from_as_lmdb_is(lab, tmp_path):
    from data_prep.backends import lmdb_store
    from experiments import record
    cluster, seeds, password_file, secret = lab
    data, out = tmp_path / "data", tmp_path / "results"
    p = cli("data_prep/prepare.py", ["mnist", "lmdb,redis", "--limit", "300", "--out", str(data),
                                     "--cluster", seeds, "--quiet"], password_file)
    assert p.returncode == 0, p.stderr
    admin = cluster.client()
    try:
        keys = [k.decode() for k in admin.scan_iter(match="*", count=1000, target_nodes=admin.ALL_NODES)]
        assert len(keys) == 2 * (300 + 2) and all(k.startswith("imgstore:mnist:") for k in keys)
        train = [admin.get(f"imgstore:mnist:train:{k.decode()}")
                 for k, _ in lmdb_store.raw_items(data / "mnist" / "lmdb" / "train_lmdb")]
        assert train == [v for _, v in lmdb_store.raw_items(data / "mnist" / "lmdb" / "train_lmdb")]
    finally:
        admin.close()
    p = cli("experiments/run.py", ["mnist", "redis", "warm", "--iters", "20", "--cluster", seeds,
                                   "--data", str(data), "--out", str(out), "--quiet"], password_file)
    assert p.returncode == 0, p.stderr
    r, = record.recorded(out, "mnist")
    assert r.ok and r.location["external"] and not r.location["started_by_project"]
    assert r.location["seeds"] == seeds and r.location["user"] == USER and r.location["masters"] == 3
    written = [f.read_text(errors="replace") for f in (out / r.run_dir).rglob("*") if f.is_file()]
    assert not any(secret in text for text in written + [p.stdout, p.stderr, (out / "mnist" / "records.jsonl").read_text()])
    assert any(f"redis://{seeds}/imgstore:mnist:train" in text for text in written)
    again = cli("experiments/run.py", ["mnist", "redis", "warm", "--iters", "20", "--cluster", seeds,
                                       "--data", str(data), "--out", str(out), "--quiet"], password_file)
    assert "already recorded" in again.stderr  # the same cluster: the same setup
    cold = cli("experiments/run.py", ["mnist", "redis", "cold", "--iters", "20", "--cluster", seeds,
                                      "--data", str(data), "--out", str(out), "--quiet"], password_file)
    assert cold.returncode == 2 and "is not this project's" in cold.stderr


def test_a_wrong_password_an_open_password_file_and_an_unreachable_seed_are_named(lab, tmp_path):
    cluster, seeds, password_file, secret = lab
    args = ["mnist", "redis", "--limit", "50", "--out", str(tmp_path / "data"), "--quiet"]
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-secret-3")
    wrong.chmod(0o600)
    p = cli("data_prep/prepare.py", args + ["--cluster", seeds], wrong)
    assert p.returncode != 0 and f"logging in as user {USER}" in p.stderr and "not-the-secret-3" not in p.stderr
    p = cli("data_prep/prepare.py", args + ["--cluster", seeds], password_file, user="nobody-here")
    assert p.returncode != 0 and "logging in as user nobody-here" in p.stderr
    wrong.chmod(0o644)
    p = cli("data_prep/prepare.py", args + ["--cluster", seeds], wrong)
    assert p.returncode != 0 and "readable by it alone (chmod 600)" in p.stderr and str(wrong) in p.stderr
    p = cli("data_prep/prepare.py", args + ["--cluster", "127.0.0.1:1"], password_file)
    assert p.returncode != 0 and "the cluster at 127.0.0.1:1" in p.stderr
    p = cli("data_prep/prepare.py", args + ["--cluster", "no-port-here"], password_file)
    assert p.returncode != 0 and "'no-port-here' is not HOST:PORT" in p.stderr


FORM_CLUSTER = """
import sys, time, redis
admin, seeds = sys.argv[1], [s.split(":") for s in sys.argv[2].split(",")]
nodes = [redis.Redis(host=h, port=int(p), password=admin, socket_timeout=5) for h, p in seeds]
for n in nodes:
    while True:
        try:
            n.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.1)
per = 16384 // len(nodes)
for i, n in enumerate(nodes):
    n.execute_command("CLUSTER", "ADDSLOTSRANGE", i * per, 16383 if i == len(nodes) - 1 else (i + 1) * per - 1)
for n in nodes[1:]:
    nodes[0].execute_command("CLUSTER", "MEET", n.connection_pool.connection_kwargs["host"], n.connection_pool.connection_kwargs["port"])
while any(n.cluster("info").get("cluster_state") != "ok" for n in nodes):
    time.sleep(0.2)
print("formed", flush=True)
"""


def test_a_cluster_on_other_hosts_is_prepared_and_trained_from_by_a_client_host(tmp_path):
    """Three server hosts and a client host in network namespaces of their own (not loopback):
    the servers form a cluster at their own addresses, with an ACL user; the client host
    prepares MNIST into it with --cluster and trains from it."""
    from experiments import hosts, record
    admin, secret = "admin-" + os.urandom(8).hex(), "lab-" + os.urandom(8).hex()
    password_file = tmp_path / "password"
    password_file.write_text(secret)
    password_file.chmod(0o600)
    with hosts.Hosts(clients=1, servers=3) as net:
        seeds = ",".join(f"{net.address(f'server-{i}')}:6379" for i in range(3))
        for i in range(3):
            home = tmp_path / f"server-{i}"
            home.mkdir()
            server = net.start(f"server-{i}", ["redis-server", "-"], stdin=subprocess.PIPE,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            server.stdin.write("\n".join([
                "port 6379", f"bind {net.address(f'server-{i}')}", "protected-mode yes", f"requirepass {admin}",
                f"user {USER} on >{secret} ~imgstore:* +@all", "cluster-enabled yes",
                f"cluster-config-file {home}/nodes.conf", f"dir {home}", 'save ""', "appendonly no", ""]).encode())
            server.stdin.close()
        formed = subprocess.run(net.command("client-0", [PY, "-c", FORM_CLUSTER, admin, seeds]), capture_output=True,
                                text=True, timeout=60)
        assert "formed" in formed.stdout, formed.stderr
        env = {k: v for k, v in os.environ.items() if not k.startswith("IMGSTORE_REDIS")}
        env.update(IMGSTORE_REDIS_USER=USER, IMGSTORE_REDIS_PASSWORD_FILE=str(password_file))
        data, out = tmp_path / "data", tmp_path / "results"
        for script, args in (("data_prep/prepare.py", ["mnist", "redis", "--limit", "300", "--out", str(data), "--quiet"]),
                             ("experiments/run.py", ["mnist", "redis", "warm", "--iters", "20", "--data", str(data),
                                                     "--out", str(out), "--quiet"])):
            p = subprocess.run(net.command("client-0", [PY, str(ROOT / script), *args, "--cluster", seeds]),
                               capture_output=True, text=True, env=env, timeout=600)
            assert p.returncode == 0, p.stderr[-3000:]
        r, = record.recorded(out, "mnist")
        assert r.ok and r.location["seeds"] == seeds and r.location["masters"] == 3
        assert seeds.split(",")[0].startswith(hosts.SUBNET)


def test_runs_on_a_cluster_the_user_runs_are_not_the_same_setup_as_on_the_projects(monkeypatch):
    from experiments import run as run_py
    monkeypatch.delenv("IMGSTORE_REDIS_CLUSTER", raising=False)
    assert run_py._cluster_seeds("redis") is None
    monkeypatch.setenv("IMGSTORE_REDIS_CLUSTER", "10.0.0.5:6379, 10.0.0.6:6379")
    assert run_py._cluster_seeds("redis") == "10.0.0.5:6379,10.0.0.6:6379" and run_py._cluster_seeds("lmdb") is None
