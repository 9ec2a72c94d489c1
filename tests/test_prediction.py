"""The prediction model (experiments/prediction.py) on records built for it, with values worked
out by hand, and make host-check's plan (benchmarks/host_check.py --dry-run)."""
import json
import os
import subprocess
import sys
import time

import pytest

import catalogue
from conftest import ROOT
from analysis import capacity
from benchmarks import host_check
from experiments import prediction, proctrack
from experiments import run as run_cli
from experiments.record import Record
from monitor import cpu_probe

PIXELS, FILES = cpu_probe.PIXELS, cpu_probe.FILES


def made(dataset, backend, solver_s, au, prefetch_cpu, probe, ok=True, iters=1000, cores=2, ms=1.0):
    """A record of one run as run.py writes it, with the fields the model reads."""
    return Record(run_id=f"{dataset}-{backend}-{solver_s}", dataset=dataset, backend=backend, cache="warm",
                  status="ok" if ok else "failed", solver_seconds=solver_s, au=au, iterations_setting=iters,
                  compute={"mode": "emulated", "accelerator": "h100", "ms_per_iteration": ms},
                  process={"thread_cpu_seconds": {proctrack.PREFETCH: prefetch_cpu, proctrack.SOLVER: 0.2}},
                  environment={"cpu_cores": cores, "cpu_probe": probe})


def image_cell():
    """MNIST image files, data-path-bound: 10 s, 3 of them compute, the prefetch thread busy 10 s;
    per-file probes 49,000 and 51,000 (median 50,000)."""
    return [made("mnist", "images", 10.0, 0.3, 10.0, {PIXELS: 600, FILES: 49_000}),
            made("mnist", "images", 10.0, 0.3, 10.0, {PIXELS: 600, FILES: 51_000}),
            made("mnist", "images", 99.0, 0.01, 99.0, {PIXELS: 600, FILES: 1}, ok=False)]  # failed: ignored


def lmdb_cell():
    """MNIST LMDB, compute-bound: 6 s, 5.94 of them compute, the prefetch thread busy 0.6 s."""
    return [made("mnist", "lmdb", 6.0, 0.99, 0.6, {PIXELS: 600, FILES: 50_000})]


def test_a_data_path_bound_cell_scales_with_its_work_probe_by_hand():
    # per-file work half as fast here: the 10 s of data path take 20; the compute stays 3 s
    p = prediction.predict(image_cell(), {PIXELS: 600, FILES: 25_000})
    assert (p.work, p.n, p.bound) == (FILES, 2, "data path")
    assert p.probe_ratio == pytest.approx(2.0)
    assert p.seconds == pytest.approx(20.0) and p.au == pytest.approx(3.0 / 20.0)
    # the pixel probe does not touch small image files' prediction
    assert prediction.predict_seconds(image_cell(), {PIXELS: 6000, FILES: 25_000}) == pytest.approx(20.0)
    # twice as fast: 5 s of data path, still above the 3 s of compute
    assert prediction.predict_seconds(image_cell(), {PIXELS: 600, FILES: 100_000}) == pytest.approx(5.0)
    # five times as fast: the data path (2 s) goes under the compute, which is the floor
    assert prediction.predict_seconds(image_cell(), {FILES: 250_000}) == pytest.approx(3.0)
    assert prediction.predict_au(image_cell(), {FILES: 250_000}) == pytest.approx(1.0)


def test_a_compute_bound_cell_does_not_move_with_the_probe():
    for pixels in (300, 600, 1200):
        p = prediction.predict(lmdb_cell(), {PIXELS: pixels})
        assert p.bound == "compute" and p.work == PIXELS
        assert p.seconds == pytest.approx(6.0) and p.au == pytest.approx(0.99)
    # until the data path (0.6 s at 600/s) comes out from under the 5.94 s of compute: 60/s here
    assert prediction.predict_seconds(lmdb_cell(), {PIXELS: 30}) == pytest.approx(0.6 * 20 + 0.06)


def test_scaled_to_host_never_goes_below_the_compute():
    assert prediction.scaled_to_host(10.0, 3.0, 600, 300) == pytest.approx(20.0)
    assert prediction.scaled_to_host(10.0, 3.0, 600, 6000) == pytest.approx(3.0)
    assert prediction.scaled_to_host(10.0, None, 600, 6000) == pytest.approx(1.0)


def test_what_cannot_be_predicted_says_why():
    assert "no ok reference runs" in prediction.predict([], {FILES: 1}).why
    p = prediction.predict(image_cell(), {PIXELS: 600})
    assert p.seconds is None and "small_files_per_second probe measured here" in p.why
    old = [made("mnist", "images", 10.0, 0.3, 10.0, {PIXELS: 600})]  # before the per-file probe
    assert "in the reference records" in prediction.predict(old, {FILES: 1}).why


def test_the_capacity_prediction_puts_in_this_hosts_cores_and_probe():
    # CIFAR-10 (batch 100) at 1 ms per iteration eats 100,000 images/s; one prefetch thread
    # delivered 1000 iterations x 100 images in 0.5 s: 200,000 images/s per core
    ref = [made("cifar10", "lmdb", 1.0, 0.99, 0.5, {PIXELS: 600}, ms=1.0, cores=2)]
    n_there, share_there = capacity.cpu_allows(ref)
    assert prediction.predict_cpu_allows(ref, {PIXELS: 600}, 2) == pytest.approx((n_there, share_there))
    n, share = prediction.predict_cpu_allows(ref, {PIXELS: 600}, 16)
    assert n == pytest.approx(8 * n_there) and share == pytest.approx(share_there)
    n, share = prediction.predict_cpu_allows(ref, {PIXELS: 1200}, 2)
    assert n == pytest.approx(2 * n_there) and share == pytest.approx(2 * share_there)
    # a third as fast: one thread no longer feeds one accelerator at AU 0.90, so N is 0
    assert prediction.predict_cpu_allows(ref, {PIXELS: 200}, 16)[0] == 0.0
    assert prediction.predict_cpu_allows(ref, {FILES: 1}, 2) is None


