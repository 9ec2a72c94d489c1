"""No silent stand-in data: a run that asks for one number of train images (--count, or the
dataset's default sizing) over a data folder whose artifacts hold another is refused, naming both
numbers and the way on, instead of training on what is there. Real stand-ins written by build."""
import sys

import pytest

from conftest import ROOT

ASKED, HELD = 80, 50  # CIFAR-10 stand-in sizes: a few hundred small images in all


@pytest.fixture(scope="module")
def held(tmp_path_factory):
    from data_prep import build
    root = tmp_path_factory.mktemp("prepared-size")
    build.prepare("cifar10", ["lmdb"], root, count=HELD, progress=False, log=lambda *_: None)
    return root


def test_a_count_other_than_the_artifacts_is_refused_naming_both(held):
    from data_prep import build, datasets
    with pytest.raises(datasets.SourceError) as refused:
        build.prepare_missing("cifar10", ["lmdb"], held, count=ASKED, log=lambda *_: None)
    said = str(refused.value)
    assert f"holds {HELD} train images, and {ASKED} were asked" in said and f"--count {HELD}" in said, said
    assert str(held / "cifar10" / "lmdb") in said, said
    # a backend not yet written is refused too: it would replace the mean the others were made with
    with pytest.raises(datasets.SourceError, match=f"holds {HELD} train images"):
        build.prepare_missing("cifar10", ["leveldb"], held, count=ASKED, log=lambda *_: None)
    assert not (held / "cifar10" / "leveldb").exists()


def test_the_artifacts_own_count_or_none_uses_it(held):
    from data_prep import build
    assert build.prepare_missing("cifar10", ["lmdb"], held, count=HELD, log=lambda *_: None) == []
    assert build.prepare_missing("cifar10", ["lmdb"], held, log=lambda *_: None) == []


def test_run_py_exits_2_before_training_on_another_size(held, tmp_path):
    import subprocess
    p = subprocess.run([sys.executable, str(ROOT / "experiments" / "run.py"), "cifar10", "lmdb", "warm", "--count",
                        str(ASKED), "--iters", "2", "--data", str(held), "--out", str(tmp_path / "out"), "--quiet"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 2, p.stderr[-3000:]
    assert f"holds {HELD} train images, and {ASKED} were asked" in p.stderr, p.stderr[-3000:]
    assert not list((tmp_path / "out").glob("*/runs/*"))
