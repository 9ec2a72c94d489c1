"""The Data layer transforming on several threads (caffe/patches/0016, data_param.transform_threads,
run.py --transform-threads) for LMDB, LevelDB and Redis: the same records in the same order with the
same random crops and mirrors as one thread, bit for bit; the pool's threads named caffe-transform
and counted in the data path; 0 or a negative count refused by run.py and by Caffe itself."""
import subprocess
import sys
from pathlib import Path

import lmdb
import pytest

from conftest import ROOT, net_process
from experiments import proctrack
from experiments.record import recorded
from test_lmdb_read import sequence

BACKENDS = ("lmdb", "leveldb", "redis")
TRANSFORM = dict(crop_size=20, mirror=True, scale=0.00390625)
BATCH = 48
FORWARDS = 640 * 5 // 2 // BATCH  # 2.5 passes of 640 records in batches of 48: wrap-arounds mid-batch


@pytest.fixture(scope="module")
def mnist_up(mnist_small):
    """mnist_small with its Redis data set reachable: the data root's cluster started (and stopped
    after, unless it was running already)."""
    from data_prep.redis_cluster import keys as redis_keys
    cluster = redis_keys.cluster_of(mnist_small / "redis")
    was_running = cluster.running()
    cluster.start()
    yield mnist_small
    if not was_running:
        cluster.stop()


def data_net(path, dest, backend, transform=TRANSFORM, threads=None, batch=BATCH):
    """A net of one Data layer reading the backend's train split of `dest`; threads: the
    transform_threads read option, through the backend's own option (as run.py passes it)."""
    import caffe
    from caffe import layers as L, params as P
    from data_prep import backends
    b = backends.get(backend)
    options = b.layer_options(None if threads is None else {"transform_threads": threads})
    n = caffe.NetSpec()
    n.data, n.label = L.Data(source=b.source(dest / backend, "train"), backend=getattr(P.Data, b.db),
                             batch_size=batch, ntop=2, **options, **({"transform_param": transform} if transform else {}))
    path.write_text(str(n.to_proto()))
    return path


@pytest.mark.parametrize("backend", BACKENDS)
def test_several_transform_threads_give_the_one_threads_batches_bit_for_bit(mnist_up, tmp_path, backend):
    stock = sequence(data_net(tmp_path / "stock.prototxt", mnist_up, backend), FORWARDS, train=True, seed=7)
    for threads in (1, 2, 3, 7):
        assert sequence(data_net(tmp_path / f"t{threads}.prototxt", mnist_up, backend, threads=threads),
                        FORWARDS, train=True, seed=7) == stock, (backend, threads)
    assert len(set(stock[:640])) > 600  # random crops and mirrors: the comparison could fail
    assert stock[640:1280] != stock[:640]  # the second pass draws other crops of the same records


def test_a_single_mean_value_is_replicated_for_every_channel_before_the_pool_transforms(cifar_small, tmp_path):
    """Three channels, one mean_value (replicated by the transformer on first use), a mean file:
    the pool's floats are the one thread's."""
    for transform in (dict(TRANSFORM, mean_value=[120]), dict(TRANSFORM, mean_file=str(cifar_small / "mean.binaryproto"))):
        stock = sequence(data_net(tmp_path / "stock.prototxt", cifar_small, "lmdb", transform), 20, train=True, seed=3)
        assert sequence(data_net(tmp_path / "t3.prototxt", cifar_small, "lmdb", transform, threads=3),
                        20, train=True, seed=3) == stock, transform


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_net_without_a_transform_gets_the_records_pixels_unchanged(mnist_up, tmp_path, backend):
    import caffe
    from data_prep import backends
    records = list(backends.get(backend).read(mnist_up / backend, "train", None))  # (label, pixels) in key order
    net = caffe.Net(str(data_net(tmp_path / "t3.prototxt", mnist_up, backend, transform=None, threads=3)), caffe.TRAIN)
    for k in range(FORWARDS):
        net.forward()
        for row, (data, label) in enumerate(zip(net.blobs["data"].data, net.blobs["label"].data)):
            want_label, pixels = records[(k * BATCH + row) % len(records)]
            assert label == want_label and (data == pixels).all(), (backend, k, row)


def transform_threads_alive():
    names = []
    for task in Path("/proc/self/task").iterdir():
        try:
            names.append((task / "comm").read_text().strip())
        except OSError:
            pass
    return names.count("caffe-transform")