def test_host_folders_are_named_by_model_cores_and_probe():
    assert host_check.host_name("Intel(R) Xeon(R) Processor", 16, 421.6) == "Intel-Xeon-Processor-16c-probe422"
    assert host_check.host_name("AMD EPYC", 2, None) == "AMD-EPYC-2c-probeunknown"


def test_the_verdict_tells_an_answer_that_applies_from_one_that_moves():
    row = {"measured_over_reference": 1.1, "measured_over_predicted": 1.0}
    assert host_check.verdict(row) == "applies here"
    assert host_check.verdict(dict(row, measured_over_reference=2.0)) == "moves 2.00x here (predicted)"
    assert host_check.verdict(dict(row, measured_over_reference=2.0, measured_over_predicted=1.5)) == \
        "moves 2.00x here (not predicted)"
    assert host_check.verdict(dict(row, measured_over_reference=None)) == "not measured here"


def test_the_dry_run_prints_the_plan_within_six_minutes_and_runs_nothing(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "host_check.py"), "--dry-run",
                          "--out", str(tmp_path / "host")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    total = int(out.stdout.split("about ")[1].split(" s")[0])
    assert total <= 360
    runs = [line for line in out.stdout.splitlines() if "experiments/run.py" in line]
    assert len(runs) == len(host_check.CELLS) * host_check.ROUNDS
    for line in runs:
        a = run_cli.parser().parse_args(line.split("run.py ")[1].replace("--iters-reason cut to fit make host-check",
                                                                        "").split())
        assert a.cache == "warm" and a.iters and a.accelerator == "h100" and a.out == str(tmp_path / "host")
    # interleaved: each round starts with another cell
    firsts = [runs[i].split("run.py ")[1].split()[:2] for i in range(0, len(runs), len(host_check.CELLS))]
    assert len({tuple(f) for f in firsts}) == host_check.ROUNDS
    for cell in host_check.CELLS:  # every cell's reference is committed and has probes
        assert f"{cell.name}: {cell.reference}, " in out.stdout
        assert f"{cell.name}: {cell.reference}, 0 runs" not in out.stdout
    assert not (tmp_path / "host").exists()


def test_an_unknown_cell_is_refused_by_name():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "host_check.py"), "--dry-run",
                          "--cells", "mnist-lmdb,mnist-hdf5"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "unknown mnist-hdf5" in out.stderr


def test_the_report_tables_a_host_from_its_records_without_running(tmp_path):
    # this host = the reference host: its own committed runs as the runs "here", its median probes
    (tmp_path / "mnist").mkdir()
    (tmp_path / "mnist" / "records.jsonl").write_text(
        (ROOT / host_check.GPU_STEP_CELLS / "mnist" / "records.jsonl").read_text())
    ref = host_check.reference_runs(host_check.CELLS[1])
    probe = {w: prediction.probe(ref, w) for w in (PIXELS, FILES)}
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "host_check_probe.json").write_text(
        json.dumps({"medians": probe, "cores": 2, "cpu_model": "AMD EPYC"}))
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "host_check.py"), "--report", "--out", str(tmp_path),
                          "--cells", "mnist-lmdb,mnist-images,cifar10-images"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = {r["cell"]: r for r in json.loads((tmp_path / "host-check.json").read_text())["rows"]}
    for cell in ("mnist-lmdb", "mnist-images"):
        assert rows[cell]["measured_n"] == 6 and rows[cell]["verdict"] == "applies here"
        assert rows[cell]["measured_over_predicted"] == pytest.approx(1.0, abs=0.03)
    assert rows["mnist-lmdb"]["bound"] == "compute" and rows["mnist-images"]["bound"] == "data path"
    assert rows["cifar10-images"]["verdict"] == "not measured here"
    assert f"| mnist-images | 11.73 s (6, {catalogue.relative('ci-2core-gpu-step-cells')})" in out.stdout


def test_a_busy_host_or_a_noisy_probe_is_said():
    quiet = [{PIXELS: 650}, {PIXELS: 660}, {PIXELS: 655}]
    assert host_check.busy_words(0.3, 2, quiet) == []
    assert "2.0 of 2 cores busy" in host_check.busy_words(2.0, 2, quiet)[0]
    assert "probes differ 67%" in host_check.busy_words(0.3, 2, [{PIXELS: 300}, {PIXELS: 600}, {PIXELS: 450}])[0]


def test_cores_busy_counts_the_work_running_now():
    """A core spinning while the host check looks is counted busy (the load average would also
    count the last minute's finished work)."""
    spin = subprocess.Popen([sys.executable, "-c", "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 3: pass"])
    try:
        time.sleep(0.3)
        busy = host_check.cores_busy(1.0)
    finally:
        spin.wait(timeout=60)  # it spins 3 s
    assert 0.8 <= busy <= os.cpu_count(), busy
