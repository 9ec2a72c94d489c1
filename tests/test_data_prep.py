"""data_prep: artifacts equal to what Caffe's own tools write, identical input through
Caffe's own layers whatever the backend, and clear errors on bad input."""
import gzip
import os
import shutil
import subprocess

import numpy as np
import pytest

from conftest import ROOT, caffe_tool, local_backends, run
from data_prep import backends, build
from data_prep.backends import datum
from data_prep.backends.lmdb_store import raw_items
from data_prep import datasets
from data_prep.datasets.mnist import FASHION_MNIST_DIR
from data_prep.errors import SourceError

ALL = local_backends()  # the registry's, reference (lmdb) first


def lmdb_items(path):
    return list(raw_items(path))


def small_idx_folder(folder, n):
    """The first n Fashion-MNIST records as plain (uncompressed) IDX files."""
    folder.mkdir()
    for stem in ["train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                 "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]:
        raw = gzip.open(FASHION_MNIST_DIR / f"{stem}.gz").read()
        header = 16 if "images" in stem else 8
        rec = 784 if "images" in stem else 1
        head = bytearray(raw[:header])
        head[4:8] = n.to_bytes(4, "big")
        (folder / stem).write_bytes(bytes(head) + raw[header:header + n * rec])
    return folder


def test_lmdb_records_are_byte_identical_to_convert_mnist_data(tmp_path):
    src = small_idx_folder(tmp_path / "idx", 300)
    build.prepare("mnist", ["lmdb"], tmp_path / "ours", source_path=src, progress=False, log=lambda *_: None)
    run([caffe_tool("convert_mnist_data"), str(src / "train-images-idx3-ubyte"),
         str(src / "train-labels-idx1-ubyte"), str(tmp_path / "caffe_lmdb"), "--backend=lmdb"])
    theirs = lmdb_items(tmp_path / "caffe_lmdb")
    ours = lmdb_items(tmp_path / "ours" / "mnist" / "lmdb" / "train_lmdb")
    assert len(theirs) == 300
    assert ours == theirs  # same keys, same serialised Datum bytes, same order


def test_png_files_decode_in_caffe_to_the_same_datums(cifar_small, tmp_path):
    """convert_imageset (OpenCV decode, as ImageData) of our PNGs == our LMDB Datums."""
    img = cifar_small / "images"
    run([caffe_tool("convert_imageset"), str(img) + "/", str(img / "train.txt"), str(tmp_path / "conv")])
    theirs = [datum.decode(v) for _, v in lmdb_items(tmp_path / "conv")]
    ours = [datum.decode(v) for _, v in lmdb_items(cifar_small / "lmdb" / "train_lmdb")]
    assert len(theirs) == len(ours) == 400
    for (l1, p1), (l2, p2) in zip(theirs, ours):
        assert l1 == l2 and np.array_equal(p1, p2)


def test_mean_binaryproto_is_byte_identical_to_compute_image_mean(cifar_small, tmp_path):
    run([caffe_tool("compute_image_mean"), str(cifar_small / "lmdb" / "train_lmdb"), str(tmp_path / "m")])
    assert (tmp_path / "m").read_bytes() == (cifar_small / "mean.binaryproto").read_bytes()


def test_mean_of_its_own_pass_equals_the_mean_summed_while_writing(cifar_small, tmp_path):
    """HDF5 alone needs the mean before it starts: a pass of its own, not a raw backend's."""
    build.prepare("cifar10", ["hdf5"], tmp_path, count=400, jobs=2, progress=True, log=lambda *_: None)
    assert (tmp_path / "cifar10" / "mean.binaryproto").read_bytes() == (cifar_small / "mean.binaryproto").read_bytes()


@pytest.mark.parametrize("dataset", ["mnist", "cifar10"])
def test_verify_passes_for_every_backend(dataset, mnist_small, cifar_small):
    root = mnist_small.parent
    assert build.verify(dataset, ALL, root, progress=False, log=lambda *_: None) == []


def test_verify_catches_a_changed_record(mnist_small, tmp_path):
    copy = tmp_path / "mnist"
    shutil.copytree(mnist_small / "cppmem", copy / "cppmem")
    f = copy / "cppmem" / "train.f32"
    raw = bytearray(f.read_bytes())
    raw[24 + 4 * 1000] ^= 0x40  # flip a bit in a pixel of record 1
    f.write_bytes(bytes(raw))
    failures = build.verify("mnist", ["cppmem"], tmp_path, progress=False, log=lambda *_: None)
    assert failures and "record 1" in failures[0]


