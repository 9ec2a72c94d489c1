"""The emulated accelerator (caffe/patches/0010) inside real Caffe, AU, and the registries'
promise that a new backend shows up everywhere without other edits."""
import json
import re
import subprocess
import time
from datetime import datetime

import numpy as np
import pytest

from conftest import ROOT
from data_prep import backends, cache, datasets
from experiments import accelerators, cgroup, run, runner
from experiments.config import RunConfig
from models.nets import dividing_interval

PY = str(ROOT / ".venv" / "bin" / "python")


def emulated_net(tmp_path, forward_ms, backward_ms, batch=50):
    import caffe
    from models.nets import net_proto
    mnist = datasets.get("mnist")
    layer = backends.get("pymem").data_layer(None, mnist, None)
    path = tmp_path / "emulated.prototxt"
    path.write_text(str(net_proto(mnist.model, layer, caffe.TRAIN, batch=batch, emulated=(forward_ms, backward_ms))))
    caffe.set_mode_cpu()
    return caffe.Net(str(path), caffe.TRAIN)


def test_the_layer_takes_the_asked_time_and_reads_its_input(tmp_path):
    net = emulated_net(tmp_path, 3.0, 6.0)
    rng = np.random.default_rng(0)
    data = rng.random((50, 1, 28, 28), dtype=np.float32)  # one batch: every pass sees the same
    labels = rng.integers(0, 10, 50).astype(np.float32)
    net.set_input_arrays(data, labels)
    net.forward()
    net.backward()  # warm-up: first allocations
    start = time.perf_counter()
    for _ in range(100):
        out = float(net.forward()["loss"])
        net.backward()
    took = time.perf_counter() - start
    # 100 x (3 + 6) ms asked: patch 0010 carries each sleep's overshoot into the next wait, so
    # the total is never short (1% for the clock); above it only the net's work and a busy
    # host's scheduling: a generous bound, not 10%
    assert 0.99 * 0.9 <= took <= 1.5 * 0.9, took
    # the output is the mean of one value per 64-byte line of each input blob: the data was read
    seen = np.concatenate([data.ravel()[::16], labels[::16]])
    assert out == pytest.approx(seen.mean(), rel=1e-4)
    net.set_input_arrays(data * 2, labels)
    assert net.forward()["loss"] != pytest.approx(out, rel=1e-3)


def test_an_emulated_run_is_recorded_as_emulated_with_its_au(mnist_small, tmp_path):
    config = RunConfig("mnist", "lmdb", "warm", iters=100, cpu=True, accelerator="5ms", data=str(mnist_small.parent),
                       out=str(tmp_path), quiet=True)
    r = runner.run(config, log=lambda *_: None)
    assert r.ok and r.compute["mode"] == "emulated" and r.compute["accelerator"] == "5ms"
    assert r.compute["ms_per_iteration"] == 5.0 and "emulated 5ms" in r.compute_label()
    assert r.solver_seconds >= 99 * 0.005
    # the wall time is the process's own, not rounded to the runner's polling period (0.5 s)
    assert 0 <= r.wall_seconds - r.startup_seconds - r.initial_test_seconds - r.solver_seconds < 0.4
    assert 0.8 < r.au <= 1.0  # warm LMDB keeps a 5 ms accelerator busy
    assert "EmulatedCompute" in (tmp_path / r.run_dir / "train.prototxt").read_text()
    assert r.test_iteration == 100 and r.test_accuracy is None  # the emulated test net has no accuracy


def test_a_slowed_data_source_lowers_au(mnist_small, tmp_path):
    """Image files read cold at 150 IOPS cannot feed a 2 ms accelerator; warm LMDB can."""
    if not cache.can_drop_caches() or cgroup.version() is None:
        pytest.skip("needs root and a cgroup hierarchy")
    common = dict(iters=10, cpu=True, accelerator="2ms", data=str(mnist_small.parent), out=str(tmp_path), quiet=True)
    fast = runner.run(RunConfig("mnist", "lmdb", "warm", **common), log=lambda *_: None)
    slow = runner.run(RunConfig("mnist", "images", "cold", riops=150, mem_limit="512M", **common), log=lambda *_: None)
    assert fast.ok and slow.ok
    assert slow.limits["riops"] == 150 and slow.limits["cgroup"] == cgroup.version()
    # what the limit leaves for the page cache: the limit less the process's own anonymous memory
    assert 256 * 2**20 < slow.cache_room_bytes() < 512 * 2**20 - 10 * 2**20
    assert slow.data_over_cache_room() == slow.train_footprint["allocated_bytes"] / slow.cache_room_bytes()
    assert fast.cache_room_bytes() is None  # no limit, no room to speak of
    assert slow.au < 0.3 < fast.au, (slow.au, fast.au)


