"""The foundation: Caffe built from source with the project's patches really works."""
import os
import re
import time


import toolchain
from conftest import ROOT, caffe_tool, line_within, run

WAIT_S = 60  # the most a child's line or end is waited for


def test_pycaffe_builds_lenet_with_the_papers_parameter_count(tmp_path):
    import caffe
    from data_prep import backends, datasets
    from models.nets import count_params, net_proto
    caffe.set_mode_cpu()
    mnist = datasets.get("mnist")
    proto = net_proto(mnist.model, backends.get("pymem").data_layer(None, mnist, None), caffe.TRAIN)
    path = tmp_path / "lenet_check.prototxt"
    path.write_text(str(proto))
    net = caffe.Net(str(path), caffe.TRAIN)
    assert count_params(net) == 431_080
    assert net.blobs["data"].data.shape == (64, 1, 28, 28)


def _losses(log):
    return [float(m) for m in re.findall(r"Iteration \d+ .*loss = ([0-9.e+-]+)", log)]


def test_caffe_tool_trains_lenet_from_lmdb_and_loss_falls(mnist_small, tmp_path):
    import caffe
    from models.nets import net_proto, solver_text
    from data_prep import backends, datasets
    mnist = datasets.get("mnist")
    model = mnist.model
    layer = backends.get("lmdb").data_layer(mnist_small / "lmdb", mnist, None)
    (tmp_path / "train.prototxt").write_text(str(net_proto(model, layer, caffe.TRAIN)))
    (tmp_path / "test.prototxt").write_text(str(net_proto(model, layer, caffe.TEST)))
    (tmp_path / "solver.prototxt").write_text(solver_text(
        model, tmp_path / "train.prototxt", tmp_path / "test.prototxt", tmp_path / "snap", gpu=False,
        max_iter=120, test_iter=2, test_interval=1000, seed=1).replace("display: 100", "display: 20"))
    p = run([caffe_tool("caffe"), "train", f"--solver={tmp_path / 'solver.prototxt'}"], cwd=tmp_path,
            env=dict(os.environ, GLOG_minloglevel="0"))
    losses = _losses(p.stderr)
    assert len(losses) >= 6, p.stderr[-2000:]
    assert "Optimization Done" in p.stderr
    assert sum(losses[-2:]) / 2 < 0.6 * losses[0], losses


def _build_status(env=None):
    out = run(["bash", str(ROOT / "caffe" / "build.sh"), "--status"], env=env).stdout.split()
    return out[1], out[2]  # key, "built"/"not"


def test_unchanged_tree_does_not_rebuild():
    key, state = _build_status()
    assert state == "built"
    p = run(["bash", str(ROOT / "caffe" / "build.sh")])
    assert "up to date" in p.stdout and "Building Caffe" not in p.stdout
    assert toolchain.build_key() == key


def test_a_changed_option_changes_the_build_key():
    key, _ = _build_status()
    env = dict(os.environ, CAFFE_CMAKE_ARGS="-DALLOW_LMDB_NOLOCK=ON")
    other, state = _build_status(env)
    assert other != key and state == "not"


DATA_PATH_TESTS = ":".join([
    "*DataLayerTest*", "*HDF5DataLayerTest*", "*ImageDataLayerTest*", "*MemoryDataLayerTest*",
    "*DBTest*", "*IOTest*", "*DataTransformTest*"])


def test_caffes_own_gtest_suite_passes_for_the_data_path(tmp_path):
    # Caffe's DB tests make folders in the temporary folder and leave them: keep them in the test's
    p = run([str(ROOT / "caffe" / "build_gtest.sh"), f"--gtest_filter={DATA_PATH_TESTS}"],
            env=dict(os.environ, TMPDIR=str(tmp_path)))
    summary = re.search(r"\[  PASSED  \] (\d+) tests?", p.stdout)
    assert summary and int(summary.group(1)) >= 100, p.stdout[-2000:]
    assert "FAILED" not in p.stdout


def test_print_dir_names_the_current_build_and_touches_nothing(tmp_path):
    before = sorted(p.name for p in toolchain.BUILD.iterdir())
    folder = run(["bash", str(ROOT / "caffe" / "build.sh"), "--print-dir"]).stdout.strip()
    key, state = _build_status()
    assert folder.endswith(f"build-{key}") and state == "built"
    assert os.path.exists(os.path.join(folder, ".complete"))
    assert sorted(p.name for p in toolchain.BUILD.iterdir()) == before


