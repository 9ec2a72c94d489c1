"""The prediction model (experiments/prediction.py) on records built for it, with values worked
out by hand, and make host-check's plan (benchmarks/host_check.py --dry-run)."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

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
    for cell in ("mnist-lmdb", "mnist-images"):  # no data-path probe in the folder: the cross-host prediction only
        assert rows[cell]["measured_n"] == 6 and rows[cell]["verdict"] == "applies here"
        assert rows[cell]["cross_host_measured_over_predicted"] == pytest.approx(1.0, abs=0.03)
        assert rows[cell]["predicted_s"] is None and "no data-path probe of mnist/" in rows[cell]["why"]
    assert rows["mnist-lmdb"]["cross_host_bound"] == "compute" and rows["mnist-images"]["cross_host_bound"] == "data path"
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


def path_probe(**rates):
    """A data_path_probe.json as benchmarks/data_path.py probe() writes it: {"dataset/backend":
    (images/s, images per prefetch CPU second, images per data-thread CPU second)}."""
    cells = {}
    for key, (per_s, per_prefetch, per_threads) in rates.items():
        dataset, backend = key.split("__")
        cells[f"{dataset}/{backend}"] = {"dataset": dataset, "backend": backend, "runs": [],
                                         "images_per_s": {"n": 2, "median": per_s},
                                         "images_per_prefetch_cpu_s": {"n": 2, "median": per_prefetch},
                                         "images_per_data_path_cpu_s": {"n": 2, "median": per_threads}}
    return {"cells": cells, "failed": []}


def test_the_data_path_model_from_this_hosts_probe_by_hand():
    """MNIST (batch 64; stock solver: a test pass of 100 iterations every 500) at 2.5 ms per step
    (test: 2.5 x FORWARD_SHARE x 100/64 ms per test iteration)."""
    from experiments import accelerators, data_path_model as model
    test_ms = 2.5 * accelerators.FORWARD_SHARE * 100 / 64
    compute = (1000 * 2.5 + 2 * 100 * test_ms) / 1000  # 1,000 iterations: the test passes at 500 and 1,000
    assert model.compute_seconds("mnist", 1000, "2.5ms") == pytest.approx(compute, rel=1e-5)
    compute = model.compute_seconds("mnist", 1000, "2.5ms")  # its test time rounded to 4 places, as runs have it
    # 999 x 64 train images and the two test passes' 2 x 100 x 100 at 16,000/s: 5.25 s of data
    # path, above the compute: data-path-bound
    probe = path_probe(mnist__images=(16_000, 30_000, 25_000), mnist__lmdb=(640_000, 800_000, 700_000))
    p = model.predict(probe, "mnist", "images", 1000, "2.5ms")
    images = 999 * 64 + 2 * 100 * 100
    assert p["bound"] == "data path" and p["data_path_s"] == pytest.approx(images / 16_000)
    assert p["seconds"] == pytest.approx(images / 16_000 + model.FIXED_S)
    assert p["au"] == pytest.approx(compute / p["seconds"])
    # LMDB forty times as fast: 0.1 s of data path under the compute
    p = model.predict(probe, "mnist", "lmdb", 1000, "2.5ms")
    assert p["bound"] == "compute" and p["seconds"] == pytest.approx(compute + model.FIXED_S)
    assert "no data-path probe of cifar10/lmdb" in model.predict(probe, "cifar10", "lmdb", 1000, "2.5ms")["why"]
    # N at 2.5 ms: 0.9 x 64 / 2.5 ms = 23,040 images/s needed; 2 cores x 25,000 per data-thread CPU second
    needed = 0.9 * 64 * 1000 / 2.5
    n, share = model.cpu_allows(probe, "mnist", "images", "2.5ms", 2)
    assert share == pytest.approx(30_000 / needed) and n == pytest.approx(2 * 25_000 / needed)
    # at 1 ms one prefetch thread (30,000/s) cannot feed 57,600/s: N is 0
    assert model.cpu_allows(probe, "mnist", "images", "1ms", 16)[0] == 0.0
    assert model.cpu_allows(probe, "cifar10", "lmdb", "1ms", 2) is None


def test_a_host_check_row_has_the_probes_prediction_and_the_cross_host_one_beside_it():
    """The image cell: cross-host 20 s (per-file probe half as fast here), from this host's
    data-path probe 319,936 train and 100,000 test images at 16,000/s = 26.2 s + FIXED_S;
    measured 24 s."""
    from experiments import data_path_model
    cell = next(c for c in host_check.CELLS if c.name == "mnist-images")
    probe = path_probe(mnist__images=(16_000, 16_000, 16_000))
    here = [made("mnist", "images", 24.0, 0.3, 24.0, {PIXELS: 600, FILES: 25_000}, iters=5000)]
    row = host_check.compare(cell, ("ref", image_cell()), here, {PIXELS: 600, FILES: 25_000}, 2, None, probe)
    expected = (4999 * 64 + 10 * 100 * 100) / 16_000 + data_path_model.FIXED_S
    assert row["predicted_s"] == pytest.approx(expected) and row["bound"] == "data path"
    assert row["measured_over_predicted"] == pytest.approx(24.0 / expected)
    assert row["cross_host_predicted_s"] == pytest.approx(20.0) and row["cross_host_bound"] == "data path"
    assert row["cross_host_measured_over_predicted"] == pytest.approx(1.2)
    # the capacity cell: N from the probe's CPU seconds beside the cross-host N
    capacity_cell = next(c for c in host_check.CELLS if c.capacity)
    probe = path_probe(cifar10__lmdb=(300_000, 300_000, 250_000))
    ref = [made("cifar10", "lmdb", 1.0, 0.99, 0.5, {PIXELS: 600}, ms=1.0)]
    row = host_check.compare(capacity_cell, ("ref", ref), ref, {PIXELS: 600}, 2, None, probe)
    needed = data_path_model.needed_per_second("cifar10", host_check.ACCELERATOR)
    assert row["predicted_cpu_allows"] == pytest.approx(2 * 250_000 / needed)
    assert row["cross_host_predicted_cpu_allows"] == pytest.approx(capacity.cpu_allows(ref)[0])
    assert row["measured_cpu_allows"] == pytest.approx(capacity.cpu_allows(ref)[0])


def test_the_summary_line_is_a_verdict_and_the_legend_comes_under_the_table():
    def row(name, reference, measured, bound="data path"):
        return {"cell": name, "reference_folder": "ref", "reference_n": 3, "reference_s": reference,
                "reference_bound": bound, "bound": bound, "predicted_s": measured, "predicted_au": None,
                "measured_s": measured, "measured_n": 3, "measured_au": None, "probe_ratio": None, "work": "pixels",
                "cross_host_predicted_s": reference, "why": None, "cross_host_why": None,
                "measured_over_predicted": 1.0, "cross_host_measured_over_predicted": measured / reference,
                "measured_over_reference": measured / reference, "verdict": "-"}
    rows = [row("mnist-images", 6.0, 8.5), row("cifar10-images", 5.0, 8.2), row("imagenet-lmdb", 10.7, 10.4),
            row("mnist-lmdb", 6.6, 6.7, bound="compute")]
    lines = host_check.table(rows, {PIXELS: 675, FILES: 50_000}, "Intel-Xeon-2c-probe675").splitlines()
    assert "within 15%" not in lines[0] and "applies" not in lines[0]
    assert lines[1].startswith("2 of 3 data-path cells miss here: the committed answers of mnist-images, "
                               "cifar10-images do not apply; measure them on this host"), lines[1]
    assert "compute-bound cells: 1 of 1 hold" in lines[1]
    assert "Predicted within 15%: 4 of 4 cells from this host's data-path probe, 2 of 4 from" in lines[1]
    assert lines[-1].startswith("Legend: a committed answer applies here where") and lines[-2] == ""
    held = host_check.table(rows[2:], {PIXELS: 675}, "h").splitlines()[1]
    assert held.startswith("all 1 data-path cells hold here: their committed answers apply"), held


def test_host_checks_data_lives_where_a_default_run_never_finds_it(tmp_path):
    """The ImageNet stand-in of IMAGENET_COUNT images under data/host-check/, not run.py's data/."""
    default = host_check.parser().parse_args([]).data
    assert default == ROOT / "data" / "host-check"
    assert Path(run_cli.parser().parse_args(["imagenet", "lmdb", "cold"]).data) == ROOT / "data"  # run.py's own
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "host_check.py"), "--dry-run",
                          "--out", str(tmp_path / "host")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    for line in (x for x in out.stdout.splitlines() if "experiments/run.py" in x):
        assert f"--data {ROOT / 'data' / 'host-check'}" in line, line
    assert "data-path probe: mnist/lmdb, mnist/images, cifar10/images, imagenet/lmdb, cifar10/lmdb at 0 ms" in out.stdout