def test_an_unknown_accelerator_or_a_net_missing_from_a_profile_is_a_clear_error(mnist_small, tmp_path, monkeypatch):
    p = subprocess.run([PY, str(ROOT / "experiments" / "run.py"), "mnist", "lmdb", "warm", "--accelerator", "tpu9",
                        "--data", str(mnist_small.parent), "--out", str(tmp_path)], capture_output=True, text=True)
    assert p.returncode == 2 and "unknown accelerator 'tpu9'" in p.stderr and "h100" in p.stderr
    with pytest.raises(accelerators.AcceleratorError, match="1.2.3ms: not a time"):
        accelerators.choose("1.2.3ms", datasets.get("mnist").model, -1)
    table = tmp_path / "accelerators.json"
    table.write_text(json.dumps({"tiny": {"lenet": {"train_ms": 1, "test_ms": 1, "source": "test"}}}))
    monkeypatch.setattr(accelerators, "PROFILES_FILE", table)
    with pytest.raises(accelerators.AcceleratorError, match="'tiny' has no time for the net 'cifar10_quick'"):
        accelerators.choose("tiny", datasets.get("cifar10").model, -1)


def test_without_a_gpu_the_default_is_the_emulated_h100_and_paper2016_brings_its_titan_x():
    assert run.compute_choice(run.parser().parse_args(["mnist", "lmdb", "warm"]))[1] == (
        None if run.toolchain.cuda_built() else "h100")
    args = run.parser().parse_args(["mnist", "lmdb", "warm", "--profile", "paper2016"])
    assert run.compute_choice(args)[1] == (None if run.toolchain.cuda_built() else "titanx2016")
    assert run.compute_choice(run.parser().parse_args(["mnist", "lmdb", "warm", "--cpu"])) == (-1, None)


def test_cells_are_interleaved():
    cells = run.plan("mnist", "all", "all", 3)
    assert len(cells) == len(set(cells)) == len(backends.REGISTRY) * 2 * 3
    assert [c[2] for c in cells] == sorted(c[2] for c in cells)  # repeat by repeat
    firsts = {cells[i][0] for i in range(0, len(cells), len(cells) // 3)}
    assert len(firsts) == 3  # the backends are rotated
    assert {cells[i][1] for i in range(0, len(cells), 2)} == {"warm", "cold"}  # warm is not always first


def test_the_test_interval_is_the_largest_under_the_wanted_one_that_divides_max_iter():
    assert dividing_interval(10_000, 500) == 500
    assert dividing_interval(200, 500) == 200
    assert dividing_interval(250, 100) == 50


def test_the_last_test_pass_runs_at_the_last_iteration_and_counts_in_au(mnist_small, tmp_path):
    """150 iterations with a test interval of 100 asked: Caffe tests after its loop only when the
    interval divides max_iter, so the run tests every 75 and its last pass is at iteration 150;
    the log shows each pass, the record keeps the last one's iteration and the passes' time, and
    the AU counts both passes after iteration 0 (and no final forward: 100 does not divide 150)."""
    config = RunConfig("mnist", "lmdb", "warm", iters=150, test_interval=100, cpu=True, accelerator="5ms",
                       data=str(mnist_small.parent), out=str(tmp_path), quiet=True)
    r = runner.run(config, log=lambda *_: None, test_iter=4)
    assert r.ok, r.status
    log = (tmp_path / r.run_dir / "caffe.log").read_text()
    assert "test_interval: 75" in log.splitlines()
    tested = [int(i) for i in re.findall(r"Iteration (\d+), Testing net", log)]
    assert tested == [0, 75, 150] and r.test_iteration == 150
    passes = [(at(start), at(end)) for start, end in re.findall(
        r"^(I.*Testing net.*)\n(?:.*\n)*?(I.*Test net output #0.*)$", log, re.M)]
    assert len(passes) == 3
    assert r.test_seconds == round(sum((b - a).total_seconds() for a, b in passes[1:]), 3)
    first = at(re.search(r"^I.*Iteration 0 \(.*$", log, re.M).group(0))
    done = at(re.findall(r"^I.*Optimization Done.*$", log, re.M)[-1])
    assert r.solver_seconds == pytest.approx((done - first).total_seconds(), abs=1e-9)
    compute_seconds = (149 * 5.0 + 2 * 4 * r.compute["test_ms_per_iteration"]) / 1000
    assert r.au == round(min(1.0, compute_seconds / r.solver_seconds), 4)  # 1: what the layer carried in (caffe_log)


def at(glog_line):
    return datetime.strptime(glog_line[1:25], "%Y%m%d %H:%M:%S.%f")


def test_a_new_backend_appears_in_the_matrix_and_in_the_report(monkeypatch, tmp_path):
    from analysis import report
    from data_prep.backends.lmdb_store import LMDBBackend
    from experiments.record import Record

    class Throwaway(LMDBBackend):
        name, label, color = "throwaway", "a throw-away store", "#000000"
    monkeypatch.setitem(backends.REGISTRY, "throwaway", Throwaway())
    assert ("throwaway", "warm", 0) in run.plan("mnist", "all", "all", 1)
    records = [Record(run_id=f"x{i}", dataset="mnist", backend=b, cache="warm", status="ok", wall_seconds=10.0 + i,
                      compute={"mode": "cpu"}, monitor={}) for i, b in enumerate(["lmdb", "throwaway"])]
    figures = {}
    monkeypatch.setattr(report, "save", lambda fig, path: figures.setdefault(path.name, fig) and path)
    report.fig_time("mnist", records, tmp_path)
    ticks = [t.get_text().replace("\n", " ") for t in figures["fig_time_mnist.png"].axes[0].get_xticklabels()]
    assert ticks == ["LMDB", "a throw-away store"]