def first_batch(dataset_dir, backend_name, dataset):
    """The data and label blobs of one TEST forward pass through Caffe's own data layer."""
    import caffe
    from models.nets import net_proto
    caffe.set_mode_cpu()
    ds = datasets.get(dataset)
    model = ds.model
    backend = backends.get(backend_name)
    dest = dataset_dir / backend_name
    layer = backend.data_layer(dest, ds, dataset_dir / "mean.binaryproto")
    path = dest.parent / f"one_batch_{backend_name}.prototxt"
    path.write_text(str(net_proto(model, layer, caffe.TEST, batch=50)))
    net = caffe.Net(str(path), caffe.TEST)
    if backend.layer == "MemoryData":
        mean = build.read_mean(dataset_dir / "mean.binaryproto") if model.transform.mean_file else None
        ctx = build.context(dataset, dest, mean)
        data = np.stack([x for _, x in backend.read(dest, "test", ctx)][:50])
        labels = np.array([y for y, _ in backend.read(dest, "test", ctx)][:50], np.float32)
        net.set_input_arrays(np.ascontiguousarray(data), labels)
    net.forward()
    return net.blobs["data"].data.copy(), net.blobs["label"].data.ravel().copy()


@pytest.mark.parametrize("dataset", ["mnist", "cifar10"])
def test_every_backend_feeds_caffe_identical_input_blobs(dataset, mnist_small, cifar_small):
    root = mnist_small.parent / dataset
    ref_data, ref_label = first_batch(root, "lmdb", dataset)
    assert ref_data.std() > 0.05  # real images, not zeros
    for name in ALL[1:]:
        data, label = first_batch(root, name, dataset)
        np.testing.assert_array_equal(label, ref_label, err_msg=name)
        np.testing.assert_array_equal(data, ref_data, err_msg=name)


# --- bad input ------------------------------------------------------------------------

def expect_error(tmp_path, dataset, source, match, **kw):
    out = tmp_path / "out"
    with pytest.raises(SourceError, match=match):
        build.prepare(dataset, ["lmdb"], out, source_path=source, progress=False, log=lambda *_: None, **kw)
    leftovers = [p for p in out.rglob("*") if p.name not in (".lock", dataset)] if out.exists() else []
    assert leftovers == [], "a failed prepare left files behind"


def test_truncated_idx_is_refused(tmp_path):
    src = small_idx_folder(tmp_path / "idx", 50)
    f = src / "train-images-idx3-ubyte"
    f.write_bytes(f.read_bytes()[:-100])
    expect_error(tmp_path, "mnist", src, "train-images-idx3-ubyte: truncated")


def test_wrong_idx_magic_is_refused(tmp_path):
    src = small_idx_folder(tmp_path / "idx", 50)
    f = src / "t10k-labels-idx1-ubyte"
    f.write_bytes(b"\x00\x00\x08\x03" + f.read_bytes()[4:])
    expect_error(tmp_path, "mnist", src, "t10k-labels-idx1-ubyte: wrong IDX magic")


def cifar_batches(src, **replace):
    """Six CIFAR-10 binary batches of two black images each, some replaced by the given bytes."""
    src.mkdir()
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        (src / f"{name}.bin").write_bytes(replace.get(name, bytes(3073 * 2)))
    return src


def test_cifar_batch_of_bad_size_is_refused(tmp_path):
    src = cifar_batches(tmp_path / "cifar", data_batch_3=bytes(3073 * 2 + 5))
    expect_error(tmp_path, "cifar10", src, "data_batch_3.bin: 6151 bytes is not a multiple of the 3073")


def test_cifar_label_out_of_range_is_refused(tmp_path):
    src = cifar_batches(tmp_path / "cifar", test_batch=bytes(3073) + b"\x0c" + bytes(3072))
    expect_error(tmp_path, "cifar10", src, "test_batch.bin: record 1: label 12 out of range")


