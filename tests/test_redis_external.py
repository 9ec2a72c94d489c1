"""A Redis Cluster the user runs (data_prep.redis_cluster.external), stood in for by a cluster of real
redis-server processes that the test starts with an ACL user of its own, as a lab would give
each client: on loopback, and on server hosts in network namespaces (experiments/lab_cluster.py,
Redis and Valkey) read from client hosts. prepare.py and run.py reach it with --cluster, the
records and their sequence are LMDB's, the project's keys are under imgstore: alone, and what
goes wrong is named."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT, redis_ports

PY = str(ROOT / ".venv" / "bin" / "python")
USER = "lab-reader"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """(the cluster, its seeds, a password file of the ACL user's, readable by its owner alone)."""
    from data_prep.redis_cluster.cluster import Cluster
    with redis_ports() as port:
        c = Cluster(tmp_path_factory.mktemp("lab") / "redis-cluster", port=port)
        try:
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
        finally:
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
        assert len(keys) == 2 * (300 + 3) and all(k.startswith("imgstore:mnist:") for k in keys)
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
    assert r.location["versions"] and r.location["not_available"] is None  # +@all: INFO too
    written = [f.read_text(errors="replace") for f in (out / r.run_dir).rglob("*") if f.is_file()]
    assert not any(secret in text for text in written + [p.stdout, p.stderr, (out / "mnist" / "records.jsonl").read_text()])
    assert any(f"redis://{seeds}/imgstore:mnist:train" in text for text in written)
    again = cli("experiments/run.py", ["mnist", "redis", "warm", "--iters", "20", "--cluster", seeds,
                                       "--data", str(data), "--out", str(out), "--quiet"], password_file)
    assert "already recorded" in again.stderr  # the same cluster: the same setup
    cold = cli("experiments/run.py", ["mnist", "redis", "cold", "--iters", "20", "--cluster", seeds,
                                      "--data", str(data), "--out", str(out), "--quiet"], password_file)
    assert cold.returncode == 2 and "is not this project's" in cold.stderr
    admin = cluster.client()
    try:
        admin.set("lab:own-key", "kept")  # the lab's own data, beside the project's
        clean = cli("data_prep/prepare.py", ["clean", "mnist", "redis", "--out", str(data), "--cluster", seeds],
                    password_file)
        assert clean.returncode == 0, clean.stderr
        left = [k.decode() for k in admin.scan_iter(match="*", count=1000, target_nodes=admin.ALL_NODES)]
        assert left == ["lab:own-key"]
    finally:
        admin.delete("lab:own-key")
        admin.close()
    assert not (data / "mnist" / "redis").exists() and (data / "mnist" / "lmdb" / "manifest.json").exists()


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


SAME_SEQUENCE = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1] + "/tests")  # the tests' helpers: test_lmdb_read
import caffe
from data_prep import backends, datasets
from data_prep.redis_cluster import external as redis_external
from test_lmdb_read import sequence
redis_external.password()  # from the password file into the environment, where Caffe's reader looks
dest = Path(sys.argv[2])
def net(backend):
    layer = backends.get(backend).data_layer(dest / backend, datasets.get("mnist"), dest / "mean.binaryproto")
    n = caffe.NetSpec()
    n.data, n.label = layer(40, caffe.TEST)
    path = dest.parent / (backend + ".prototxt")
    path.write_text(str(n.to_proto()))
    return str(path)
