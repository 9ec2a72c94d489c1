"""The instrument's honesty: AU over every timed iteration, the initial test pass apart from
start-up, the process's reads split by phase, the host-device copies a GPU build makes, and the
fitted profiles agreeing with the cells they name."""
import json
import shutil

import pytest

import catalogue
from analysis import fidelity
from data_prep import cache
from experiments import accelerators, caffe_log, calibration, rederive, runner
from experiments.config import RunConfig

QUIET = dict(cpu=True, quiet=True)


def quiet(*_):
    pass


def test_au_counts_every_timed_iteration_and_the_initial_test_pass_is_its_own(mnist_small, tmp_path):
    """150 iterations with display 100: Caffe logs its last iteration at 100, but 149 run inside
    the solver's window. Warm LMDB feeds a 4 ms accelerator fully, so AU must be ~1 (counting
    from the last logged iteration it came out ~0.66)."""
    r = runner.run(RunConfig("mnist", "lmdb", "warm", iters=150, accelerator="4ms", data=str(mnist_small.parent),
                             out=str(tmp_path), **QUIET), log=quiet)
    parsed = caffe_log.parse((tmp_path / r.run_dir / "caffe.log").read_text())
    assert r.ok and r.iterations == 100 and parsed["settings"]["display"] == 100
    assert caffe_log.timed_compute(parsed) == (149, 0, 6)  # one test pass of 6 after iteration 0
    assert r.au >= 0.9, r.au
    # the test pass at iteration 0 (6 test iterations at 4/3 x 100/64 ms) is apart from start-up
    test_ms = r.compute["test_ms_per_iteration"]
    assert r.initial_test_seconds >= 6 * test_ms / 1000
    assert 0 <= r.wall_seconds - r.startup_seconds - r.initial_test_seconds - r.solver_seconds < 0.4
    # the test passes inside the window are measured from the log, close to what was emulated
    assert r.test_ms_per_iteration == pytest.approx(test_ms, rel=0.3)


def test_the_au_of_a_committed_caffenet_run_is_the_logs(tmp_path):
    """The 2016 machine's ImageNet LMDB warm run: its log shows 197.2 ms per iteration, i.e. an
    accelerator that never waits; counting 139 of its 149 timed iterations had said 93%."""
    src = catalogue.folder("ci-2core-paper2016") / "imagenet"
    line = next(json.loads(x) for x in (src / "records.jsonl").read_text().splitlines()
                if '"backend": "lmdb"' in x and '"cache": "warm"' in x)
    old = dict(line, au=0.9315, revised=None, initial_test_seconds=None, startup_seconds=0.664, legacy_key="kept")
    (tmp_path / "imagenet" / "runs").mkdir(parents=True)
    shutil.copytree(catalogue.folder("ci-2core-paper2016") / line["run_dir"], tmp_path / line["run_dir"])
    (tmp_path / "imagenet" / "records.jsonl").write_text(json.dumps(old) + "\n")
    assert rederive.rederive_folder(tmp_path) == (1, 1)
    new = json.loads((tmp_path / "imagenet" / "records.jsonl").read_text())
    assert new["au"] > 0.99 and new["legacy_key"] == "kept" and new["revised"] == rederive.REVISION
    assert new["startup_seconds"] == pytest.approx(0.664 - new["initial_test_seconds"], abs=1e-3)
    assert rederive.rederive_folder(tmp_path) == (1, 0)  # once only


def test_hdf5_pays_the_host_copies_a_gpu_build_makes_and_lmdb_does_not(mnist_small, tmp_path):
    """On a GPU HDF5Data copies every row to the device on the solver thread (7.5 us each on
    the real H100, fitted); the Data layer's copy runs on its prefetch thread. The emulated
    h100 charges both where they block, so HDF5's solver time grows by its copies."""
    common = dict(iters=300, accelerator="h100", data=str(mnist_small.parent), out=str(tmp_path), **QUIET)
    hdf5 = runner.run(RunConfig("mnist", "hdf5", "warm", **common), log=quiet)
    lmdb = runner.run(RunConfig("mnist", "lmdb", "warm", **common), log=quiet)
    link = accelerators.profiles()["h100"]["host_copies"]
    assert f"host_copy_latency_us: {link['latency_us']}" in (tmp_path / hdf5.run_dir / "train.prototxt").read_text()
    assert hdf5.compute["host_copy_latency_us"] == link["latency_us"]
    parsed = caffe_log.parse((tmp_path / hdf5.run_dir / "caffe.log").read_text())
    copies, nbytes = calibration.hdf5_copies("lenet", caffe_log.timed_compute(parsed))
    charged = copies * link["latency_us"] / 1e6 + nbytes / (link["gbps"] * 1e9)
    compute = accelerators.choose("h100", runner.datasets.get("mnist").model, -1)
    extra = {r.backend: r.solver_seconds - compute.seconds(caffe_log.timed_compute(
        caffe_log.parse((tmp_path / r.run_dir / "caffe.log").read_text()))) for r in (hdf5, lmdb)}
    assert extra["hdf5"] >= 0.8 * charged, (extra, charged)
    assert extra["lmdb"] < 0.3 * charged, (extra, charged)


