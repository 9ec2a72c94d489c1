"""Fidelity verdicts with their power, and answer rows that say their hosts: a difference between
real and emulated is held against the arms' own spread (within, beyond, or undecided where that
spread is larger than the goal), a row that repeats the cell a parameter was fitted on is marked
fitted and not counted, and an answer row whose columns come from different hosts names them and
says why its columns disagree."""
import pytest

from analysis import fidelity
from experiments import record

H100_GPU = "NVIDIA H100 80GB HBM3"  # the GPU of the catalogue's h100, whose runs the h100 profile is fitted on


def step_runs(folder, dataset, backend, mode, seconds, gpu=H100_GPU, iterations=5000, au=0.5):
    """One GPU step's runs of a cell, one per solver time given: real GPU or the emulated h100."""
    compute = {"mode": "gpu"} if mode == "real" else {"mode": "emulated", "accelerator": "h100"}
    for i, s in enumerate(seconds):
        record.append(folder / dataset / "records.jsonl",
                      record.Record(f"{dataset}-{backend}-{mode}-{i}", dataset, backend, "warm", status="ok",
                                    returncode=0, solver_seconds=s, au=au, iterations_setting=iterations,
                                    compute=compute, environment={"gpu_model": gpu},
                                    process={"thread_cpu_seconds": {"data prefetch": 1.0}}))


@pytest.mark.parametrize("arms, ratio, words", [
    ([(3, 0.05), (3, 0.04)], 1.03, "within spread"),   # 3% apart, runs repeat within 5%
    ([(3, 0.05), (3, 0.04)], 1.10, "beyond spread"),   # 10% apart, beyond a 5% spread
    ([(3, 0.30), (3, 0.04)], 0.90, "spread > goal: undecided"),       # 10% apart within a 30% spread > 15%
    ([(3, 0.10), (3, 0.20)], 1.30, "beyond spread"),   # beyond a large spread: resolved
    ([(1, 0.0), (3, 0.01)], 1.10, "an arm of n = 1: spread unknown"),        # one run: its spread unknown
])
def test_the_difference_is_held_against_the_arms_own_spread(arms, ratio, words):
    difference, spread, said = fidelity.against_spread(ratio, arms)
    assert said == words and difference == pytest.approx(abs(ratio - 1))
    assert spread == (None if "n = 1" in words else max(s for _, s in arms))


def test_same_host_rows_state_their_spread_verdict_and_the_summary_counts_it(tmp_path):
    """Three image cells of one step with known spreads: real 10.0 s (n = 3, spread 2%), emulated
    10.3 (5.8%): within spread; emulated 12.0 (1%): beyond spread (20%, outside the goal too);
    arms spread 40%: 5% apart, undecided."""
    step = tmp_path / "step"
    step_runs(step, "mnist", "images", "real", [9.9, 10.0, 10.1])
    step_runs(step, "mnist", "images", "emulated", [10.0, 10.3, 10.6])
    step_runs(step, "cifar10", "images", "real", [9.9, 10.0, 10.1])
    step_runs(step, "cifar10", "images", "emulated", [11.94, 12.0, 12.06])
    step_runs(step, "imagenet", "images", "real", [8.0, 10.0, 12.0], iterations=200)
    step_runs(step, "imagenet", "images", "emulated", [8.5, 10.5, 12.5], iterations=200)
    rows = {r["cell"].split()[0]: r for r in fidelity.same_host_rows([str(step)])}
    assert {k: r["power"][2] for k, r in rows.items()} == {
        "mnist": fidelity.WITHIN_SPREAD, "cifar10": fidelity.BEYOND_SPREAD, "imagenet": fidelity.UNDECIDED}
    assert fidelity.verdict(rows["cifar10"], 1.15) == "outside"
    table = "\n".join(fidelity.same_host_table(list(rows.values())))
    assert "| difference vs spread |" in table
    assert "3.0% vs 5.8%: within spread" in table and "20.0% vs 2.0%: beyond spread" in table
    assert "5.0% vs 40.0%: spread > goal: undecided" in table
    assert ("data-path-bound: 2 within of 3, against their spread: 1 within spread, 1 beyond spread, "
            "1 undecided (spread > goal)") in table


