"""The capacity model and the stopper with the Data layer's transform on a pool (transform_threads):
the CPU prediction (experiments/data_path_cpu.cpu_allows) counts every thread the solver had, the
stopper "data threads" says how many, and the decode/transform-threads tables show how busy the
prefetch thread was. Records are built with their figures set (ImageNet on LMDB, CaffeNet's batch of
256, the emulated H100's 51 ms), so nothing here depends on the host's speed; one test reads the
committed runs."""
import argparse

import pytest

import catalogue
from analysis import capacity_stoppers as stoppers
from analysis import capacity_words as words
from analysis import decode_threads
from experiments import data_path_cpu, proctrack
from experiments.record import Record, append, load

MS, BATCH, ITERATIONS, TRAINING = 51.0, 256, 150, 10.0
NEEDED = data_path_cpu.THRESHOLD * BATCH * 1000 / MS  # images a second that 0.90 of one emulated H100 eats
IMAGES = ITERATIONS * BATCH


def solver(name, options, prefetch, transform=0.0, n=1, member=0, **fields):
    """One solver's record of an ImageNet LMDB run: its prefetch thread and its pool's transform
    threads busy `prefetch` and `transform` CPU seconds over TRAINING s of training, its solver
    thread 0.5 s; the process's CPU their sum."""
    return Record(f"{name}-s{member}", "imagenet", "lmdb", "warm", status="ok", returncode=0, au=0.8,
                  iterations=ITERATIONS, iterations_setting=ITERATIONS, startup_seconds=3.0,
                  initial_test_seconds=0.0, solver_seconds=TRAINING, environment={"cpu_cores": 2},
                  read_options=options, concurrent={"group": name, "solvers": n, "member": member},
                  compute={"mode": "emulated", "accelerator": "h100", "ms_per_iteration": MS},
                  process={"cpu_seconds": prefetch + transform + 0.5, "thread_cpu_seconds": {
                      proctrack.PREFETCH: prefetch, proctrack.TRANSFORM: transform, proctrack.SOLVER: 0.5}},
                  **fields)


def group(n, name, options, prefetch, transform=0.0):
    return [solver(name, options, prefetch, transform, n, i) for i in range(n)]


def test_the_cpu_allows_a_solver_as_many_threads_as_it_transformed_on():
    """Each thread delivers 0.6 of what the accelerator needs: one thread cannot feed it (0),
    two can (share 1.2), and four count as two on two cores."""
    seconds = IMAGES / (0.6 * NEEDED)  # the data path's CPU seconds for 0.6 of the need per thread
    n, share = data_path_cpu.cpu_allows([solver("a", None, seconds)])
    assert n == 0 and share == pytest.approx(0.6)
    n, share = data_path_cpu.cpu_allows([solver("b", {"transform_threads": 2}, seconds / 2, seconds / 2)])
    assert share == pytest.approx(1.2) and n == pytest.approx(1.2)
    four = solver("c", {"transform_threads": 4}, seconds / 4, 3 * seconds / 4)
    assert data_path_cpu.cpu_allows([four])[1] == pytest.approx(1.2)


def test_the_capacity_table_says_how_many_threads_could_not_feed_one_accelerator():
    slow = IMAGES / (0.3 * NEEDED)  # 0.3 of the need per thread: two threads deliver 0.6
    assert words.cpu_allows_text([solver("a", None, slow)]) == "0 (one thread: 0.30)"
    assert words.cpu_allows_text([solver("b", {"transform_threads": 2}, slow / 2, slow / 2)]) == "0 (2 threads: 0.60)"


def test_the_stopper_names_the_data_threads_and_how_many_the_solver_had():
    two = {"transform_threads": 2}
    # the prefetch thread and its pool thread each 95% busy over 10 s of training; 60% at N = 1
    held, failed = group(1, "a", two, 6.0, 6.0), group(2, "b", two, 9.5, 9.5)
    assert stoppers.stopped_by(failed, held=held) == "data threads (prefetch 95% at 2, 60% at 1, 2 threads)"


def test_the_committed_runs_bear_the_prediction_out():
    """ImageNet LMDB warm at an emulated 30 ms per iteration (the catalogue's transform-threads runs):
    one transform thread fell short (AU < 0.90) and the CPU figure allows 0; two held, and it
    allows at least one solver."""
    runs = [r for r in load(catalogue.tracked_records("ci-2core-transform-threads"))
            if r.dataset == "imagenet" and r.ok and r.cache == "warm" and r.compute.get("accelerator") == "30ms"]
    for threads, fed in ((1, False), (2, True)):
        mine = [r for r in runs if (r.read_options or {}).get("transform_threads", 1) == threads]
        assert mine and all((r.au >= data_path_cpu.THRESHOLD) == fed for r in mine), (threads, [r.au for r in mine])
        n, share = data_path_cpu.cpu_allows(mine)
        assert (n >= 1, share >= 1) == (fed, fed), (threads, n, share)


def test_the_benchmark_tables_show_how_busy_the_prefetch_thread_was_and_the_other_load(tmp_path):
    """Three runs at each thread count: the prefetch thread 78-84% busy alone, 58-62% with a pool
    thread beside it (the pool thread 40% busy, so the two 49-51% each). The host's monitor saw
    70% of the two cores busy over each 13 s run: what the run's own CPU does not account for is
    other load (8.3 CPU-s of the run's own: 32%, so 38% other)."""
    host = {"wall_seconds": 13.0, "monitor": {"cpu_user_mean": 60.0, "cpu_system_mean": 10.0}}
    for i, busy in enumerate((0.78, 0.84, 0.81)):
        append(tmp_path / "imagenet" / "records.jsonl",
               solver(f"one{i}", {"transform_threads": 1}, busy * TRAINING, **host))
    for i, busy in enumerate((0.62, 0.58, 0.60)):
        append(tmp_path / "imagenet" / "records.jsonl",
               solver(f"two{i}", {"transform_threads": 2}, busy * TRAINING, 0.4 * TRAINING, **host))
    a = argparse.Namespace(backend="lmdb", cache="warm", accelerator="h100", iters=ITERATIONS, out=tmp_path)
    rows = decode_threads.report(a, ["imagenet"], [1, 2]).splitlines()
    assert "| imagenet | 1 | 81% (78-84%) | 81% (78-84%) | 37% (36-38%) |" in rows, rows
    assert "| imagenet | 2 | 60% (58-62%) | 50% (49-51%) | 30% (29-30%) |" in rows, rows
    assert max(row.count("|") for row in rows) - 1 <= 6  # docs' tables: at most 6 columns