def test_the_profiles_are_what_their_named_cells_give():
    fits, disk = calibration.fitted()
    assert calibration.differences(accelerators.profiles(), fits, disk) == []
    for name, (nets, link) in fits.items():
        assert link["fitted_on"] and all(v["fitted_on"] for v in nets.values())
    # the fitted h100 LeNet is faster than caffe time's 1.317 ms, as real training showed
    assert fits["h100"][0]["lenet"]["train_ms"] < 1.1


def test_a_cold_runs_reads_are_split_at_the_initial_test_and_the_first_iteration(mnist_small, tmp_path):
    """A cold run re-reads Caffe's libraries before its first test pass (tens of MiB, against
    ~1 MiB of data here); the split is sampled at the runner's 0.5 s polls, and library code
    first used during training (faulted in with the disk's readahead) counts as training's."""
    if not cache.can_drop_caches():
        pytest.skip("needs root to drop the page cache")
    r = runner.run(RunConfig("mnist", "lmdb", "cold", iters=300, accelerator="10ms",
                             data=str(mnist_small.parent), out=str(tmp_path), **QUIET), log=quiet)
    p = r.process
    assert p["read_bytes_before_test"] + p["read_bytes_initial_test"] + p["read_bytes_training"] == p["read_bytes"]
    assert p["read_bytes_before_test"] > 10 * 2**20, p
    assert p["read_bytes_before_test"] > p["read_bytes_training"], p


def test_a_superseded_run_stays_recorded_and_leaves_the_tables(tmp_path):
    from analysis.report import cell_stats
    from experiments import record, supersede
    path = tmp_path / "mnist" / "records.jsonl"
    for i, wall in enumerate([10.0, 99.0]):
        record.append(path, record.Record(run_id=f"r{i}", dataset="mnist", backend="lmdb", cache="warm", status="ok",
                                          wall_seconds=wall, compute={"mode": "cpu"}, monitor={}))
    assert supersede.supersede(path, ["r1", "nope"], "ran beside a test suite") == ["nope"]
    kept = record.load([tmp_path])
    assert [r.status for r in kept] == ["ok", "superseded"] and "ran beside a test suite" in kept[1].revised
    assert cell_stats(kept)[("mnist", "lmdb", "warm")]["mean"] == 10.0


def test_records_split_into_shards_load_in_order_and_can_be_superseded_by_folder(tmp_path):
    """Committed results split a large records.jsonl into records-NNN.jsonl (files under 5 MB)."""
    from experiments import record, supersede
    folder = tmp_path / "mnist"
    for i in range(4):
        record.append(folder / "records.jsonl", record.Record(run_id=f"r{i}", dataset="mnist", backend="lmdb",
                                                              cache="warm", status="ok"))
    lines = (folder / "records.jsonl").read_text().splitlines(keepends=True)
    (folder / "records-000.jsonl").write_text("".join(lines[:2]))
    (folder / "records-001.jsonl").write_text(lines[2])
    (folder / "records.jsonl").write_text(lines[3])
    assert [r.run_id for r in record.load([tmp_path])] == ["r0", "r1", "r2", "r3"]
    assert [r.run_id for r in record.recorded(tmp_path, "mnist")] == ["r0", "r1", "r2", "r3"]
    assert supersede.main([str(folder), "r0", "r2", "--why", "a test"]) == 0
    assert [r.status for r in record.load([tmp_path])] == ["superseded", "ok", "superseded", "ok"]
    assert supersede.main([str(folder), "r9", "--why", "a test"]) == 1


