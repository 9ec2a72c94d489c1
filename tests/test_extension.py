"""Extending the tool touches one module: a backend declares its reader's options as data,
and the command line, the plan, the net files and the record all follow from it."""
import shutil

from data_prep import backends, locations
from data_prep.backends import lmdb_store
from data_prep.options import Option
from experiments import run
from experiments.record import recorded


class AheadLMDB(lmdb_store.LMDBBackend):
    """A throw-away backend: LMDB read with Caffe's stock DataParameter.prefetch, an option no
    registered backend declares."""
    name, label = "lmdb-ahead", "LMDB, batches ahead"
    options = (Option("prefetch", "batches the prefetch thread keeps ready (Caffe's default 4)", minimum=1),)

    def paths(self, dest, phase):
        return [dest / f"{phase}_lmdb"]  # the LMDB backend's own files, copied


def test_a_backend_with_its_own_read_option_needs_no_other_module(mnist_small, tmp_path, monkeypatch):
    monkeypatch.setitem(backends.REGISTRY, AheadLMDB.name, AheadLMDB())
    help_text = " ".join(run.parser().format_help().split())  # as words, however the lines wrap
    assert "--prefetch N" in help_text and "(applies to lmdb-ahead)" in help_text
    assert ("lmdb-ahead", "warm", 0) in run.plan("mnist", "all", "warm", 1)

    data, out = tmp_path / "data", tmp_path / "out"
    shutil.copytree(mnist_small / "lmdb", data / "mnist" / AheadLMDB.name)
    args = ["mnist", AheadLMDB.name, "warm", "--iters", "20", "--accelerator", "1ms", "--quiet",
            "--data", str(data), "--out", str(out)]
    assert run.main(args + ["--prefetch", "0"]) == 2  # checked where it is declared
    assert run.main(args + ["--prefetch", "2"]) == 0
    [r] = recorded(out, "mnist")
    assert r.ok and r.backend == AheadLMDB.name and r.read_options == {"prefetch": 2}
    assert "prefetch: 2" in (out / r.run_dir / "train.prototxt").read_text()
    assert run.main(args + ["--prefetch", "2"]) == 0 and len(recorded(out, "mnist")) == 1  # the same setup: skipped
    assert run.main(args + ["--prefetch", "3"]) == 0 and len(recorded(out, "mnist")) == 2  # another: run


def test_an_option_of_another_backend_is_refused_by_name(mnist_small, tmp_path, capsys):
    assert run.main(["mnist", "hdf5", "warm", "--lmdb-ahead-mb", "8", "--data", str(mnist_small.parent),
                     "--out", str(tmp_path)]) == 2
    assert "--lmdb-ahead-mb applies to lmdb only" in capsys.readouterr().err


def test_every_backend_names_a_registered_location_and_declares_options_once():
    from data_prep import options
    for b in backends.REGISTRY.values():
        assert locations.get(b.location).name == b.location
    table = options.declared(list(backends.REGISTRY.values()) + list(locations.REGISTRY.values()))
    assert {"lmdb_read", "prefetch_depth", "out_of_order", "rtt_ms"} <= set(table)