def test_a_cached_build_is_current_only_inside_using_build(tmp_path, monkeypatch):
    """Two builds side by side: inside the block .build/caffe and its key name the other build,
    after it (an error included) the current one again; a key not in the cache is refused."""
    import pytest
    cache, build = _two_cached_builds(tmp_path)
    monkeypatch.setattr(toolchain, "BUILD_CACHE", cache)
    monkeypatch.setattr(toolchain, "CAFFE", build / "caffe")
    monkeypatch.setattr(toolchain, "CAFFE_KEY", build / "caffe.key")
    monkeypatch.setattr(toolchain, "SWAP", build / "caffe.swapped")
    monkeypatch.setattr(toolchain, "RUN_LOCK", tmp_path / "run.lock")
    with pytest.raises(RuntimeError):
        with toolchain.using_build("bbbb") as install:
            assert toolchain.build_key() == "bbbb" and (build / "caffe").resolve() == install
            raise RuntimeError("a failed run")
    assert toolchain.build_key() == "aaaa" and (build / "caffe").resolve() == cache / "build-aaaa" / "install"
    with pytest.raises(toolchain.MissingBuild, match="build-cccc"):
        with toolchain.using_build("cccc"):
            pass


def _two_cached_builds(tmp_path):
    """(cache, .build): cached builds aaaa and bbbb, aaaa the current one."""
    cache, build = tmp_path / "cache", tmp_path / ".build"
    for key in ("aaaa", "bbbb"):
        (cache / f"build-{key}" / "install").mkdir(parents=True)
    build.mkdir()
    (build / "caffe").symlink_to(cache / "build-aaaa" / "install")
    (build / "caffe.key").write_text("aaaa\n")
    return cache, build


def _swap_build_env(tmp_path):
    """Python lines pointing toolchain at a scratch .build with two cached builds, for a child
    process to swap in."""
    cache, build = _two_cached_builds(tmp_path)
    return f"""
import sys, time, pathlib
import toolchain
b = pathlib.Path({str(build)!r})
toolchain.BUILD_CACHE, toolchain.CAFFE, toolchain.CAFFE_KEY = pathlib.Path({str(cache)!r}), b / "caffe", b / "caffe.key"
toolchain.SWAP, toolchain.RUN_LOCK = b / "caffe.swapped", pathlib.Path({str(tmp_path / 'run.lock')!r})
"""


def test_a_swap_refuses_runs_of_other_processes_and_waits_for_none(tmp_path):
    """While one process has swapped the build (an A/B measurement), a run of another process is
    refused by name, its own children are not; a swap while a run holds the run lock is refused;
    a swap whose process was killed is over."""
    import fcntl
    import subprocess
    import sys
    setup = _swap_build_env(tmp_path)
    check = setup + "toolchain.check_not_swapped(); print('allowed')"
    swapper = subprocess.Popen([sys.executable, "-c", setup + f"""
import subprocess
with toolchain.using_build("bbbb"):
    child = subprocess.run([sys.executable, "-c", {check!r}], capture_output=True, text=True)
    print("child:", child.stdout.strip(), flush=True)
    time.sleep(60)
"""], stdout=subprocess.PIPE, text=True)
    try:
        awaited = "'child: allowed' from a process that swapped the build"
        said = line_within(swapper, awaited, time.monotonic() + WAIT_S)
        assert said.strip() == "child: allowed"
        other = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=WAIT_S)
        assert other.returncode != 0 and f"swapped for cached build bbbb by pid {swapper.pid}" in other.stderr
    finally:
        swapper.kill()
        swapper.wait(timeout=10)
    after = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=WAIT_S)
    assert after.stdout.strip() == "allowed", after.stderr  # its process is gone: the swap is over
    with open(tmp_path / "run.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a run training
        lock.write("pid 4242, experiments/run.py\n")
        lock.flush()
        refused = subprocess.run([sys.executable, "-c", setup + "with toolchain.using_build('bbbb'):\n    pass"],
                                 capture_output=True, text=True, timeout=WAIT_S)
    assert refused.returncode != 0 and "a run is training (pid 4242" in refused.stderr
