"""analysis/: the report from records of real (tiny) runs, the notebooks, and the reference
table checked against the paper's own text."""
import json
import re
import subprocess

import pytest

import catalogue
from analysis import report
from conftest import ROOT
from data_prep import datasets
from experiments import runner
from experiments.config import RunConfig

PY = str(ROOT / ".venv" / "bin" / "python")
PAPER = ROOT.parent / "shared" / "seeds" / "lim-young-patton-2016-image-storage-systems.txt"


@pytest.fixture(scope="module")
def tiny_results(mnist_small, tmp_path_factory):
    results = tmp_path_factory.mktemp("report_results")
    for backend in ["lmdb", "images"]:
        for state in ["warm", "cold"]:
            for repeat in range(2):
                config = RunConfig("mnist", backend, state, iters=10, test_interval=10, cpu=True,
                                   data=str(mnist_small.parent), out=str(results), cold_fallback="fadvise")
                assert runner.run(config, runner.Cell(backend, state, repeat), log=lambda *_: None).ok
    return results


def test_report_draws_figures_and_tables_from_real_runs(tiny_results, tmp_path):
    p = subprocess.run([PY, str(ROOT / "analysis" / "report.py"), str(tiny_results), "--out", str(tmp_path)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    md = (tmp_path / "report.md").read_text()
    assert "| mnist | lmdb |" in md and "| mnist | images |" in md
    assert "427.16" in md  # the paper's cold image-file time beside ours
    assert re.search(r"Cold image files .* \| 20.94 \| \d+\.\d\d \| (holds|no effect|reversed)[^|]* \|", md)
    assert "real CPU" in md and "n=2" in md
    for name in ["fig_time_mnist.png", "fig_resources_mnist.png"]:
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert "data:image/png;base64," in (tmp_path / "report.html").read_text()


def test_one_runs_time_series_on_request(tiny_results, tmp_path):
    run_dir = next((tiny_results / "mnist" / "runs").iterdir())
    p = subprocess.run([PY, str(ROOT / "analysis" / "report.py"), "--timeseries", str(run_dir), "--out", str(tmp_path)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / f"timeseries_{run_dir.name}.png").read_bytes()[:4] == b"\x89PNG"


def test_report_on_no_records_says_so(tmp_path):
    p = subprocess.run([PY, str(ROOT / "analysis" / "report.py"), str(tmp_path), "--out", str(tmp_path / "r")],
                       capture_output=True, text=True)
    assert p.returncode == 1 and "no successful run records" in p.stderr


def execute_notebook(name, results, out, monkeypatch, dataset=None):
    """Runs analysis/NAME.ipynb headless on `results`; returns its outputs (none an error)."""
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(ROOT / "analysis" / f"{name}.ipynb", as_version=4)
    monkeypatch.setenv("IMGSTORE_RESULTS", str(results))
    monkeypatch.setenv("IMGSTORE_REPORT", str(out))
    if dataset:
        monkeypatch.setenv("IMGSTORE_DATASET", dataset)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "analysis")}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    return outputs


def test_overview_notebook_executes_headless(tiny_results, tmp_path, monkeypatch):
    outputs = execute_notebook("overview", tiny_results, tmp_path, monkeypatch)
    assert any("text/markdown" in o.get("data", {}) for o in outputs)


COMMITTED = catalogue.folder("ci-2core-paper2016-calibrated")  # every dataset of the paper, one machine


@pytest.mark.parametrize("dataset", list(datasets.REGISTRY))
def test_the_dataset_notebook_draws_each_dataset(dataset, tmp_path, monkeypatch):
    if not (COMMITTED / dataset / "records.jsonl").exists():
        pytest.skip(f"no committed {dataset} records in {COMMITTED}")
    outputs = execute_notebook("dataset", COMMITTED, tmp_path, monkeypatch, dataset)
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 2  # time and resources
    assert list(tmp_path.glob(f"fig_time_{dataset}_*.png"))
    text = "".join(o.get("text", "") for o in outputs)
    assert f"no {dataset} records yet" not in text and ": paper " in text  # the paper's findings, ours beside


def test_the_committed_records_hold_every_dataset_of_the_paper():
    assert all((COMMITTED / d / "records.jsonl").exists() for d in ["mnist", "cifar10", "imagenet"])


def test_reference_numbers_appear_in_the_papers_text():
    if not PAPER.exists():
        pytest.skip(f"{PAPER} not present")
    text = PAPER.read_text()
    ref = json.loads((ROOT / "analysis" / "paper_reference.json").read_text())
    for row in ref["training_seconds"]:
        assert f"{row['mean']:.2f}" in text, row
        if row["sd"] is not None:
            assert str(row["sd"]).rstrip("0") in text, row
    for p in ref["parameters"].values():
        assert f"{p['value']:,}" in text
    for row in ref["footprint"]["rows"]:
        assert row["size"].split(" ")[0] in text, row
    assert "99.04%" in text and "6.8 times" in text and "17 times" in text


def test_notebooks_read_local_results_once_there_are_any(tmp_path):
    assert report.default_results(tmp_path) == tmp_path / "results" / catalogue.entry("h100").path
    (tmp_path / "results" / "mnist").mkdir(parents=True)
    (tmp_path / "results" / "mnist" / "records.jsonl").write_text("")
    assert report.default_results(tmp_path) == tmp_path / "results"


def test_committed_h100_records_make_a_report(tmp_path):
    records = report.load_records(catalogue.tracked_records("h100"))
    assert records and all(r.environment["gpu_model"].startswith("NVIDIA H100") for r in records)
    assert {r.cache_resident_fraction for r in records if r.cache == "cold"} == {0.0}
    assert {r.mode for r in records} == {"gpu"} and all(r.startup_seconds is None for r in records)
    report.write_report(records, tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "| mnist | images |" in md and "real GPU (NVIDIA H100 80GB HBM3)" in md
    assert "holds, 16.7x weaker" in md  # cold image files: 1.25x here against the paper's 20.94x


def test_old_records_that_named_a_changed_profile_are_shown_with_their_real_limits():
    records = report.load_records(catalogue.tracked_records("h100-paper2016-riops1000"))
    assert records and {r.limits_label() for r in records} == {
        "8 cores, 16 GiB, 1000 read IOPS, 600 MB/s (paper2016 modified)"}
