"""The Redis Cluster backend against a real 3-node cluster of redis-server processes, read by
Caffe's own Data layer (caffe/patches/0011)."""
import hashlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

import toolchain
from conftest import ROOT, ended_within, given_up, line_within, net_process, redis_ports, run


@pytest.fixture(scope="session")
def cluster(data_root):
    from data_prep.redis_cluster import keys as redis_keys
    c = redis_keys.cluster_of(data_root / "any" / "redis")
    c.start()
    yield c
    c.stop()


@pytest.fixture
def running(cluster):
    """The session's cluster, up and reached directly (a run may have stopped or proxied it)."""
    cluster.start()
    return cluster


@pytest.fixture(scope="session")
def redis_cifar(cifar_small, cluster):
    from data_prep import build
    build.prepare("cifar10", ["redis"], cifar_small.parent, count=400, progress=False, log=lambda *_: None)
    return cifar_small


@pytest.fixture(scope="module")
def scratch_cluster(tmp_path_factory):
    from data_prep.redis_cluster.cluster import Cluster
    with redis_ports() as port:
        c = Cluster(tmp_path_factory.mktemp("scratch") / "redis-cluster", port=port)
        try:
            c.start()
            yield c
        finally:
            c.stop()


@pytest.fixture
def scratch(scratch_cluster, monkeypatch):
    """A cluster of its own (other ports, its own data root) for tests that break data sets."""
    monkeypatch.setenv("IMGSTORE_REDIS_PORT", str(scratch_cluster.port))
    scratch_cluster.start()
    return scratch_cluster


def data_net_file(path, dest, backend, batch, read_options=None):
    import caffe
    from data_prep import backends, datasets
    layer = backends.get(backend).data_layer(dest / backend, datasets.get("cifar10"),
                                             dest / "mean.binaryproto", read_options)
    n = caffe.NetSpec()
    n.data, n.label = layer(batch, caffe.TEST)
    path.write_text(str(n.to_proto()))
    return path


def batches(path, count):
    """`count` forward passes of a net: (data, labels) each, copied."""
    import caffe
    net = caffe.Net(str(path), caffe.TEST)
    out = []
    for _ in range(count):
        net.forward()
        out.append((net.blobs["data"].data.copy(), net.blobs["label"].data.copy()))
    del net
    return out


def digests(batch_list):
    return [hashlib.sha1(row.tobytes()).hexdigest() + f":{label}" for data, labels in batch_list
            for row, label in zip(data, labels)]


def test_redis_holds_the_lmdb_datum_bytes_key_by_key(redis_cifar, running):
    from data_prep import build
    from data_prep.backends import lmdb_store
    from data_prep.redis_cluster import keys as redis_keys
    for phase in ("train", "test"):
        lmdb = list(lmdb_store.raw_items(redis_cifar / "lmdb" / f"{phase}_lmdb"))
        redis = list(redis_keys.records(redis_cifar / "redis", phase))
        assert len(lmdb) == len(redis) > 0
        assert lmdb == redis
    fp = build.load_manifest(redis_cifar, "redis").splits["train"].footprint
    assert fp["records"] == 400 and fp["files"] == 0 and fp["allocated_bytes"] >= fp["apparent_bytes"] > 400 * 3072


def test_a_batch_through_caffes_data_layer_is_the_one_from_lmdb(redis_cifar, running, tmp_path):
    lmdb = batches(data_net_file(tmp_path / "l.prototxt", redis_cifar, "lmdb", 50), 2)
    redis = batches(data_net_file(tmp_path / "r.prototxt", redis_cifar, "redis", 50), 2)
    for (d1, l1), (d2, l2) in zip(lmdb, redis):
        assert np.array_equal(d1, d2) and np.array_equal(l1, l2)
    assert not np.array_equal(lmdb[0][0], lmdb[1][0])


@pytest.mark.parametrize("options", [{"prefetch_depth": 1}, {"prefetch_depth": 64},
                                     {"prefetch_depth": 64, "out_of_order": True},
                                     {"prefetch_depth": 64, "redis_io": "inline"},
                                     {"prefetch_depth": 64, "out_of_order": True, "redis_io": "inline"}])