def test_findings_are_held_as_effects_and_a_paper_effect_within_our_noise_as_none():
    """'Warm image files only 40% slower': ours 5% slower is an eighth of the effect, outside,
    though 1.05 / 1.4 = 0.75 passed a 1.5x ratio of ratios; a 1.6% paper effect under our 2%
    noise is checked as no effect."""
    check, effect = fidelity.finding_check(1.4, 1.05, noise=0.02)
    row = dict(ratio=0.75, use="prediction", check=check, effect=effect, noise=0.02, bound="data path")
    assert check == "effect" and effect == pytest.approx(0.125) and fidelity.verdict(row, 1.5) == "outside"
    check, effect = fidelity.finding_check(1.016, 1.01, noise=0.02)
    row.update(check=check, effect=effect)
    assert check == "no effect" and fidelity.verdict(row, 1.5).startswith("within")
    row.update(effect=0.08)
    assert fidelity.verdict(row, 1.5).startswith("outside")
    assert fidelity.bound(0.99) == "compute" and fidelity.bound(0.5) == "data path"
    assert "data-path-bound: 0 within of 1" in fidelity.summary([row], 1.5)


def test_an_image_cell_is_judged_only_where_both_hosts_probes_are_known():
    rows = {r["cell"]: r for r in fidelity.h100_rows(catalogue.relative("ci-2core-emulated-h100-calibrated"))}
    images = rows["mnist images warm"]
    assert images["bound"] == "data path" and fidelity.verdict(images, 1.15) == "host CPU unknown"
    assert fidelity.verdict(rows["mnist lmdb cold"], 1.15) == "within"
    # a data path twice as fast on the real host halves our data-path time, never below the compute
    assert fidelity.scaled_to_host(30.0, 10.0, 100, 200) == 15.0
    assert fidelity.scaled_to_host(30.0, 20.0, 100, 400) == 20.0


def _step_run(folder, name, mode, seconds, cpu, probe, dataset="mnist", au=0.5, **kw):
    from experiments import record
    r = record.Record(name, dataset, "images", "warm", status="ok", returncode=0, solver_seconds=seconds, au=au,
                      iterations_setting=5000, compute={"mode": mode},
                      process={"thread_cpu_seconds": {"data prefetch": cpu}},
                      environment={"gpu_model": "GPU X", "cpu_probe": probe}, **kw)
    record.append(folder / dataset / "records.jsonl", r)


def test_gpu_steps_pair_real_and_emulated_by_cell_and_scale_another_host_by_the_matching_probe(tmp_path):
    """Same host: real and emulated runs of one cell (read options part of the cell) make one row.
    Another host: our MNIST image cell is scaled by the per-file probes (here 2x faster, so our
    time counts double), not by the pixel probes; without the per-file probe there, it is not judged."""
    step, here = tmp_path / "step", tmp_path / "here"
    there_probe = {"images_per_second": 400, "small_files_per_second": 10_000}
    _step_run(step, "a", "real", 10.0, 9.0, there_probe)
    _step_run(step, "b", "emulated", 11.0, 9.5, there_probe)
    _step_run(step, "c", "real", 5.0, 4.0, there_probe, read_options={"decode_threads": 4})
    _step_run(step, "d", "emulated", 5.5, 4.5, there_probe, read_options={"decode_threads": 4})
    rows = fidelity.same_host_rows([str(step)])
    assert [(r["cell"], r["ratio"]) for r in rows] == [("mnist images warm, 5000 iterations", 1.1),
                                                       ("mnist images warm, 5000 iterations, decode_threads 4", 1.1)]
    _step_run(here, "e", "emulated", 6.0, 5.0, {"images_per_second": 800, "small_files_per_second": 20_000})
    row = next(r for r in fidelity.cross_host_rows([str(step)], str(here)) if "decode" not in r["cell"])
    assert (row["raw_ratio"], row["scaled"], row["ratio"]) == (0.6, {"images_per_second": 1.2,
                                                                    "small_files_per_second": 1.2}, 1.2)
    assert row["us_here"] == pytest.approx(1e6 * 5.0 / calibration.images_read("mnist", 5000), abs=0.1)
    assert fidelity.verdict(row, 1.15) == "outside"
    old = tmp_path / "old-step"
    _step_run(old, "f", "real", 10.0, 9.0, {"images_per_second": 400})  # a probe before the per-file work
    row = fidelity.cross_host_rows([str(old)], str(here))[0]
    assert row["scaled"] == {"images_per_second": 1.2} and fidelity.verdict(row, 1.15) == "host CPU unknown"
    assert "host CPU unknown" not in fidelity.cross_host_table([row], str(here))[0]
