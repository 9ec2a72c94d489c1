"""benchmarks/peers.py: every loader reads the same bytes and makes the same batches as
Caffe's Data layer (each row's first batch with the test phase's transform compared float for
float, ImageNet's centre crop included), every cell's cache state is measured when its clock
starts (warm >= 95%, cold <= 5% resident, else the cell is kept with the miss and left out of
the tables), and a cell that fails is kept with its error. Caffe's rows run everywhere; DALI's
and PyTorch's only where `make peers` installed them."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

PEERS = ROOT / ".venv-peers" / "bin" / "python"
needs_peers = pytest.mark.skipif(not PEERS.exists(), reason="make peers installs DALI and PyTorch (.venv-peers)")


def own_tmp(tmp_path):
    """An environment whose TMPDIR is a fresh folder: what a run leaves there is seen."""
    (tmp_path / "tmp").mkdir()
    return dict(os.environ, TMPDIR=str(tmp_path / "tmp"))


def peers(data_root, tmp_path, *args, expect=0, env=None):
    """benchmarks/peers.py on data_root, one round; its record and its printed tables."""
    out = tmp_path / "peers.json"
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "peers.py"), "--rounds", "1", "--min-seconds", "0.3",
                        "--data", str(data_root), "--json", str(out), *args],
                       capture_output=True, text=True, timeout=600, env=env or own_tmp(tmp_path))
    assert p.returncode == expect, p.stdout[-3000:] + p.stderr[-3000:]
    assert not list((tmp_path / "tmp").iterdir()), "the run left its scratch files"
    return json.loads(out.read_text()), p.stdout


def row(cell):
    return cell["loader"], cell["form"], cell["threads"]


@pytest.fixture(scope="module")
def mnist_full(tmp_path_factory):
    """Fashion-MNIST's first 16,000 train images as LMDB and PNG files: what the first batches
    of a cold cell keep mapped (Caffe's prefetch: 5 batches) is a small part of the LMDB."""
    from data_prep import build
    root = tmp_path_factory.mktemp("peers-data")
    build.prepare("mnist", ["lmdb", "images"], root, limit=16000, progress=False, log=lambda *_: None)
    return root


@pytest.fixture(scope="module")
def imagenet_small(tmp_path_factory):
    """The ImageNet stand-in (256 px, crop 227 and mirror in training), 64 train images."""
    from data_prep import build
    root = tmp_path_factory.mktemp("peers-imagenet")
    build.prepare("imagenet", ["lmdb", "images"], root, count=64, progress=False, log=lambda *_: None)
    return root


def test_the_cache_thresholds():
    import importlib.util
    spec = importlib.util.spec_from_file_location("peers_benchmark", ROOT / "benchmarks" / "peers.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.cache_condition("warm", 0.95) is None and bench.cache_condition("cold", 0.05) is None
    assert bench.cache_condition("cold", 1.0) == "not cold: 100% resident at the clock (needs <= 5%)"
    assert bench.cache_condition("warm", 0.9, "after read").startswith("not warm: 90% resident after read")
    assert bench.cache_condition("cold", None).startswith("not checked cold")


def test_caffes_rows_checked_warm_and_cold_when_their_clock_starts(mnist_small, cifar_small, tmp_path):
    """Warm cells are kept with their residency at the clock; a small LMDB cannot be cold at the
    clock (the first batches' pages stay mapped: more than 5% of a 640-record file), so its
    cold cells are kept with the miss, out of the table, and the run exits 1."""
    found, table = peers(mnist_small.parent, tmp_path, "--datasets", "mnist,cifar10", "--images", "128",
                         "--loaders", "caffe", "--threads", "1", "--caches", "warm,cold", expect=1)
    cells = found["cells"]
    assert {(c["dataset"], *row(c), c["cache"]) for c in cells} == {
        (d, "caffe", f, 1, s) for d in ("mnist", "cifar10") for f in ("lmdb", "lmdb-coalesced", "images")
        for s in ("warm", "cold")}
    warm = [c for c in cells if c["cache"] == "warm"]
    for c in warm:  # another session's drop_caches can empty the cache under a warm cell: it is marked
        if "error" in c:
            assert c["error"].startswith("not warm: "), c
        else:
            assert c["resident_at_clock"] >= 0.95 and c["images"] > 0, c
    assert sum("error" not in c for c in warm) >= len(warm) - 1, warm
    assert all(c["resident_at_clock"] is not None for c in cells if c["cache"] == "cold")
    missed = [c for c in cells if c["cache"] == "cold" and c["form"].startswith("lmdb")]
    for c in missed:
        assert c["resident_at_clock"] > 0.05 and c["error"].startswith("not cold: ") and \
            c["error"].endswith("resident at the clock (needs <= 5%)"), c
        assert f"failed: {c['dataset']} cold caffe lmdb" in table
    assert "| caffe lmdb (1 prefetch thread) |" in table and \
        "| left out (1) | left out (1) |\n" in table.split("| caffe lmdb (1 prefetch thread) |")[1]
    # PNG decoded by OpenCV and the Datum's bytes, both through the transform (CIFAR-10: the
    # mean subtracted): the same floats
    for name in ("mnist", "cifar10"):
        assert list(found["first_batch_max_difference"][name].values()) == [0.0] * 3, name


@needs_peers
def test_every_loader_is_cold_when_its_clock_starts(mnist_full, tmp_path):
    """The DataLoader's LMDB keys are listed before the cache is dropped (listing them read all
    of MNIST's data.mdb: 100% resident at the clock), and every loader's cold cell has at most
    5% of its data resident when its clock starts; the first batches are the same floats."""
    found, _ = peers(mnist_full, tmp_path, "--datasets", "mnist", "--images", "6400", "--threads", "1",
                     "--forms", "lmdb,images", "--caches", "cold")
    cells = found["cells"]
    assert {row(c) for c in cells} == {("caffe", "lmdb", 1), ("caffe", "images", 1), ("dali", "lmdb", 1),
                                       ("dali", "images", 1), ("torch", "lmdb", 0), ("torch", "lmdb", 1),
                                       ("torch", "images", 0), ("torch", "images", 1)}
    for c in cells:
        assert "error" not in c and c["resident_before"] <= 0.05 and c["resident_at_clock"] <= 0.05, c
        assert c["images"] == 6400 - 64 and c["seconds"] > 0, c
    assert set(found["first_batch_max_difference"]["mnist"].values()) == {0.0}
    assert len(found["first_batch_max_difference"]["mnist"]) == len(cells)


@needs_peers
def test_imagenets_first_batch_is_compared_with_the_centre_crop(imagenet_small, tmp_path):
    """ImageNet's training transform crops at random places and mirrors: each row's first
    batch is compared with the test phase's (centre crop, no mirror), and equals Caffe's."""
    found, table = peers(imagenet_small, tmp_path, "--datasets", "imagenet", "--threads", "1",
                         "--forms", "lmdb,images", "--checks-only")
    diffs = found["first_batch_max_difference"]["imagenet"]
    assert len(diffs) == 8 and set(diffs.values()) == {0.0}, diffs
    checks = found["first_batch_checks"]
    assert {c["phase"] for c in checks} == {"test"} and all(c["batch"] == 64 and c["images"] == 0 for c in checks)
    assert found["cells"] == [] and "max |difference| 0 over 8 rows" in table


def test_caffe_lmdb_has_a_row_per_transform_thread_count_with_the_same_first_batch(imagenet_small, tmp_path):
    """Caffe's LMDB row at 1..cores transform threads (patch 0016) beside the peers' thread counts:
    a row per count, each one's first batch equal to one thread's, float for float."""
    found, table = peers(imagenet_small, tmp_path, "--datasets", "imagenet", "--loaders", "caffe",
                         "--forms", "lmdb", "--threads", "3", "--checks-only")
    diffs = found["first_batch_max_difference"]["imagenet"]
    assert sorted(diffs) == ["caffe lmdb (1 prefetch thread)", "caffe lmdb (2 transform threads)",
                             "caffe lmdb (3 transform threads)"], diffs
    assert set(diffs.values()) == {0.0}, diffs
    import importlib.util
    spec = importlib.util.spec_from_file_location("peers_benchmark", ROOT / "benchmarks" / "peers.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.caffe_read_options("lmdb", 3) == {"transform_threads": 3}  # what the row's net is given
    assert bench.caffe_read_options("lmdb", 1) is None and bench.caffe_read_options("images", 2) == {"decode_threads": 2}


def test_a_row_with_nothing_to_compare_is_not_kept(mnist_small, tmp_path):
    """Without Caffe LMDB's first batch (its data.mdb gone) no row can be compared: each is
    refused with that reason, nothing is tabled, and the run exits 1."""
    data = tmp_path / "data"
    shutil.copytree(mnist_small, data / "mnist")
    (data / "mnist" / "lmdb" / "train_lmdb" / "data.mdb").unlink()
    found, table = peers(data, tmp_path, "--datasets", "mnist", "--loaders", "caffe", "--forms", "images",
                         "--threads", "1", "--images", "128", "--caches", "warm", expect=1)
    [cell] = found["cells"]
    assert cell["error"].startswith("first batch not compared: no reference (caffe lmdb's check"), cell
    assert "images" not in cell
    assert found["first_batch_max_difference"]["mnist"] == {}
    assert "first batch NOT compared" in table


def test_a_failing_cell_is_kept_with_its_error(mnist_small, tmp_path):
    """A PNG that is not one: ImageData's row fails (its first-batch check first), the others
    still run, the run exits 1."""
    data = tmp_path / "data"
    shutil.copytree(mnist_small, data / "mnist")
    first = (data / "mnist" / "images" / "train.txt").read_text().split()[0]
    (data / "mnist" / "images" / first).write_bytes(b"not a PNG")
    found, table = peers(data, tmp_path, "--datasets", "mnist", "--loaders", "caffe", "--caches", "warm",
                         "--images", "128", "--threads", "1", "--min-seconds", "0", expect=1)
    cells = {c["form"]: c for c in found["cells"]}
    lmdb = cells["lmdb"]  # kept, or marked where another session's drop_caches emptied the cache
    assert lmdb["error"].startswith("not warm: ") if "error" in lmdb else lmdb["images"] > 0, lmdb
    assert first.split("/")[-1] in cells["images"]["error"] or "Could not open" in cells["images"]["error"], \
        cells["images"]["error"]
    assert "failed: mnist warm caffe images" in table


def test_an_unknown_loader_is_refused_by_name():
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "peers.py"), "--loaders", "caffe,keras"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "unknown loader keras" in p.stderr


def test_peer_loaders_without_their_environment_are_refused_clearly(tmp_path):
    """No peers' environment (IMGSTORE_PEERS_VENV names a folder without one): DALI's and the
    DataLoader's rows are refused before anything runs, naming the missing interpreter."""
    absent = tmp_path / "no-venv"
    env = dict(os.environ, IMGSTORE_PEERS_VENV=str(absent))
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "peers.py"), "--loaders", "caffe,torch",
                        "--datasets", "mnist", "--data", str(tmp_path / "nowhere" / "data")],
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 2, p.stderr[-2000:]
    assert f"{absent}/bin/python is missing: `make peers` installs DALI and PyTorch there" in p.stderr