def test_every_record_once_per_pass_in_key_order_or_arrival_order(redis_cifar, running, tmp_path, options):
    """200 test records, batches of 40: two passes over the data, the second after wrap-around."""
    lmdb = digests(batches(data_net_file(tmp_path / "l.prototxt", redis_cifar, "lmdb", 40), 10))
    running.start(rtt_ms=2)  # through the delay proxy: replies of the three nodes interleave
    try:
        got = digests(batches(data_net_file(tmp_path / "r.prototxt", redis_cifar, "redis", 40, options), 10))
    finally:
        running.start()
    first, second = got[:200], got[200:]
    # as multisets: the stand-in repeats some images, so equal digests may be distinct records
    assert sorted(first) == sorted(lmdb[:200]) and sorted(second) == sorted(lmdb[:200])
    if not options.get("out_of_order"):
        assert got == lmdb


def redis_io_threads():
    names = []
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/comm") as f:
            names.append(f.read().strip())
    return names.count("redis-io")


@pytest.mark.parametrize("redis_io", ["thread", "inline"])
def test_replies_are_received_on_an_io_thread_of_their_own_unless_inline(redis_cifar, running, tmp_path, redis_io):
    """patch 0011: one "redis-io" thread per Redis cursor (the net's Data layer), gone with the net."""
    import caffe
    net = caffe.Net(str(data_net_file(tmp_path / "r.prototxt", redis_cifar, "redis", 40, {"redis_io": redis_io})),
                    caffe.TEST)
    net.forward()
    during = redis_io_threads()
    del net
    assert during == (1 if redis_io == "thread" else 0)
    assert redis_io_threads() == 0


