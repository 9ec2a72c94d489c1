"""Before and after every run, of any backend, the runner removes the lmdb_read SHARED rings
this user's killed solvers left in /dev/shm (data_prep/backends/lmdb_store.py). The rings' names
are known to every user of the host, and /dev/shm is writable by all: a file there under this
user's ring name that another user owns, or a file of this user's that is no ring, is left as it
is; the run goes on, and says once whose file it left."""
import os
import sys
from pathlib import Path

import pytest

from conftest import ROOT, run

NOBODY = 65534


@pytest.fixture
def foreign_ring():
    """A file at one of this uid's ring names, owned by nobody, as a ring is (mode 600)."""
    from data_prep.backends import lmdb_store
    path = lmdb_store.SHM / f"{lmdb_store.RING_PREFIX}{os.getuid()}-{os.getpid()}-1-1-0.0"
    path.write_bytes(b"nobody's")
    try:
        os.chmod(path, 0o600)
        os.chown(path, NOBODY, NOBODY)
        yield path
    finally:
        path.unlink(missing_ok=True)


@pytest.fixture
def not_a_ring():
    """A file of this user's whose name starts as a ring's but is none."""
    from data_prep.backends import lmdb_store
    path = lmdb_store.SHM / f"{lmdb_store.RING_PREFIX}{os.getuid()}-{os.getpid()}-notes.txt"
    path.write_text("not a ring")
    yield path
    path.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def mnist_images(tmp_path_factory):
    """Fashion-MNIST's first 640 images as image files: a run that has nothing to do with LMDB."""
    from data_prep import build
    root = tmp_path_factory.mktemp("data")
    build.prepare("mnist", ["images"], root, limit=640, progress=False, log=lambda *_: None)
    return root


def test_a_file_another_user_owns_at_a_rings_name_is_left_and_said_once(foreign_ring, not_a_ring, capsys):
    from data_prep import backends
    from data_prep.backends import lmdb_store
    for _ in range(2):  # before and after a run
        removed = backends.get("lmdb").remove_leftovers()
        assert foreign_ring not in removed and not_a_ring not in removed
    assert foreign_ring.exists() and os.stat(foreign_ring).st_uid == NOBODY
    assert not_a_ring.read_text() == "not a ring"
    assert foreign_ring not in lmdb_store.unused_rings()
    said = [line for line in capsys.readouterr().err.splitlines() if str(foreign_ring) in line]
    assert said == [f"{foreign_ring}: left in place, not a ring of this user's: it is owned by uid {NOBODY} (nobody)"]


def test_an_unrelated_run_leaves_another_users_file_and_is_not_stopped(foreign_ring, mnist_images, tmp_path):
    p = run([sys.executable, str(ROOT / "experiments" / "run.py"), "mnist", "images", "warm", "--iters", "20",
             "--accelerator", "5ms", "--data", str(mnist_images), "--out", str(tmp_path)])
    output = p.stdout + p.stderr
    assert foreign_ring.exists() and os.stat(foreign_ring).st_uid == NOBODY
    assert f"removed {foreign_ring}" not in output
    said = [line for line in output.splitlines() if str(foreign_ring) in line]
    assert len(said) == 1 and f"owned by uid {NOBODY}" in said[0], said
    from experiments.record import load
    records = load([Path(tmp_path) / "mnist" / "records.jsonl"])
    assert len(records) == 1 and records[0].ok and records[0].iterations == 20