def test_a_row_that_repeats_a_fitted_cell_is_marked_fitted_and_not_counted(tmp_path):
    """MNIST LMDB warm on the H100 is the cell the h100 LeNet compute was fitted on: no evidence.
    On another GPU it is a prediction; CaffeNet's h100 time is `caffe time`, not fitted, and says so."""
    step = tmp_path / "step"
    step_runs(step, "mnist", "lmdb", "real", [5.4, 5.5, 5.6], au=0.99)
    step_runs(step, "mnist", "lmdb", "emulated", [5.8, 5.8, 5.9], au=0.99)
    other = tmp_path / "other-gpu"
    step_runs(other, "mnist", "lmdb", "real", [5.1, 5.2, 5.2], gpu="NVIDIA H200", au=0.99)
    step_runs(other, "mnist", "lmdb", "emulated", [5.8, 5.8, 5.8], gpu="NVIDIA H200", au=0.99)
    step_runs(other, "imagenet", "lmdb", "real", [13.0, 14.0, 15.0], gpu="NVIDIA H200", iterations=200)
    step_runs(other, "imagenet", "lmdb", "emulated", [12.0, 12.0, 13.0], gpu="NVIDIA H200", iterations=200)
    rows = {(r["cell"].split()[0], r["gpu"]): r for r in fidelity.same_host_rows([str(step), str(other)])}
    fitted, h200 = rows[("mnist", H100_GPU)], rows[("mnist", "NVIDIA H200")]
    imagenet = rows[("imagenet", "NVIDIA H200")]
    assert fitted["use"] == "fitted (h100 lenet train_ms, test_ms)"
    assert fidelity.verdict(fitted, 1.15).startswith("fitted")
    assert h200["use"] == "prediction" and fidelity.verdict(h200, 1.15) == "within"
    assert imagenet["use"].startswith("prediction on an unfitted compute") and "`caffe time`" in imagenet["use"]
    summary = fidelity.summary([fitted, h200], 1.15)
    assert "compute-bound: 1 within of 1" in summary
    table = "\n".join(fidelity.same_host_table([fitted, h200, imagenet]))
    assert "| fitted (h100 lenet train_ms, test_ms) | fitted, but its cell is not reproduced" in table


def test_cross_host_rows_hold_the_scaled_difference_against_the_spread(tmp_path):
    """A compute-bound cell on another host: its difference against the two arms' spreads; the same
    cell on the fitting GPU is fitted there too."""
    step, here = tmp_path / "step", tmp_path / "here"
    step_runs(step, "mnist", "lmdb", "real", [5.0, 5.5, 6.0], gpu="NVIDIA H200", au=0.99)
    step_runs(here, "mnist", "lmdb", "emulated", [5.8, 5.8, 5.9], au=0.99)
    (row,) = fidelity.cross_host_rows([str(step)], str(here))
    assert row["use"] == "prediction" and row["power"][2] == fidelity.UNDECIDED  # 5.9% within an 18% spread
    assert "spread > goal: undecided" in "\n".join(fidelity.cross_host_table([row], str(here)))


def capacity_group(folder, dataset, backend, n, au, group, iterations=1000):
    """One group of n solvers of the emulated h100 on this kind of VM, each at `au`."""
    for i in range(n):
        record.append(folder / dataset / "records.jsonl",
                      record.Record(f"{group}-s{i}", dataset, backend, "warm", status="ok", returncode=0, au=au,
                                    iterations_setting=iterations, compute={"mode": "emulated", "accelerator": "h100"},
                                    environment={"cpu_cores": 2, "cpu_model": "AMD EPYC", "memory_bytes": 24 * 2**30,
                                                 "caffe_build_key": "another"},
                                    concurrent={"group": group, "solvers": n, "member": i}))


def test_answer_rows_name_their_hosts_and_say_why_their_columns_disagree(tmp_path, monkeypatch):
    """The AU column (the H100 matrix's host) says one emulated H100 is fed from MNIST LMDB warm
    (98%); a capacity sweep on another host whose one solver got 50% feeds none. The row names the
    host of each column, and its numbered note under the table both hosts' one-solver AU; a row whose
    columns agree gives only its hosts. An answer on one run at N shows its n."""
    from analysis import answer
    sweep = tmp_path / "capacity"
    for i in range(3):
        capacity_group(sweep, "mnist", "lmdb", 1, 0.5, f"lmdb-1-{i}")
        capacity_group(sweep, "mnist", "leveldb", 1, 0.99, f"leveldb-1-{i}")
        capacity_group(sweep, "mnist", "leveldb", 3, 0.5, f"leveldb-3-{i}")
    capacity_group(sweep, "mnist", "leveldb", 2, 0.99, "leveldb-2-0")  # N = 2 on one run
    monkeypatch.setattr(answer, "CAPACITY", str(sweep))
    found = {r["backend"]: r for r in answer.rows() if r["dataset"] == "mnist"}
    text = answer.table([found["lmdb"], found["leveldb"]])
    lmdb, leveldb = text.splitlines()[2:4]
    assert lmdb.endswith("| 0 / - | A / B / C (1) |"), lmdb
    assert ("disagree: (1) MNIST, LMDB: one solver on B / C: warm 98% / 50% (n = 3); "
            "also differ: iterations stock vs 1000, Caffe build.") in text
    assert leveldb.endswith("| 2 (n = 1, 3) / - | A / B / C |"), leveldb
    assert "| hosts: s / AU / feeds |" in text.splitlines()[0]
    assert f"A = `{answer.PAPER2016}`" in text and f"C = `{sweep}`" in text
