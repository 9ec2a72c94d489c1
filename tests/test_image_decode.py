"""ImageData decoding on several threads (caffe/patches/0015, image_data_param.decode_threads,
run.py --decode-threads): the same images in the same order with the same random crops and
mirrors as one thread, the decoding threads' CPU counted in the record, the option refused
where no ImageData reads."""
import subprocess
import sys

import pytest

from conftest import ROOT
from experiments.record import recorded
from test_lmdb_read import sequence


TRANSFORM = dict(crop_size=20, mirror=True, scale=0.00390625)


def image_net(path, dest, batch, shuffle=True, **options):
    import caffe
    from caffe import layers as L
    n = caffe.NetSpec()
    n.data, n.label = L.ImageData(source=str(dest / "train.txt"), root_folder=str(dest) + "/", batch_size=batch,
                                  is_color=False, shuffle=shuffle, ntop=2, **options, transform_param=TRANSFORM)
    path.write_text(str(n.to_proto()))
    return path


def lmdb_net(path, dest, batch):
    import caffe
    from caffe import layers as L, params as P
    n = caffe.NetSpec()
    n.data, n.label = L.Data(source=str(dest / "train_lmdb"), backend=P.Data.LMDB, batch_size=batch, ntop=2,
                             transform_param=TRANSFORM)
    path.write_text(str(n.to_proto()))
    return path


def test_several_decoding_threads_give_the_one_threads_sequence(mnist_small, tmp_path):
    dest = mnist_small / "images"
    forwards = 640 * 5 // 2 // 48  # 2.5 passes of 640 images in batches of 48: shuffles and wrap-arounds
    one = sequence(image_net(tmp_path / "one.prototxt", dest, 48), forwards, train=True, seed=7)
    for threads in (2, 3, 7):
        assert sequence(image_net(tmp_path / f"t{threads}.prototxt", dest, 48, decode_threads=threads),
                        forwards, train=True, seed=7) == one, threads
    assert len(set(one[:640])) > 600  # random crops and mirrors: the comparison could fail


def test_every_thread_count_gives_the_stock_data_layers_crops_and_mirrors_of_the_same_images(mnist_small, tmp_path):
    """Stock Caffe's Data layer transforms a Datum with the transformer's untouched code, drawing
    its mirror and crop from a generator seeded as ImageData's is: the same images in the same
    order, as PNG files decoded and transformed on 1, 2 or 3 threads, give the same floats."""
    forwards = 640 * 3 // 2 // 48
    stock = sequence(lmdb_net(tmp_path / "lmdb.prototxt", mnist_small / "lmdb", 48), forwards, train=True, seed=11)
    for threads in (1, 2, 3):
        assert sequence(image_net(tmp_path / f"t{threads}.prototxt", mnist_small / "images", 48, shuffle=False,
                                  decode_threads=threads), forwards, train=True, seed=11) == stock, threads
    assert len(set(stock[:640])) > 600


def test_a_run_records_the_option_and_the_decoding_threads_cpu(mnist_small, tmp_path):
    subprocess.run([sys.executable, str(ROOT / "experiments" / "run.py"), "mnist", "images", "warm", "--iters", "400",
                    "--accelerator", "h100", "--decode-threads", "2", "--data", str(mnist_small.parent),
                    "--out", str(tmp_path), "--quiet"], check=True, capture_output=True)
    (r,) = recorded(tmp_path, "mnist")
    assert r.ok and r.read_options == {"decode_threads": 2}
    threads = r.process["thread_cpu_seconds"]
    assert threads["image decode"] > 0 and threads["data prefetch"] > 0
    assert "decode_threads: 2" in (tmp_path / r.run_dir / "train.prototxt").read_text()


@pytest.mark.parametrize("backend", ["lmdb", "hdf5"])
def test_the_option_is_refused_where_no_imagedata_reads(mnist_small, tmp_path, backend):
    p = subprocess.run([sys.executable, str(ROOT / "experiments" / "run.py"), "mnist", backend, "warm",
                        "--decode-threads", "2", "--data", str(mnist_small.parent), "--out", str(tmp_path)],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "--decode-threads applies to images" in p.stderr, p.stderr[-1000:]