def test_the_data_path_probe_on_tiny_data_feeds_the_check(tmp_path):
    """The probe for real (Caffe's Data layer over a 640-image MNIST LMDB at 0 ms, 2 rounds of about
    half a second), then host-check's table from it: host-check.json has the new fields."""
    from benchmarks import data_path
    from data_prep import build
    build.prepare("mnist", ["lmdb"], tmp_path / "data", limit=640, progress=False, log=lambda *_: None)
    out = tmp_path / "host"
    found = data_path.probe([("mnist", "lmdb")], tmp_path / "data", out / "data-path-probe", rounds=2, seconds=0.5,
                            log=lambda *_: None)
    assert found["failed"] == [], found["failed"]
    cell = found["cells"]["mnist/lmdb"]
    assert cell["iterations"] == data_path.probe_iterations("mnist", "lmdb", 0.5) and len(cell["runs"]) == 2
    assert cell["images_per_s"]["n"] == cell["images_per_prefetch_cpu_s"]["n"] == 2, cell["runs"]
    for key in ("images_per_s", "images_per_prefetch_cpu_s", "images_per_data_path_cpu_s"):
        s = cell[key]
        assert s["min"] <= s["median"] <= s["max"] and s["spread"] == pytest.approx((s["max"] - s["min"]) / s["median"])
    host_check.data_path_probe_file(out).write_text(json.dumps(found))
    (out / "benchmarks").mkdir()
    (out / "benchmarks" / "host_check_probe.json").write_text(
        json.dumps({"medians": {PIXELS: 600, FILES: 50_000}, "cores": 2, "cpu_model": "AMD EPYC"}))
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "host_check.py"), "--report", "--out", str(out),
                          "--cells", "mnist-lmdb"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    (row,) = json.loads((out / "host-check.json").read_text())["rows"]
    assert row["bound"] == "compute" and row["predicted_s"] > 0 and row["cross_host_predicted_s"] > 0
    assert row["measured_n"] == 0 and row["verdict"] == "not measured here"  # the probe's 0 ms runs are not the cell's