def test_a_wrong_password_or_address_fails_at_setup_without_showing_the_password(redis_cifar, running, tmp_path):
    net = data_net_file(tmp_path / "r.prototxt", redis_cifar, "redis", 10)
    out, err = ended_within(net_process(net, IMGSTORE_REDIS_PASSWORD="not-the-password-42"),
                            "the end of a net given a wrong password", 60)
    assert "ready" not in out and "password was refused" in err and "not-the-password-42" not in err
    bad = tmp_path / "bad.prototxt"
    bad.write_text(re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:1", net.read_text()))  # every seed, whatever its port
    out, err = ended_within(net_process(bad), "the end of a net given no seed that answers", 60)
    assert "ready" not in out and "no seed node gave the cluster's slot map: 127.0.0.1:1 (Connection refused)" in err


def test_a_reader_logs_in_as_an_acl_user_and_a_refused_login_names_the_user(redis_cifar, running, tmp_path,
                                                                            monkeypatch):
    """A cluster a lab runs gives its readers users of their own (Redis ACLs, set on every node).
    With IMGSTORE_REDIS_USER, Caffe's reader logs in as that user: one allowed only the commands
    the reader sends, on the data set's keys, reads LMDB's batch; a wrong password or an unknown
    user stops it at set-up, naming the user and never the password."""
    from data_prep.redis_cluster import keys as redis_keys
    secret, user = "reader-" + os.urandom(6).hex(), "imgstore-reader"
    keys = redis_keys.prefix_of(redis_cifar / "redis", "test").split(":")[0] + ":*"
    nodes = [running.node_client(i) for i in range(len(running.node_ports()))]
    try:
        for node in nodes:
            node.execute_command("ACL", "SETUSER", user, "reset", "on", f">{secret}", f"~{keys}", "+get", "+llen",
                                 "+lrange", "+ping", "+asking", "+cluster|slots")
        net = data_net_file(tmp_path / "r.prototxt", redis_cifar, "redis", 50)
        lmdb = batches(data_net_file(tmp_path / "l.prototxt", redis_cifar, "lmdb", 50), 1)
        with monkeypatch.context() as m:
            m.setenv("IMGSTORE_REDIS_USER", user)
            m.setenv("IMGSTORE_REDIS_PASSWORD", secret)
            (data, labels), = batches(net, 1)
        assert np.array_equal(data, lmdb[0][0]) and np.array_equal(labels, lmdb[0][1])
        for who, password in ((user, "not-the-secret-7"), ("nobody-here", secret)):
            out, err = ended_within(net_process(net, IMGSTORE_REDIS_USER=who, IMGSTORE_REDIS_PASSWORD=password),
                                    f"the end of a net logging in as {who}", 60)
            assert "ready" not in out and f"user {who}'s password was refused (WRONGPASS" in err, err[-2000:]
            assert "IMGSTORE_REDIS_USER" in err and password not in err
    finally:
        for node in nodes:
            node.execute_command("ACL", "DELUSER", user)
            node.close()


def test_a_missing_key_is_named(redis_cifar, running, tmp_path):
    from data_prep.redis_cluster import keys as redis_keys
    c = redis_keys.client(redis_keys.cluster_of(redis_cifar / "redis"))
    key = "cifar10:test:" + c.lindex("cifar10:test:~index", 3).decode()
    value = c.get(key)
    c.delete(key)
    try:
        net = data_net_file(tmp_path / "r.prototxt", redis_cifar, "redis", 10)
        p = net_process(net, 1)
        out, err = ended_within(p, "the end of a net missing a key", 60, stdin="go\n")
        assert p.returncode != 0 and f"key {key} not found on node" in err
    finally:
        c.set(key, value)
        c.close()


def test_a_node_killed_during_training_stops_it_within_seconds_naming_the_node(redis_cifar, running, tmp_path):
    net = data_net_file(tmp_path / "r.prototxt", redis_cifar, "redis", 10)
    p = net_process(net, 10_000)
    try:
        assert line_within(p, "'ready' from a net over Redis", time.monotonic() + 120).strip() == "ready"
        victim = running.server_pids()[1]
        os.kill(victim, signal.SIGKILL)
        p.stdin.write("go\n")
        p.stdin.flush()
        started = time.monotonic()
        out, err = ended_within(p, "the end of a net whose node was killed", 30)
        assert time.monotonic() - started < 15
        assert p.returncode != 0 and "done" not in out
        assert f"Redis node 127.0.0.1:{running.port + 1}" in err and "cifar10:test:" in err
        assert "the cluster has no replica of it to take over" in err
    finally:
        if p.poll() is None:
            p.kill()
        running.stop()
        running.start()  # restarted from the RDB files data_prep saved


def test_an_incomplete_data_set_is_refused_then_rewritten(scratch, tmp_path):
    from data_prep import build
    from data_prep.redis_cluster import keys as redis_keys
    running, data_root = scratch, scratch.root.parent
    writer = subprocess.Popen([sys.executable, str(ROOT / "data_prep" / "prepare.py"), "mnist", "redis",
                               "--out", str(data_root), "--limit", "20000", "--quiet", "--jobs", "1"],
                              env=dict(os.environ), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    c = redis_keys.client(running)
    try:
        deadline = time.monotonic() + 120
        while c.llen("mnist:train:~index") < 1000:
            if writer.poll() is not None or time.monotonic() > deadline:
                given_up(writer, f"1000 records written within 120 s (exit status {writer.returncode})")
            time.sleep(0.05)
        writer.kill()
        writer.wait(timeout=10)
        assert c.get("mnist:train:~complete") is None
        assert not (data_root / "mnist" / "redis" / "manifest.json").exists()
        with pytest.raises(Exception, match="marker"):
            list(redis_keys.records(data_root / "mnist" / "redis", "train"))
        build.prepare("mnist", ["redis"], data_root, limit=20000, progress=False, log=lambda *_: None)
        assert int(c.get("mnist:train:~complete").split()[0]) == 20000 == c.llen("mnist:train:~index")
        # a complete data set that no manifest here describes is not overwritten without --force
        (data_root / "mnist" / "redis" / "manifest.json").unlink()
        with pytest.raises(Exception, match="--force"):
            build.prepare("mnist", ["redis"], data_root, limit=20000, progress=False, log=lambda *_: None)
        build.prepare("mnist", ["redis"], data_root, limit=20000, force=True, progress=False, log=lambda *_: None)
        assert (data_root / "mnist" / "redis" / "manifest.json").exists()
    finally:
        writer.kill()
        writer.wait(timeout=10)
        c.close()


def test_clean_removes_one_data_set_for_good_and_nothing_else(scratch):
    """prepare.py clean: the manifest and every key of the data set's prefixes go, another data
    set's stay, and a restart from the servers' saved files does not bring them back."""
    from data_prep import build
    from data_prep.redis_cluster import keys as redis_keys
    running, data_root = scratch, scratch.root.parent
    build.prepare("mnist", ["redis"], data_root, limit=200, force=True, progress=False, log=lambda *_: None)
    c = redis_keys.client(running)
    try:
        c.set("cifar10:test:kept", "another data set's")
        build.clean("mnist", ["redis"], data_root, log=lambda *_: None)
        assert not (data_root / "mnist" / "redis").exists()
        running.stop()
        running.start()
    finally:
        c.close()
    c = redis_keys.client(running)
    try:
        left = [k.decode() for k in c.scan_iter(match="*", count=1000, target_nodes=c.ALL_NODES)]
        assert left == ["cifar10:test:kept"]
        c.delete("cifar10:test:kept")
    finally:
        c.close()


def test_values_larger_than_a_read_and_holding_crlf_come_out_whole_and_in_order(scratch, tmp_path):
    """The reader parses replies where read() put them (patch 0011): a value of several reads
    (480 KB against 256 KB per read), bytes that look like protocol (CR LF, '$', '-') inside it,
    two passes with the wrap-around, few and many requests in flight."""
    import caffe
    from caffe import layers as L, params as P
    from caffe.proto import caffe_pb2
    from data_prep.backends import redis_store
    rng = np.random.default_rng(7)
    images = [rng.integers(0, 256, (3, 400, 400), dtype=np.uint8) for _ in range(6)]
    images[1][0, 0, :7] = list(b"\r\n$-1\r\n")
    with redis_store._Writer(scratch, "big:train", overwrite=True) as w:
        for i, image in enumerate(images):
            d = caffe_pb2.Datum(channels=3, height=400, width=400, data=image.tobytes(), label=i)
            w.add((f"{i:08d}", d.SerializeToString()))
    for depth in (1, 4, 64):
        n = caffe.NetSpec()
        n.data, n.label = L.Data(batch_size=1, ntop=2, source=scratch.source("big:train"), backend=P.Data.REDIS,
                                 prefetch_depth=depth)
        (tmp_path / "big.prototxt").write_text(str(n.to_proto()))
        got = batches(tmp_path / "big.prototxt", 2 * len(images))
        for k, (data, labels) in enumerate(got):
            assert labels[0] == k % len(images), depth
            assert np.array_equal(data[0], images[k % len(images)].astype(np.float32)), (depth, k)


def test_a_full_server_gives_a_clear_error_and_no_marker(scratch):
    from data_prep import build
    running, data_root = scratch, scratch.root.parent
    from data_prep.errors import SourceError
    nodes = running.nodes()  # the 20,000 MNIST records there are replaced by 40,000: twice the room
    try:
        for n in nodes:
            n.config_set("maxmemory", int(n.info("memory")["used_memory"]) + 200_000)
        with pytest.raises(SourceError, match="after .* records: .*maxmemory"):
            build.prepare("mnist", ["redis"], data_root, limit=40000, force=True, progress=False, log=lambda *_: None)
        from data_prep.redis_cluster import keys as redis_keys
        c = redis_keys.client(running)
        assert c.get("mnist:train:~complete") is None
        c.close()
    finally:
        for n in nodes:
            n.config_set("maxmemory", 0)


def test_servers_listen_on_loopback_only_and_want_the_password(running, data_root):
    import redis
    for pid in running.server_pids():
        listening = [c.laddr for c in psutil.Process(pid).net_connections() if c.status == psutil.CONN_LISTEN]
        assert listening and all(a.ip == "127.0.0.1" for a in listening)
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=running.port).ping()
    secret = os.environ["IMGSTORE_REDIS_PASSWORD"].encode()
    for f in data_root.rglob("*"):
        if f.is_file() and f.stat().st_size < 50_000_000:
            assert secret not in f.read_bytes(), f


def test_a_run_from_redis_over_a_round_trip_is_recorded_with_it(redis_cifar, running, tmp_path):
    from experiments.record import load
    run([sys.executable, str(ROOT / "experiments" / "run.py"), "cifar10", "redis", "all", "--iters", "30",
         "--rtt", "10ms", "--prefetch-depth", "32", "--out-of-order", "--data", str(redis_cifar.parent),
         "--out", str(tmp_path), "--quiet"])
    records = load([tmp_path / "cifar10" / "records.jsonl"])
    assert {r.cache for r in records} == {"warm", "cold"} and all(r.ok for r in records)
    for r in records:
        assert r.read_options == {"prefetch_depth": 32, "out_of_order": True}
        assert r.location["kind"] == "redis-cluster" and r.location["rtt_ms_asked"] == 10
        assert r.location["delay_proxy_source"] == toolchain.delay_proxy_source()  # which proxy made the 10 ms
        # suspected: the proxy holds up to 80 MiB per connection outside the run's cgroup. It can
        # (64 MiB queued + 16 MiB spare per direction), but on the default legs it holds a round
        # trip of requests, a few bytes each: measured here, recorded with every run
        assert 0 < r.location["delay_proxy_peak_rss_bytes"] < 16 << 20
        assert r.location["delay_ms_requests_replies"] == [10, 0]  # the round trip on the requests' leg
        assert 10 <= r.location["rtt_ms_measured"] < 40
        assert r.compute["mode"] == "emulated" and r.iterations == 30
        assert len(r.location["servers"]) == 3 and sum(s["cpu_seconds"] for s in r.location["servers"].values()) > 0
        assert r.monitor["net_recv_bytes_total"] > 400 * 3072
    cold = next(r for r in records if r.cache == "cold")
    assert "restarted" in cold.cache_method and cold.location["load_seconds"] > 0
    secret = os.environ["IMGSTORE_REDIS_PASSWORD"]
    assert not any(secret in f.read_text(errors="replace") for f in tmp_path.rglob("*") if f.is_file())


def test_the_servers_io_threads_are_set_at_start_and_said(scratch):
    """--io-threads N: each node starts with N I/O threads (reads too; Redis's io-threads); a
    running cluster asked for another number is restarted with it; describe() (the record's
    location) says the number the nodes run with."""
    from data_prep.redis_cluster.cluster import Cluster

    def io_thread_names(pid):
        return [t.read_text().strip() for t in Path(f"/proc/{pid}/task").glob("*/comm")
                if t.read_text().startswith("io_thd")]
    assert scratch.describe()["io_threads"] == 1 and not io_thread_names(scratch.server_pids()[0])
    before = scratch.server_pids()
    two = Cluster(scratch.root, port=scratch.port, io_threads=2)
    try:
        assert two.start() is True and set(two.server_pids()).isdisjoint(before)
        assert two.describe()["io_threads"] == 2 and len(io_thread_names(two.server_pids()[0])) == 1
        assert Cluster(scratch.root, port=scratch.port).start() is False  # none asked: as it runs
    finally:
        Cluster(scratch.root, port=scratch.port, io_threads=1).start()


def test_the_suites_port_blocks_never_overlap_nodes_proxies_or_buses():
    from conftest import BLOCKS, block_port, block_ports
    taken = [p for index in range(BLOCKS) for p in block_ports(block_port(index))]
    assert len(taken) == len(set(taken)) and max(taken) < 65536


def test_each_user_of_redis_ports_gets_free_ports_of_its_own_and_the_environment_back():
    import socket
    from conftest import block_ports, redis_port_in_environment, redis_ports
    suites = os.environ["IMGSTORE_REDIS_PORT"]
    with redis_ports() as first:
        with redis_ports() as second:
            assert not set(block_ports(first)) & set(block_ports(second))  # held: not handed out twice
        with socket.socket() as busy:  # a server of someone else's on the next block's proxy port
            busy.bind(("127.0.0.1", second + 100))
            busy.listen()
            with redis_ports() as third:
                assert third not in (first, second) and second + 100 not in block_ports(third)
        with redis_port_in_environment() as port:
            assert os.environ["IMGSTORE_REDIS_PORT"] == str(port) and port not in block_ports(first)
    assert os.environ["IMGSTORE_REDIS_PORT"] == suites


def test_the_environment_kept_is_put_back_even_a_variable_unset_before():
    """data_prep makes a password into the environment when there is none: a helper that
    recorded only the variables that were set would leave that one behind."""
    from conftest import environment_kept
    from data_prep.redis_cluster.servers import PASSWORD_ENV, password
    suites = os.environ.get(PASSWORD_ENV)
    with environment_kept(**{PASSWORD_ENV: None}):
        with environment_kept(PASSWORD_ENV):
            made = bool(password() and os.environ.get(PASSWORD_ENV))
            assert made  # (booleans: a failure must not print a password)
        assert PASSWORD_ENV not in set(os.environ)
    put_back = os.environ.get(PASSWORD_ENV) == suites
    assert put_back
