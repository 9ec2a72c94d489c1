"""A folder whose name holds `"` or `\\` is a folder like any other: the solver and net files that
name it are written in protobuf's text format escapes, so Caffe reads the very paths (real Caffe
trains from such a folder); a name the format cannot carry to Caffe (a newline in HDF5Data's list
file) is refused, naming the character and the path."""
import sys

import pytest

from conftest import ROOT, run

ODD = 'odd "quoted" back\\slash'


def parsed(path, message):
    from google.protobuf import text_format
    return text_format.Parse(path.read_text(), message)


def test_solver_names_a_folder_with_quote_and_backslash_as_it_is(tmp_path):
    from caffe.proto import caffe_pb2
    from models import nets
    folder = tmp_path / ODD
    folder.mkdir()
    (folder / "solver.prototxt").write_text(nets.solver_text(nets.MODELS["lenet"], folder / "train.prototxt",
                                                             folder / "test.prototxt", folder / "snapshot", gpu=False))
    solver = parsed(folder / "solver.prototxt", caffe_pb2.SolverParameter())
    assert (solver.train_net, list(solver.test_net), solver.snapshot_prefix) == (
        str(folder / "train.prototxt"), [str(folder / "test.prototxt")], str(folder / "snapshot"))


@pytest.mark.timeout(900)
def test_caffe_trains_from_data_and_results_folders_named_with_quote_and_backslash(tmp_path):
    from caffe.proto import caffe_pb2
    folder = tmp_path / ODD
    folder.mkdir()
    done = run([sys.executable, str(ROOT / "experiments" / "run.py"), "cifar10", "lmdb", "warm", "--count", "50",
                "--iters", "4", "--accelerator", "5ms", "--data", str(folder / "data"), "--out", str(folder / "out"),
                "--quiet"], timeout=900)
    runs = list((folder / "out" / "cifar10" / "runs").iterdir())
    assert len(runs) == 1, done.stderr[-2000:]
    net = parsed(runs[0] / "train.prototxt", caffe_pb2.NetParameter())
    assert net.layer[0].data_param.source.startswith(str(folder / "data" / "cifar10" / "lmdb") + "/")
    assert (folder / "out" / "cifar10" / "records.jsonl").read_text().count("\n") == 1


def test_a_newline_in_an_hdf5_artifacts_path_is_refused_naming_it(tmp_path):
    from data_prep import build, datasets
    root = tmp_path / "two\nlines"
    root.mkdir()
    with pytest.raises(datasets.SourceError, match=r"the path holds '\\n', which HDF5Data's list file"):
        build.prepare("cifar10", ["hdf5"], root, count=50, progress=False, log=lambda *_: None)
    assert not list((root / "cifar10").glob("*hdf5*"))
