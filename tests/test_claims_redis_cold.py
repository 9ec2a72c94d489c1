"""docs/redis-method.md: a cold run of the redis backend on the project's cluster stops the servers,
drops the page cache (the RDB files' pages with it) and restarts the servers from their RDB
files, the load timed (RedisClusterLocation.set_cache). On the suite's own cluster, with the
mnist_small data set in it."""
import pytest

from conftest import ROOT, run
from data_prep import cache
from experiments.record import recorded


def dumps_of(cluster):
    return [cluster.node_dir(i) / "dump.rdb" for i in range(len(cluster.node_ports()))]


@pytest.fixture
def location(mnist_small):
    from data_prep.redis_cluster import location as redis_location
    loc = redis_location.RedisClusterLocation(mnist_small / "redis", [])
    was_running = loc.cluster.running()
    yield loc
    loc.close()  # as it found the cluster: running, since the test started it
    if not was_running:
        loc.cluster.stop()


def test_a_cold_set_cache_drops_the_rdb_files_and_restarts_the_servers_from_them(location, monkeypatch):
    from data_prep.redis_cluster import keys as redis_keys
    if not cache.can_drop_caches():
        pytest.skip("needs root to drop caches")
    cluster = location.cluster
    dumps = dumps_of(cluster)
    assert all(d.exists() and d.stat().st_size > 100_000 for d in dumps), [(d, d.exists()) for d in dumps]
    cluster.start()
    pids_before = cluster.server_pids()
    cache.warm(dumps)
    assert cache.residency(dumps) > 0.95
    at_restart = []
    start = cluster.start

    def measured_start(*args, **kw):  # the real start, the RDB files' residency read just before it
        if not at_restart:
            at_restart.append((cluster.running(), cache.residency(dumps)))
        return start(*args, **kw)
    monkeypatch.setattr(cluster, "start", measured_start)
    how, resident = location.set_cache("cold")
    assert at_restart == [(False, pytest.approx(0, abs=0.05))], at_restart  # stopped, their pages dropped
    assert how.startswith("servers restarted from their RDB files after drop_caches"), how
    assert location.load_seconds > 0 and location.describe()["load_seconds"] == location.load_seconds
    assert cluster.running() and not set(cluster.server_pids()) & set(pids_before)  # new processes
    c = redis_keys.client(cluster)
    try:  # what they loaded from the files: the whole data set (Redis drops the files' pages after loading)
        assert redis_keys.marker_of(c, "mnist:train") and len(redis_keys.keys_of(c, "mnist:train")) == 640
    finally:
        c.close()


def test_a_cold_run_records_the_restart(mnist_small, tmp_path):
    if not cache.can_drop_caches():
        pytest.skip("needs root to drop caches")
    run([str(ROOT / ".venv" / "bin" / "python"), str(ROOT / "experiments" / "run.py"), "mnist", "redis", "cold",
         "--accelerator", "1ms", "--iters", "20", "--data", str(mnist_small.parent), "--out", str(tmp_path), "--quiet"])
    [r] = recorded(tmp_path, "mnist")
    assert r.ok and r.cache == "cold"
    assert "servers restarted from their RDB files" in r.cache_method, r.cache_method
    assert r.location["kind"] == "redis-cluster" and r.location["load_seconds"] > 0
