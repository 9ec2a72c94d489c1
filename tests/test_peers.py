"""benchmarks/peers.py: every loader reads the same bytes and makes the same batches as
Caffe's Data layer (the first batch compared float for float where the transform has no
randomness), cold cells are verified cold, and a cell that fails is kept with its error.
Caffe's rows run everywhere; DALI's and PyTorch's only where `make peers` installed them."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

PEERS = ROOT / ".venv-peers" / "bin" / "python"


def own_tmp(tmp_path):
    """An environment whose TMPDIR is a fresh folder: what a run leaves there is seen."""
    (tmp_path / "tmp").mkdir()
    return dict(os.environ, TMPDIR=str(tmp_path / "tmp"))


def compare(data_root, tmp_path, *args):
    out = tmp_path / "peers.json"
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "peers.py"), "--datasets", "mnist,cifar10",
                        "--rounds", "1", "--images", "400", "--min-seconds", "0.3", "--data", str(data_root),
                        "--json", str(out), *args], capture_output=True, text=True, timeout=900, env=own_tmp(tmp_path))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert not list((tmp_path / "tmp").iterdir()), "the run left its scratch files"
    return json.loads(out.read_text()), p.stdout


def test_caffes_rows_make_the_same_first_batch_from_lmdb_and_png(mnist_small, cifar_small, tmp_path):
    found, table = compare(mnist_small.parent, tmp_path, "--loaders", "caffe", "--caches", "warm,cold")
    cells = found["cells"]
    assert {(c["dataset"], c["form"], c["threads"], c["cache"]) for c in cells} == {
        (d, f, t, s) for d in ("mnist", "cifar10")
        for f, t in (("lmdb", 1), ("lmdb-coalesced", 1), ("images", 1), ("images", 2))
        for s in ("warm", "cold")}
    for c in cells:  # a cold cell of 400 images is over in milliseconds: its CPU may round to 0 ticks
        assert c["images"] > 0 and c["seconds"] > 0 and (c["cpu_seconds"] > 0 or c["cache"] == "cold"), c
    assert all(c["resident_before"] <= 0.01 for c in cells if c["cache"] == "cold")
    assert all(c["resident_before"] > 0.99 for c in cells if c["cache"] == "warm")
    # PNG decoded by OpenCV and the Datum's bytes, both through the transform (CIFAR-10: the
    # mean subtracted): the same floats
    for name in ("mnist", "cifar10"):
        assert set(found["first_batch_max_difference"][name].values()) == {0.0}, name
    assert "caffe images (2 threads)" in table


@pytest.mark.skipif(not PEERS.exists(), reason="make peers installs DALI and PyTorch (.venv-peers)")
def test_dali_and_the_dataloader_make_caffes_first_batch(mnist_small, cifar_small, tmp_path):
    found, _ = compare(mnist_small.parent, tmp_path, "--caches", "warm", "--threads", "1")
    loaders = {(c["loader"], c["form"], c["threads"]) for c in found["cells"]}
    assert {("dali", "lmdb", 1), ("dali", "images", 1), ("torch", "lmdb", 0), ("torch", "images", 1)} <= loaders
    for name in ("mnist", "cifar10"):
        diffs = found["first_batch_max_difference"][name]
        assert len(diffs) == len(loaders) and set(diffs.values()) == {0.0}, diffs
    versions = [c["versions"] for c in found["cells"] if c["loader"] == "dali"]
    assert versions[0]["dali"] and versions[0]["numpy"]


def test_a_failing_cell_is_kept_with_its_error(mnist_small, tmp_path):
    """A PNG that is not one: ImageData's cell fails, the others still run, the run exits 1."""
    import shutil
    data = tmp_path / "data"
    shutil.copytree(mnist_small, data / "mnist")
    first = (data / "mnist" / "images" / "train.txt").read_text().split()[0]
    (data / "mnist" / "images" / first).write_bytes(b"not a PNG")
    out = tmp_path / "peers.json"
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "peers.py"), "--datasets", "mnist", "--loaders",
                        "caffe", "--caches", "warm", "--rounds", "1", "--images", "128", "--threads", "1",
                        "--min-seconds", "0", "--data", str(data), "--json", str(out)],
                       capture_output=True, text=True, timeout=600, env=own_tmp(tmp_path))
    assert p.returncode == 1, p.stderr[-2000:]
    assert not list((tmp_path / "tmp").iterdir()), "the failed run left its scratch files"
    cells = {c["form"]: c for c in json.loads(out.read_text())["cells"]}
    assert "error" not in cells["lmdb"] and cells["lmdb"]["images"] > 0
    assert first.split("/")[-1] in cells["images"]["error"] or "Could not open" in cells["images"]["error"], \
        cells["images"]["error"]
    assert "failed: mnist warm caffe images" in p.stdout


def test_peer_loaders_without_their_environment_are_refused_clearly(tmp_path):
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "peers.py"), "--loaders", "caffe,keras"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "unknown loader keras" in p.stderr