def test_the_pool_threads_are_named_and_end_with_the_net(mnist_up, tmp_path):
    import caffe
    before = transform_threads_alive()
    net = caffe.Net(str(data_net(tmp_path / "t4.prototxt", mnist_up, "lmdb", threads=4)), caffe.TRAIN)
    net.forward()
    assert transform_threads_alive() == before + 3  # the prefetch thread is the fourth
    del net
    assert transform_threads_alive() == before


@pytest.mark.parametrize("count", [0, -1])
def test_caffe_refuses_fewer_than_one_thread_naming_the_field(mnist_up, tmp_path, count):
    import caffe
    from caffe import layers as L, params as P
    n = caffe.NetSpec()
    n.data, n.label = L.Data(source=str(mnist_up / "lmdb" / "train_lmdb"), backend=P.Data.LMDB, batch_size=8, ntop=2,
                             transform_threads=count)
    (tmp_path / "bad.prototxt").write_text(str(n.to_proto()))
    out, err = net_process(tmp_path / "bad.prototxt").communicate(timeout=120)
    assert "ready" not in out and f"data_param.transform_threads {count}: it must be at least 1" in err, err[-2000:]


def test_an_encoded_record_is_refused_naming_it(tmp_path):
    import caffe
    import cv2
    import numpy as np
    from caffe import layers as L, params as P
    from caffe.proto import caffe_pb2
    png = cv2.imencode(".png", np.full((24, 24), 7, np.uint8))[1].tobytes()
    with lmdb.open(str(tmp_path / "encoded_lmdb"), map_size=1 << 24) as env, env.begin(write=True) as txn:
        for i in range(4):
            txn.put(f"{i:08d}".encode(), caffe_pb2.Datum(data=png, encoded=True, label=i).SerializeToString())
    for threads, refused in ((1, False), (2, True)):
        n = caffe.NetSpec()
        n.data, n.label = L.Data(source=str(tmp_path / "encoded_lmdb"), backend=P.Data.LMDB, batch_size=4, ntop=2,
                                 transform_threads=threads, transform_param=dict(crop_size=20))
        (tmp_path / f"t{threads}.prototxt").write_text(str(n.to_proto()))
        out, err = net_process(tmp_path / f"t{threads}.prototxt", 2).communicate("go\n", timeout=120)
        assert ("done" not in out) == refused, err[-2000:]
        assert ("record 00000000 is an encoded image; transform_threads > 1" in err) == refused, err[-2000:]


def run_py(mnist_small, tmp_path, *args):
    return subprocess.run([sys.executable, str(ROOT / "experiments" / "run.py"), "mnist", *args,
                           "--data", str(mnist_small.parent), "--out", str(tmp_path), "--quiet"],
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("count", ["0", "-1"])
def test_run_py_refuses_fewer_than_one_thread_naming_the_flag(mnist_small, tmp_path, count):
    p = run_py(mnist_small, tmp_path, "lmdb", "warm", "--transform-threads", count)
    assert p.returncode == 2 and "--transform-threads must be at least 1" in p.stderr, p.stderr[-1000:]


def test_run_py_refuses_the_option_where_no_data_layer_reads(mnist_small, tmp_path):
    p = run_py(mnist_small, tmp_path, "images", "warm", "--transform-threads", "2")
    assert p.returncode == 2 and "--transform-threads applies to lmdb, leveldb, redis only" in p.stderr, p.stderr[-1000:]


def test_a_run_records_the_option_and_the_transform_threads_cpu(mnist_small, tmp_path):
    p = run_py(mnist_small, tmp_path, "lmdb", "warm", "--iters", "1500", "--accelerator", "h100",
               "--transform-threads", "3")
    assert p.returncode == 0, p.stderr[-2000:]
    (r,) = recorded(tmp_path, "mnist")
    assert r.ok and r.read_options == {"transform_threads": 3}
    threads = r.process["thread_cpu_seconds"]
    assert threads[proctrack.TRANSFORM] > 0 and threads[proctrack.PREFETCH] > 0, threads
    assert "transform_threads: 3" in (tmp_path / r.run_dir / "train.prototxt").read_text()


def test_the_stopper_says_the_prefetch_thread_had_transform_threads_beside_it():
    from experiments.record import Record

    def busy(read_options):
        return Record("r", "imagenet", "lmdb", "warm", au=0.3, solver_seconds=10.0, read_options=read_options,
                      process={"thread_cpu_seconds": {proctrack.PREFETCH: 9.5}}).what_limited("Data")
    assert busy({"transform_threads": 4}).endswith(
        "it reads every record and draws the crops and mirrors, and transforms its share of each batch beside "
        "3 more threads)")
    assert busy(None).endswith("one thread transforms every image)")
