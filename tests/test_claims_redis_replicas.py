"""docs/redis-method.md: with replicas, a prepare's writes are on every replica before it goes on
(redis_store._Writer._wait_replicated, Redis's WAIT): after prepare each replica holds exactly
its master's keys, and a replica that cannot catch up makes the write fail, naming it, with no
completion marker written. A cluster of its own: 3 masters with a replica each (ports of its own)."""
import os
import signal
import subprocess
import sys

import pytest

from conftest import ROOT, redis_ports

LIMIT = 300


@pytest.fixture(scope="module")
def replicated(tmp_path_factory):
    from data_prep.redis_cluster.cluster import Cluster
    root = tmp_path_factory.mktemp("replicas")
    with redis_ports() as port:
        cluster = Cluster(root / "redis-cluster", port=port, replicas=1)
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()


@pytest.fixture
def cluster(replicated, monkeypatch):
    monkeypatch.setenv("IMGSTORE_REDIS_PORT", str(replicated.port))  # the data path's cluster_of finds it
    replicated.start()
    return replicated


def pairs(cluster):
    """(master index, replica index) of every replica, from the cluster's own view."""
    roles = cluster.node_roles()
    index_of = {node_id: i for i, (node_id, _, _) in roles.items()}
    return [(index_of[master], i) for i, (_, master, _) in roles.items() if master]


def keys_on(cluster, i, pattern):
    node = cluster.node_client(i)
    try:
        node.execute_command("READONLY")
        return sorted(node.scan_iter(match=pattern, count=1000))
    finally:
        node.close()


def prepare(root, timeout=300):
    """prepare.py of mnist into the cluster: (exit status, stderr); None as the status when it
    was still running after `timeout` seconds (then killed)."""
    p = subprocess.Popen([sys.executable, str(ROOT / "data_prep" / "prepare.py"), "mnist", "redis", "--out", str(root),
                          "--limit", str(LIMIT), "--quiet", "--force"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        err = p.communicate(timeout=timeout)[1]
        return p.returncode, err
    except subprocess.TimeoutExpired:
        p.kill()
        return None, p.communicate(timeout=10)[1]  # all its stderr: communicate() kept what it read


def test_after_a_prepare_every_replica_holds_exactly_its_masters_keys(cluster):
    status, err = prepare(cluster.root.parent)
    assert status == 0, err[-2000:]
    found = pairs(cluster)
    assert len(found) == 3
    total = 0
    for master, replica in found:  # read at once: WAIT left nothing for the replicas to catch up
        on_master = keys_on(cluster, master, "mnist:*")
        assert on_master and keys_on(cluster, replica, "mnist:*") == on_master, (master, replica)
        total += len(on_master)
    assert total == 2 * (LIMIT + 2)  # both phases' records, their index and marker


def test_a_replica_that_cannot_catch_up_fails_the_write_with_no_marker(cluster):
    from data_prep.redis_cluster import keys as redis_keys
    master, replica = pairs(cluster)[1]
    pid = cluster.server_pids()[replica]
    os.kill(pid, signal.SIGSTOP)
    try:
        status, err = prepare(cluster.root.parent, timeout=60)  # WAIT's 10 s and the write's own time
    finally:
        os.kill(pid, signal.SIGCONT)
    assert status is not None, f"prepare still writing 60 s after a replica stopped: {err[-2000:]}"
    assert status != 0
    assert "had their writes on fewer than 1 replicas after 10 s; no completion marker written" in err, err[-2000:]
    assert str(cluster.node_ports()[master]) in err.split("masters ", 1)[1].split(" had")[0]  # the one behind
    c = redis_keys.client(cluster)
    try:
        assert c.get(redis_keys.marker("mnist:train")) is None  # nothing half written is trusted
    finally:
        c.close()
    status, err = prepare(cluster.root.parent)  # caught up again: the same prepare goes through
    assert status == 0, err[-2000:]
