"""A run reads its Redis data from the cluster it names (--cluster, the location's seeds): the net
it writes and its warm pass go there, also for data prepared into that cluster before the
artifact's folder kept its seeds (no seeds file), where the folder alone would name another
cluster (IMGSTORE_REDIS_CLUSTER's, else the project's). Two user-style clusters of real
redis-server processes (test_claims_redis_setup's)."""
from test_claims_redis_setup import labs  # noqa: F401 (a fixture)
from test_redis_external import cli


def test_data_without_a_seeds_file_is_read_from_the_cluster_the_run_names(labs, tmp_path, monkeypatch):
    from data_prep.redis_cluster import keys as redis_keys
    from experiments import record
    seeds, password_file = labs
    data, out = tmp_path / "data", tmp_path / "results"
    p = cli("data_prep/prepare.py", ["mnist", "redis", "--limit", "300", "--out", str(data), "--cluster", seeds["a"],
                                     "--quiet"], password_file)
    assert p.returncode == 0, p.stderr[-2000:]
    (data / "mnist" / "redis" / redis_keys.SEEDS_FILE).unlink()  # as data prepared before folders kept their seeds
    monkeypatch.setenv("IMGSTORE_REDIS_CLUSTER", seeds["b"])  # where the folder alone leads: the other cluster
    p = cli("experiments/run.py", ["mnist", "redis", "warm", "--accelerator", "1ms", "--iters", "20", "--cluster",
                                   seeds["a"], "--data", str(data), "--out", str(out), "--quiet"], password_file)
    assert p.returncode == 0, p.stderr[-2000:]
    r, = record.recorded(out, "mnist")
    assert r.ok and r.location["seeds"] == seeds["a"] and r.cache_method == "every record read once over the network"
    nets = [f.read_text() for f in (out / r.run_dir).rglob("*.prototxt")]
    for phase in ("train", "test"):
        assert any(f"redis://{seeds['a']}/imgstore:mnist:{phase}" in text for text in nets), phase
    assert not any(seeds["b"] in text for text in nets)