def imagenet_tree(root, corrupt=False, empty_class=False):
    from PIL import Image
    for c in ["n01", "n02"]:
        (root / "train" / c).mkdir(parents=True)
        if empty_class and c == "n02":
            continue
        for i in range(3):
            Image.new("RGB", (300, 200), (i * 40, 100, 50)).save(root / "train" / c / f"{c}_{i}.JPEG", "JPEG")
    (root / "val").mkdir()
    Image.new("RGB", (256, 256)).save(root / "val" / "v0.JPEG", "JPEG")
    (root / "val.txt").write_text("v0.JPEG 1\n")
    if corrupt:
        (root / "train" / "n01" / "n01_1.JPEG").write_bytes(b"not an image at all")
    return root


def test_real_imagenet_tree_is_converted(tmp_path):
    src = imagenet_tree(tmp_path / "tree")
    build.prepare("imagenet", ["lmdb", "images"], tmp_path / "out", source_path=src, progress=False,
                  log=lambda *_: None)
    keys = [k for k, _ in lmdb_items(tmp_path / "out" / "imagenet" / "lmdb" / "train_lmdb")]
    assert keys[0] == b"00000000_n01/n01_0.JPEG" and len(keys) == 6  # convert_imageset's keys
    assert build.verify("imagenet", ["lmdb", "images"], tmp_path / "out", src, progress=False,
                        log=lambda *_: None) == []


def textured_jpeg_tree(root, per_class=150):
    """JPEGs of several sizes with fine texture, where any other resize would differ."""
    from PIL import Image
    rng = np.random.default_rng(0)
    for c in ["n01", "n02"]:
        (root / "train" / c).mkdir(parents=True)
        for i in range(per_class):
            h, w = [(300, 200), (180, 333), (256, 256)][i % 3]
            pixels = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / "train" / c / f"{c}_{i}.JPEG", "JPEG", quality=90)
    (root / "val").mkdir()
    Image.fromarray(rng.integers(0, 256, (200, 300, 3), dtype=np.uint8)).save(root / "val" / "v0.JPEG")
    (root / "val.txt").write_text("v0.JPEG 1\n")
    return root


@pytest.mark.parametrize("jobs", [1, 2])
def test_resized_jpegs_are_byte_identical_to_convert_imageset(tmp_path, jobs):
    """Decode + resize to 256x256 exactly as convert_imageset does it, serially and in parallel."""
    src = textured_jpeg_tree(tmp_path / "tree")
    build.prepare("imagenet", ["lmdb"], tmp_path / "out", source_path=src, jobs=jobs, progress=False,
                  log=lambda *_: None)
    listing = tmp_path / "train.txt"
    listing.write_text("".join(f"{c}/{f.name} {k}\n" for k, c in enumerate(["n01", "n02"])
                               for f in sorted((src / "train" / c).iterdir())))
    run([caffe_tool("convert_imageset"), str(src / "train") + "/", str(listing), str(tmp_path / "conv"),
         "--resize_height=256", "--resize_width=256"])
    theirs = lmdb_items(tmp_path / "conv")
    ours = lmdb_items(tmp_path / "out" / "imagenet" / "lmdb" / "train_lmdb")
    assert len(ours) == 300
    assert ours == theirs


def test_parallel_conversion_writes_the_same_bytes_as_serial(tmp_path):
    import h5py
    import plyvel
    src = small_idx_folder(tmp_path / "idx", 600)
    for jobs in (1, 2):
        build.prepare("mnist", ["leveldb", "hdf5"], tmp_path / f"j{jobs}", source_path=src, jobs=jobs,
                      progress=False, log=lambda *_: None)
    h5 = [sorted((tmp_path / f"j{j}" / "mnist" / "hdf5").rglob("*.h5")) for j in (1, 2)]
    assert len(h5[0]) == len(h5[1]) >= 2
    for fa, fb in zip(*h5):
        with h5py.File(fa) as x, h5py.File(fb) as y:
            assert np.array_equal(x["data"][:], y["data"][:]) and np.array_equal(x["label"][:], y["label"][:])
    records = [list(plyvel.DB(str(tmp_path / f"j{j}" / "mnist" / "leveldb" / "train_leveldb"))) for j in (1, 2)]
    assert records[0] == records[1] and len(records[0]) == 600


