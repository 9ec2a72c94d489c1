"""The Data layer's record check (caffe/patches/0014) on every DB that feeds it, not only stock
LMDB (tests/test_ring_faults.py): the coalesced and shared LMDB read paths, LevelDB, and a
Redis Cluster (a scratch data set of this file's own in the suite's cluster). A record cut after
its data (no label), cut inside its data, or whose data is shorter than its shape stops the
layer with an error naming the source and the record's key."""
import pytest

from conftest import net_process
from test_ring_faults import good_datum

COUNT = 8
DAMAGED = 1  # the second record: the layer's first read (its shape) passes, the prefetch meets it
SCRATCH_PREFIX = "claims-damaged:test"  # not a data set any fixture writes


def damaged_value(damage):
    good = good_datum().SerializeToString()
    data = bytes(range(16))
    return {"no label": good[:good.index(data) + 16],
            "cut in data": good[:good.index(data) + 10],
            "short data": good_datum().__class__(channels=1, height=4, width=4, data=bytes(10),
                                                 label=1).SerializeToString()}[damage]


DAMAGES = [("no label", "has no label"), ("cut in data", "is not a Datum"),
           ("short data", "holds 10 values, its shape 1 x 4 x 4 needs 16")]


def records(damage):
    good = good_datum().SerializeToString()
    return [(f"{i:08d}", damaged_value(damage) if i == DAMAGED else good) for i in range(COUNT)]


def net_file(path, source, db, batch=4, **options):
    import caffe
    from caffe import layers as L, params as P
    from data_prep import backends
    n = caffe.NetSpec()
    n.data, n.label = L.Data(source=str(source), backend=getattr(P.Data, db), batch_size=batch, ntop=2,
                             **backends.get(db.lower()).layer_options(options))
    path.write_text(str(n.to_proto()))
    return path


def assert_stops_naming(net, source, key, message):
    p = net_process(net, 2)
    out, err = p.communicate("go\n", timeout=120)
    assert p.returncode != 0 and "done" not in out, err[-2000:]
    assert f"{source}: record {key} {message}" in err, err[-2000:]


def lmdb_of(path, damage):
    from data_prep.backends import lmdb_store
    with lmdb_store._Writer(path) as writer:
        for key, value in records(damage):
            writer.add((key.encode(), value))
    return path


@pytest.mark.parametrize("damage, message", DAMAGES)
def test_lmdb_coalesced_stops_at_a_damaged_record_naming_its_key(tmp_path, damage, message):
    db = lmdb_of(tmp_path / "db", damage)
    net = net_file(tmp_path / "net.prototxt", db, "LMDB", lmdb_read="coalesced")
    assert "lmdb_read: COALESCED" in net.read_text()
    assert_stops_naming(net, db, f"{DAMAGED:08d}", message)


@pytest.mark.parametrize("damage, message", DAMAGES)
def test_lmdb_shared_stops_at_a_damaged_record_naming_its_key(tmp_path, damage, message):
    from test_ring_faults import ring_path
    db = lmdb_of(tmp_path / "db", damage)
    ring = ring_path(db)
    net = net_file(tmp_path / "net.prototxt", db, "LMDB", lmdb_read="shared")
    assert "lmdb_read: SHARED" in net.read_text()
    try:
        assert_stops_naming(net, db, f"{DAMAGED:08d}", message)
    finally:
        ring.unlink(missing_ok=True)  # the solver aborted at the check, before it left its ring


@pytest.mark.parametrize("damage, message", DAMAGES)
def test_leveldb_stops_at_a_damaged_record_naming_its_key(tmp_path, damage, message):
    from data_prep.backends import leveldb_store
    db = tmp_path / "db"
    with leveldb_store._Writer(db) as writer:
        for key, value in records(damage):
            writer.add((key.encode(), value))
    net = net_file(tmp_path / "net.prototxt", db, "LEVELDB")
    assert_stops_naming(net, db, f"{DAMAGED:08d}", message)


@pytest.fixture(scope="module")
def suite_cluster(data_root):
    """The suite's own cluster (IMGSTORE_REDIS_PORT), the one the redis tests use."""
    from data_prep.redis_cluster import keys as redis_keys
    cluster = redis_keys.cluster_of(data_root / "any" / "redis")
    started = cluster.start()
    yield cluster
    if started:
        cluster.stop()


@pytest.fixture
def scratch_data_set(suite_cluster):
    """Writes a data set of this file's own under SCRATCH_PREFIX (with its marker, as prepare
    does); removes every key of it after."""
    from data_prep.backends import redis_store
    from data_prep.redis_cluster import keys as redis_keys
    suite_cluster.start()

    def write(damage):
        with redis_store._Writer(suite_cluster, SCRATCH_PREFIX, overwrite=True) as writer:
            for key, value in records(damage):
                writer.add((key.encode(), value))
        return suite_cluster.source(SCRATCH_PREFIX)
    yield write
    c = redis_keys.client(suite_cluster)
    try:
        redis_keys.delete_prefix(c, SCRATCH_PREFIX)
    finally:
        c.close()


@pytest.mark.parametrize("damage, message", DAMAGES)
def test_redis_stops_at_a_damaged_record_naming_its_key(scratch_data_set, tmp_path, damage, message):
    source = scratch_data_set(damage)
    net = net_file(tmp_path / "net.prototxt", source, "REDIS")
    assert_stops_naming(net, source, f"{DAMAGED:08d}", message)
