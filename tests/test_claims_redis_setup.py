"""docs/redis-method.md: a run on a cluster the user runs is another setup than the same cell on
another cluster: run.py asked for a cell recorded on cluster A runs it again on cluster B (other
seeds), and skips it as recorded on A and, once run there, on B. Two user-style clusters of real
redis-server processes, each with the same ACL user (ports of their own)."""
import os
from contextlib import ExitStack

import pytest

from conftest import redis_ports
from test_redis_external import USER, cli


@pytest.fixture(scope="module")
def labs(tmp_path_factory):
    """{name: seeds} of two clusters, and a password file of their ACL user."""
    from data_prep.redis_cluster.cluster import Cluster
    secret = "lab-" + os.urandom(8).hex()
    password_file = tmp_path_factory.mktemp("secret") / "password"
    password_file.write_text(secret + "\n")
    password_file.chmod(0o600)
    clusters = {}
    with ExitStack() as ports:
        try:
            for name in ("a", "b"):
                c = clusters[name] = Cluster(tmp_path_factory.mktemp(f"lab-{name}") / "redis-cluster",
                                             port=ports.enter_context(redis_ports()))
                c.start()
                for i in range(len(c.node_ports())):
                    node = c.node_client(i)
                    node.execute_command("ACL", "SETUSER", USER, "reset", "on", f">{secret}", "~imgstore:*", "+@all")
                    node.close()
            yield {name: f"127.0.0.1:{c.port}" for name, c in clusters.items()}, password_file
        finally:
            for c in clusters.values():
                c.stop()


def run_py(seeds, data, out, password_file):
    return cli("experiments/run.py", ["mnist", "redis", "warm", "--accelerator", "1ms", "--iters", "20",
                                      "--cluster", seeds, "--data", str(data), "--out", str(out), "--quiet"],
               password_file)


def test_a_cell_recorded_on_one_cluster_runs_again_on_another_and_is_skipped_on_each(labs, tmp_path):
    from experiments import record
    seeds, password_file = labs
    out = tmp_path / "results"
    for name in seeds:  # the same data set in each cluster, a manifest for each in a data folder of its own
        p = cli("data_prep/prepare.py", ["mnist", "redis", "--limit", "300", "--out", str(tmp_path / name),
                                         "--cluster", seeds[name], "--quiet"], password_file)
        assert p.returncode == 0, p.stderr[-2000:]
    on_a = run_py(seeds["a"], tmp_path / "a", out, password_file)
    assert on_a.returncode == 0 and "already recorded" not in on_a.stderr, on_a.stderr[-2000:]
    on_b = run_py(seeds["b"], tmp_path / "b", out, password_file)
    assert on_b.returncode == 0, on_b.stderr[-2000:]
    assert "already recorded" not in on_b.stderr  # other seeds: another setup, run again
    runs = record.recorded(out, "mnist")
    assert sorted(r.location["seeds"] for r in runs) == sorted(seeds.values()) and all(r.ok for r in runs)
    for name in seeds:  # the same cluster again: the same setup, skipped
        again = run_py(seeds[name], tmp_path / name, out, password_file)
        assert again.returncode == 0 and "already recorded" in again.stderr, again.stderr[-2000:]
    assert len(record.recorded(out, "mnist")) == 2
