"""imgstore answer (benchmarks/answer_run.py): a tiny real answer on MNIST (real Caffe, the
emulated H100, real LMDB and PNG files) makes its folder and table with each cell marked
measured, predicted or left; an answer killed after its first run goes on without running that
run again; --dry-run prints the plan and its time and runs nothing."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, given_up
from analysis import answer
from experiments import supersede
from experiments.record import recorded

SCRIPT = str(ROOT / "benchmarks" / "answer_run.py")
TINY = ["--quick", "--no-2016", "--datasets", "mnist"]


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    """Fashion-MNIST's first 640 train and test images, in LMDB and image files only."""
    from data_prep import build
    root = tmp_path_factory.mktemp("answer-data")
    build.prepare("mnist", ["lmdb", "images"], root, limit=640, progress=False, log=lambda *_: None)
    return root


def answer_cmd(data, out, *extra, iters=20):
    return [sys.executable, SCRIPT, *TINY, "--iters", str(iters), "--data", str(data), "--out", str(out), *extra]


@pytest.mark.timeout(300)
def test_a_quick_answer_makes_its_folder_with_each_cell_marked(tiny_data, tmp_path):
    out = tmp_path / "host"
    # 200 iterations: long enough for the prefetch thread's CPU seconds to be seen (cpu_allows)
    p = subprocess.run(answer_cmd(tiny_data, out, "--backends", "images", iters=200), capture_output=True, text=True,
                       timeout=280)
    assert p.returncode == 0, p.stderr[-3000:]
    assert {"answer.md", "answer.json", "answer.png", answer.PLAN_FILE} <= {f.name for f in out.iterdir()}
    marks = {(c["column"], c["cache"]): c["mark"] for c in json.loads((out / "answer.json").read_text())["cells"]
             if (c["dataset"], c["backend"]) == ("mnist", "images")}
    # AU measured (n = 1), the feeds predicted from those runs' CPU per image (no sweep: PNG
    # decoding on one prefetch thread is slower than an H100 eats), the 2016 column left (--no-2016)
    assert marks == {("au", "warm"): "measured", ("au", "cold"): "measured",
                     ("feeds", "warm"): "predicted", ("feeds", "cold"): "predicted",
                     ("seconds", "warm"): "left", ("seconds", "cold"): "left"}, marks
    table = (out / "answer.md").read_text()
    assert table.startswith("Host: ") and "Caffe build " in table and "CPU probe " in table, table
    row = next(line for line in table.splitlines() if "image files" in line)
    assert "| left / left |" in row and row.count("(predicted)") >= 2, row
    assert "4 measured" not in table and "2 measured, 2 predicted, 2 left" in table, table
    assert not (out / "capacity").exists()  # --quick sweeps nothing
    # a superseded run feeds no cell: neither its AU nor the feeds predicted from it
    warm = next(r for r in records_of(out) if r.cache == "warm")
    assert supersede.supersede(out / "h100" / "mnist" / "records.jsonl", [warm.run_id], "a test's") == []
    marks = answer.host_table(out)[1]
    assert (marks["mnist|images|au|warm"], marks["mnist|images|feeds|warm"]) == ("left", "left"), marks
    assert (marks["mnist|images|au|cold"], marks["mnist|images|feeds|cold"]) == ("measured", "predicted"), marks


def records_of(out):
    return recorded(out / "h100", "mnist")


@pytest.mark.timeout(400)
def test_an_interrupted_answer_goes_on_without_running_a_recorded_run_again(tiny_data, tmp_path):
    out = tmp_path / "host"
    cmd = answer_cmd(tiny_data, out, "--backends", "lmdb,images")
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while not (out / "h100" / "mnist" / "records.jsonl").is_file() or not records_of(out):
        if first.poll() is not None or time.monotonic() > deadline:
            given_up(first, f"a first record within 180 s (exit status {first.returncode})")
        time.sleep(0.2)
    os.kill(first.pid, signal.SIGTERM)
    try:
        said = first.communicate(timeout=120)[1]
    except subprocess.TimeoutExpired:
        first.kill()
        raise AssertionError("the answer did not stop within 120 s of SIGTERM")
    assert first.returncode == 130, said[-2000:]
    kept = {r.run_id: (r.backend, r.cache, r.repeat) for r in records_of(out)}
    assert 1 <= len(kept) < 4, kept
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"4 steps, {len(kept)} already recorded" in again.stdout, again.stdout
    done = [line for line in again.stdout.splitlines() if line.strip().startswith("recorded ")]
    assert len(done) == len(kept), again.stdout
    rs = records_of(out)
    assert set(kept) <= {r.run_id for r in rs}
    cells = [(r.backend, r.cache, r.repeat) for r in rs]
    assert len(cells) == len(set(cells)) == 4, cells  # every cell once: none run twice


def test_the_dry_run_prints_the_plan_and_its_time_and_runs_nothing(tmp_path):
    out = tmp_path / "host"
    p = subprocess.run([sys.executable, SCRIPT, "--dry-run", "--quick", "--datasets", "mnist", "--backends",
                        "lmdb,images", "--data", str(tmp_path / "data"), "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    head = p.stdout.splitlines()[0]
    assert head.startswith("imgstore answer --quick: 7 steps, 0 already recorded; about 0:0"), head
    assert "data missing from" in p.stdout and "mnist" in p.stdout
    assert "2016 machine s: mnist lmdb cold (repeat 1): mnist lmdb cold --profile paper2016" in p.stdout
    assert "mnist images cold --profile" not in p.stdout  # minutes on the 2016 disk: left by --quick
    assert "H100 AU: mnist images cold (repeat 1): mnist images cold --accelerator h100" in p.stdout
    assert not out.exists() and not (tmp_path / "data").exists()


def test_the_whole_plan_fits_three_hours_on_two_cores_by_cutting_iterations(tmp_path):
    p = subprocess.run([sys.executable, SCRIPT, "--dry-run", "--data", str(tmp_path / "data"),
                        "--out", str(tmp_path / "host")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    hours, minutes, _ = p.stdout.split("; about ", 1)[1].split(" ", 1)[0].split(":")
    assert int(hours) * 60 + int(minutes) <= 180, p.stdout.splitlines()[0]
    assert "iterations cut to " in p.stdout
    for dataset in ("mnist", "cifar10", "imagenet"):
        assert f"H100 AU: {dataset} lmdb warm (repeat 3)" in p.stdout and \
            f"H100s fed (sweep): {dataset} lmdb cold" in p.stdout
    assert not (tmp_path / "host").exists()