lmdb, redis = (sequence(net(b), 20) for b in ("lmdb", "redis"))
print("same" if lmdb == redis else "differ", len(lmdb), len(set(lmdb)))
"""


@pytest.mark.parametrize("server", ["redis", "valkey"])
def test_a_cluster_on_other_hosts_is_prepared_and_trained_from_by_client_hosts(tmp_path, server):
    """Three server hosts and two client hosts in network namespaces of their own (not loopback):
    the servers (Debian's redis-server, or its valkey-server) form a cluster at their own
    addresses, with an ACL user; a client host prepares MNIST into it with --cluster, reads it
    in LMDB's sequence across passes, and trains two solvers from it, one on each client host."""
    from experiments import hosts, lab_cluster, record
    with hosts.Hosts(clients=2, servers=3) as net:
        lab = lab_cluster.LabCluster(net, tmp_path / "lab", server=server).start()
        data, out = tmp_path / "data", tmp_path / "results"
        clients = ",".join(net.namespace(f"client-{i}") for i in range(2))

        def inside(argv):
            p = subprocess.run(net.command("client-0", argv), capture_output=True, text=True, env=lab.env(),
                               timeout=600)
            assert p.returncode == 0, p.stderr[-3000:]
            return p
        inside([PY, str(ROOT / "data_prep/prepare.py"), "mnist", "lmdb,redis", "--limit", "300", "--out", str(data),
                "--cluster", lab.seeds, "--quiet"])
        # 20 batches of 40 over the 300 test records: 2.7 passes, batches straddling the wrap-around
        assert inside([PY, "-c", SAME_SEQUENCE, str(ROOT), str(data / "mnist")]).stdout.split() == ["same", "800", "300"]
        inside([PY, str(ROOT / "experiments/run.py"), "mnist", "redis", "warm", "--iters", "20", "--data", str(data),
                "--out", str(out), "--quiet", "--cluster", lab.seeds, "--concurrent", "2", "--client-hosts", clients])
        runs = record.recorded(out, "mnist")
        assert len(runs) == 2 and all(r.ok for r in runs)
        assert sorted(r.concurrent["host"] for r in runs) == sorted(clients.split(","))
        r = runs[0]
        assert r.concurrent["client_hosts"] == 2 and "solvers over 2 client hosts" in r.setup()[2]
        assert r.location["seeds"] == lab.seeds and r.location["masters"] == 3 and r.location["server"] == server
        assert lab.seeds.startswith(hosts.SUBNET) and set(r.location["servers"]) == set(lab.seeds.split(","))
        assert all(s["cpu_seconds"] > 0 for s in r.location["servers"].values())  # from the servers' own INFO
        made = list(net.made)
    assert not set(made) & set(hosts.namespaces())


def test_a_solver_placed_on_a_host_that_does_not_exist_is_named(tmp_path):
    from experiments import resolved, runner
    from experiments.config import RunConfig
    config = RunConfig("mnist", "lmdb", "warm", cpu=True, client_hosts=("imgstore-no-such-host",), data=str(tmp_path))
    with pytest.raises(runner.RunError, match="no network namespace imgstore-no-such-host"):
        runner._resolve(config, runner.Cell("lmdb", "warm"), resolved.resolve(config), print, None, 1.0)


def test_runs_on_a_cluster_the_user_runs_are_not_the_same_setup_as_on_the_projects(monkeypatch):
    """--cluster is the Redis location's option: recorded in location.seeds, compared there, and
    taken from the command line alone (the environment's seeds are a script's fallback)."""
    from data_prep import locations
    from experiments import resolved
    from experiments import run as run_py
    monkeypatch.setenv("IMGSTORE_REDIS_CLUSTER", "10.0.0.9:6379")
    redis_location = locations.get("redis-cluster")
    plain = resolved.resolve(run_py.parse(["mnist", "redis", "warm"]))
    asked = resolved.resolve(run_py.parse(["mnist", "redis,lmdb", "warm",
                                           "--cluster", "10.0.0.5:6379, 10.0.0.6:6379"]))
    assert plain.read_for("redis")[1] == {}
    assert asked.read_for("redis")[1] == {"seeds": "10.0.0.5:6379,10.0.0.6:6379"}
    assert asked.read_for("lmdb")[1] == {}
    on_theirs = {"external": True, "seeds": "10.0.0.5:6379,10.0.0.6:6379"}
    assert redis_location.options_of(on_theirs) == asked.read_for("redis")[1]
    assert redis_location.options_of({"nodes": 3, "rtt_ms_asked": None}) == plain.read_for("redis")[1]


def test_an_artifact_is_read_from_the_cluster_it_was_written_to(tmp_path, monkeypatch):
    """The artifact's folder keeps the seeds it was written to: reading it (a net's source) goes
    there with no flag and no environment; a run naming another cluster, or none, is refused."""
    from data_prep import backends, locations
    from data_prep.redis_cluster import keys as redis_keys
    from data_prep.redis_cluster import location as redis_location
    monkeypatch.delenv("IMGSTORE_REDIS_CLUSTER", raising=False)
    dest = tmp_path / "mnist" / "redis"
    dest.mkdir(parents=True)
    assert backends.get("redis").source(dest, "train").startswith("redis://127.0.0.1:")
    (dest / redis_keys.SEEDS_FILE).write_text("10.0.0.5:6379\n")
    assert backends.get("redis").source(dest, "train") == "redis://10.0.0.5:6379/imgstore:mnist:train"
    with pytest.raises(locations.LocationError, match="prepared into the cluster at 10.0.0.5:6379, and this run gives "
                                                      "--cluster 10.0.0.6:6379: run with --cluster 10.0.0.5:6379"):
        redis_location.RedisClusterLocation(dest, [], seeds="10.0.0.6:6379")
    with pytest.raises(locations.LocationError, match="gives no --cluster"):
        redis_location.RedisClusterLocation(dest, [])
    assert redis_location.RedisClusterLocation(dest, [], seeds="10.0.0.5:6379").cluster.seed_text() == "10.0.0.5:6379"
    monkeypatch.setenv("IMGSTORE_REDIS_CLUSTER", "10.0.0.7:6379")
    elsewhere = tmp_path / "other" / "mnist" / "redis"
    elsewhere.mkdir(parents=True)
    with pytest.raises(locations.LocationError, match="IMGSTORE_REDIS_CLUSTER names the cluster at 10.0.0.7:6379, "
                                                      "which a run takes as --cluster 10.0.0.7:6379"):
        redis_location.RedisClusterLocation(elsewhere, [])