def test_leveldb_is_left_as_caffe_will_find_it(tmp_path):
    """No records waiting in the write-ahead log: Caffe's first open would turn them into a
    table (writing during a timed run) and the footprint would count them twice."""
    import plyvel
    build.prepare("mnist", ["leveldb"], tmp_path, source_path=small_idx_folder(tmp_path / "idx", 300),
                  progress=False, log=lambda *_: None)
    art = tmp_path / "mnist" / "leveldb"
    assert [f.stat().st_size for f in art.rglob("*.log")] == [0, 0]
    manifest = build.load_manifest(tmp_path / "mnist", "leveldb")
    plyvel.DB(str(art / "train_leveldb")).close()
    reopened = backends.get("leveldb").footprint(art, "train")
    recorded = manifest.splits["train"].footprint
    assert abs(reopened["apparent_bytes"] - recorded["apparent_bytes"]) < 1024  # LevelDB's info LOG grows


def test_corrupt_image_in_tree_is_named(tmp_path):
    expect_error(tmp_path, "imagenet", imagenet_tree(tmp_path / "tree", corrupt=True),
                 r"n01_1.JPEG: not a readable image")


def test_empty_class_folder_is_refused(tmp_path):
    expect_error(tmp_path, "imagenet", imagenet_tree(tmp_path / "tree", empty_class=True),
                 "n02: empty class folder")


def test_missing_output_parent_is_refused(tmp_path):
    with pytest.raises(SourceError, match="parent folder .* does not exist"):
        build.prepare("mnist", ["lmdb"], tmp_path / "no" / "such", limit=10, progress=False)


def test_a_killed_run_leaves_nothing_that_looks_finished(tmp_path):
    """kill -9 in the middle of writing: no artifact, and the next run starts clean."""
    script = ("from data_prep import build\n"
              "build.prepare('cifar10', ['images'], %r, count=20000, jobs=1, progress=False)\n"
              % (str(tmp_path),))
    p = subprocess.Popen([str(ROOT / ".venv" / "bin" / "python"), "-c", script])
    partial = tmp_path / "cifar10" / ".images.partial" / "train"
    for _ in range(600):
        if partial.exists() and len(os.listdir(partial)) > 200:
            break
        p.poll()
        assert p.returncode is None, "the writer ended before it could be killed"
        import time
        time.sleep(0.05)
    p.kill()
    p.wait(timeout=10)
    assert not (tmp_path / "cifar10" / "images").exists()
    build.prepare("cifar10", ["images"], tmp_path, count=300, progress=False, log=lambda *_: None)
    assert not (tmp_path / "cifar10" / ".images.partial").exists()
    assert build.verify("cifar10", ["images"], tmp_path, progress=False, log=lambda *_: None) == []


def test_a_full_disk_fails_clearly_and_keeps_nothing(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)]).returncode:
        pytest.skip("needs root to mount a 2 MB tmpfs")
    try:
        with pytest.raises(SourceError, match="disk full while writing cppmem"):
            build.prepare("mnist", ["cppmem"], mnt / "out", limit=2000, progress=False, log=lambda *_: None)
        assert not (mnt / "out" / "mnist" / "cppmem").exists()
        assert not (mnt / "out" / "mnist" / ".cppmem.partial").exists()
    finally:
        subprocess.run(["umount", str(mnt)])


def test_footprint_counts_files_and_bytes(mnist_small):
    m = build.load_manifest(mnist_small, "images")
    assert m.footprint["files"] == 640 + 640 + 2  # PNGs of both splits + two list files
    assert m.footprint["allocated_bytes"] >= m.footprint["apparent_bytes"]
    m = build.load_manifest(mnist_small, "cppmem")
    assert m.footprint["apparent_bytes"] == 2 * 24 + (640 + 640) * (784 * 4 + 4)


def test_prepare_writes_local_backends_on_a_python_without_redis_py(tmp_path):
    """A lent GPU machine's Python has no redis-py: prepare.py still writes LMDB there (it once
    imported redis at the top and stopped before doing anything)."""
    script = ("import runpy, sys; sys.modules['redis'] = None; "  # any `import redis` fails
              f"sys.argv = ['prepare.py', 'mnist', 'lmdb', '--limit', '64', '--out', {str(tmp_path)!r}, '--quiet']; "
              "runpy.run_path('data_prep/prepare.py', run_name='__main__')")
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c", script], cwd=ROOT, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "mnist" / "lmdb").is_dir()