def test_capacity_predict_prints_each_backends_n_from_a_probe_file(tmp_path, capsys):
    """imgstore capacity --predict's module on a given probe file: nothing run, N per backend at
    the step time asked; a step time it cannot read is refused (exit 2)."""
    from benchmarks import capacity_predict
    from experiments import data_path_model
    probe = tmp_path / "data_path_probe.json"
    probe.write_text(json.dumps(path_probe(cifar10__lmdb=(300_000, 300_000, 250_000),
                                           mnist__images=(16_000, 16_000, 12_000))))
    assert capacity_predict.main(["--accelerator", "2.5ms", "--probe", str(probe), "--cores", "2"]) == 0
    out = capsys.readouterr().out
    n = 2 * 250_000 / data_path_model.needed_per_second("cifar10", "2.5ms")
    assert f"| cifar10/lmdb | 300,000 (2) | 36,000 | 8.33 | {n:.1f} |" in out, out
    assert "| mnist/images | 16,000 (2) | 23,040 | 0.69 | 0.0 |" in out, out  # one thread: too slow
    with pytest.raises(SystemExit) as refused:
        capacity_predict.main(["--accelerator", "fast", "--probe", str(probe)])
    assert refused.value.code == 2 and "unknown accelerator 'fast'" in capsys.readouterr().err
