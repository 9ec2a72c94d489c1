"""What a run says when something goes wrong after its solvers started: a measurement that fails
after training is recorded as that error (the record is never lost), and the exit status tells a
script that a solver failed."""
import shutil

from data_prep import backends, locations
from data_prep.backends import lmdb_store
from experiments import run
from experiments.record import recorded


class GoneAfterTraining(locations.LocalFolder):
    """A local folder whose description fails once the training is over, as a server that went
    away, or a command the user may not send (INFO on a least-privilege ACL), would."""
    name = "local-gone-after-training"

    def describe(self):
        raise ConnectionError("the server went away")


class LMDBGoneAfterTraining(lmdb_store.LMDBBackend):
    name, label = "lmdb-gone", "LMDB, its location gone after training"
    location = GoneAfterTraining.name

    def paths(self, dest, phase):
        return [dest / f"{phase}_lmdb"]


def test_a_measurement_failing_after_training_keeps_the_record_with_its_error(mnist_small, tmp_path, monkeypatch,
                                                                              capsys):
    monkeypatch.setitem(locations.REGISTRY, GoneAfterTraining.name, GoneAfterTraining)
    monkeypatch.setitem(backends.REGISTRY, LMDBGoneAfterTraining.name, LMDBGoneAfterTraining())
    data, out = tmp_path / "data", tmp_path / "out"
    shutil.copytree(mnist_small / "lmdb", data / "mnist" / LMDBGoneAfterTraining.name)
    rc = run.main(["mnist", LMDBGoneAfterTraining.name, "warm", "--iters", "20", "--accelerator", "1ms", "--quiet",
                   "--data", str(data), "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    [r] = recorded(out, "mnist")
    assert r.ok and r.iterations == 20 and r.au is not None  # what was measured is kept
    assert r.location is None and r.measurement_errors == {"location": "ConnectionError: the server went away"}
    assert "location not measured after training: ConnectionError" in capsys.readouterr().err


def test_failed_solvers_give_a_nonzero_exit_that_says_how_many(mnist_small, tmp_path, capsys):
    """A solver that cannot read its data fails (recorded as failed); run.py says so and exits 1."""
    data, out = tmp_path / "data", tmp_path / "out"
    shutil.copytree(mnist_small / "lmdb", data / "mnist" / "lmdb")
    mdb = data / "mnist" / "lmdb" / "train_lmdb" / "data.mdb"
    mdb.write_bytes(mdb.read_bytes()[: mdb.stat().st_size // 2])  # the last pages gone: Caffe stops at open
    rc = run.main(["mnist", "lmdb", "warm", "--iters", "20", "--accelerator", "1ms", "--quiet",
                   "--data", str(data), "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == run.SOLVERS_FAILED == 1, err
    [r] = recorded(out, "mnist")
    assert r.status == "failed"
    assert "error: 1 of 1 solvers failed (lmdb warm)" in err
