"""What stopped a capacity sweep at N + 1 (analysis/stoppers.stopped_by): each class is named
only by a figure that crossed its threshold at the N that failed and not at the N that held,
and refused where the same figure stood at both. Records are built with their figures set
(and, for the host's CPU and the device's busy time, the group's monitor.csv in its run folder),
so nothing here depends on the host's speed."""
import csv
import dataclasses
import signal

import pytest

from analysis import capacity_measures as measures
from analysis import capacity_stoppers as stoppers
from analysis import capacity_words as words
from experiments import data_path_cpu, proctrack
from experiments.record import Record

START_UP, TRAINING = 3.0, 10.0  # seconds: each solver's start-up, then its training


def group(n, name, results=None, cpu=None, busy=None, startup_cpu=100.0, backend="lmdb", requests=None, **fields):
    """The records of one run of n solvers (the emulated H100, LeNet), trained START_UP ..
    START_UP + TRAINING s after the group started; with `results`, its monitor.csv: the host's
    CPU % `startup_cpu` during the start-up and `cpu` during training, the device `busy`, and
    (requests: (per second in start-up, in training)) the device's read requests."""
    base = dict(status="ok", returncode=0, au=0.8, iterations=1000, iterations_setting=1000,
                startup_seconds=START_UP, initial_test_seconds=0.0, solver_seconds=TRAINING,
                wall_seconds=START_UP + TRAINING + 0.5, environment={"cpu_cores": 2},
                compute={"mode": "emulated", "ms_per_iteration": 1.0471})
    base.update(fields)
    records = [Record(f"{name}-s{i}", "mnist", backend, "warm", run_dir=f"mnist/runs/{name}-s{i}",
                      concurrent={"group": name, "solvers": n, "member": i}, **base) for i in range(n)]
    if results is not None and cpu is not None:
        folder = results / records[0].run_dir
        folder.mkdir(parents=True)
        with open(folder / "monitor.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["t", "cpu_user", "cpu_system", "cpu_iowait", "cpu_idle", "device_busy", "read_requests"])
            for t in range(1, int(START_UP + TRAINING) + 2):
                used = startup_cpu if t <= START_UP else cpu
                reads = requests[t > START_UP] if requests else 0
                w.writerow([float(t), used * 0.8, used * 0.2, 0.0, 100 - used, busy if busy is not None else "", reads])
    return records


def threads(prefetch, **more):
    return {"thread_cpu_seconds": {proctrack.PREFETCH: prefetch * TRAINING, proctrack.SOLVER: 0.5, **more}}


def own(share, n):
    """A process's CPU seconds that make n solvers' own CPU `share` of 2 cores over the run."""
    return share * (START_UP + TRAINING + 0.5) * 2 / n


def test_one_thread_is_named_where_it_ran_out_at_n_and_not_at_the_n_that_held():
    held, failed = group(3, "a", process=threads(0.70)), group(4, "b", process=threads(0.97))
    assert stoppers.stopped_by(failed, held=held) == "one thread (prefetch 97% at 4, 70% at 3, 1 thread)"
    same = group(3, "c", process=threads(0.97))
    assert stoppers.stopped_by(failed, held=same).startswith("not found (thread 97% at 4, 97% at 3, 1 thread")


def on_solver(share, prefetch=0.0):
    """thread_cpu_seconds of a solver whose main thread was busy `share` of its training."""
    return {"thread_cpu_seconds": {proctrack.PREFETCH: prefetch * TRAINING, proctrack.SOLVER: share * TRAINING}}


@pytest.mark.parametrize("backend, layer", [("hdf5", "HDF5Data"), ("pymem", "MemoryData")])
def test_one_thread_is_named_on_the_solver_thread_where_its_layer_reads_there(backend, layer):
    """HDF5Data and MemoryData read on the solver thread: its share names the class, at N + 1
    and not at the N that held, and no thread count is given (it is the solver's one)."""
    held = group(3, "a", backend=backend, process=on_solver(0.70))
    failed = group(4, "b", backend=backend, process=on_solver(0.97))
    assert stoppers.stopped_by(failed, held=held) == f"one thread (solver thread, {layer} 97% at 4, 70% at 3)"
    same = group(3, "c", backend=backend, process=on_solver(0.97))
    assert stoppers.stopped_by(failed, held=same).startswith("not found (thread 97% at 4, 97% at 3; ")


def test_the_solver_thread_is_not_named_on_the_wrong_threads_evidence():
    """The wrong evidence refused: HDF5Data's prefetch thread busy (it reads nothing there) with
    the solver thread idle; a Data layer's solver thread busy (its compute, not its data). One
    and two solvers, so that the busy threads leave the cores under their threshold."""
    held = group(1, "a", backend="hdf5", process=on_solver(0.05, prefetch=0.70))
    failed = group(2, "b", backend="hdf5", process=on_solver(0.05, prefetch=0.97))
    assert stoppers.stopped_by(failed, held=held) == "not found (thread 5% at 2, 5% at 1; cores 76% at 2, 28% at 1)"
    held = group(1, "c", process=on_solver(0.70, prefetch=0.1))
    failed = group(2, "d", process=on_solver(0.97, prefetch=0.1))
    assert stoppers.stopped_by(failed, held=held) == \
        "not found (thread 10% at 2, 10% at 1, 1 thread; cores 79% at 2, 30% at 1)"


def test_data_threads_say_how_many_threads_the_solver_had():
    two = {"read_options": {"decode_threads": 2}, "backend": "images"}
    held = group(1, "a", process={"thread_cpu_seconds": {proctrack.PREFETCH: 6.0, proctrack.DECODE: 6.0}}, **two)
    failed = group(2, "b", process={"thread_cpu_seconds": {proctrack.PREFETCH: 9.5, proctrack.DECODE: 9.5}}, **two)
    # the prefetch thread and the one decode thread each 95% busy over 10 s of training; 60% at N = 1
    assert stoppers.stopped_by(failed, held=held) == "data threads (prefetch 95% at 2, 60% at 1, 2 threads)"


def transform_pool(prefetch, each, threads=3):
    """A Data layer with a transform pool (--transform-threads): the prefetch thread busy
    `prefetch` of the training, and each of the other threads - 1 busy `each`; on 8 cores, so that
    the cores stay under their threshold."""
    return dict(read_options={"transform_threads": threads}, environment={"cpu_cores": 8}, process={"thread_cpu_seconds": {
        proctrack.PREFETCH: prefetch * TRAINING, proctrack.TRANSFORM: each * (threads - 1) * TRAINING,
        proctrack.SOLVER: 0.5}})


def test_the_busiest_data_thread_decides_not_their_average():
    """Three data threads: at N + 1 the prefetch thread at 92% beside two transform threads at 45%
    (61% on average, under the threshold) ran out; at N it was at 70%. The transform threads' own
    figure names them where they are the busiest; a prefetch thread as busy at N names none."""
    held, failed = group(1, "a", **transform_pool(0.70, 0.40)), group(2, "b", **transform_pool(0.92, 0.45))
    assert stoppers.stopped_by(failed, held=held) == "data threads (prefetch 92% at 2, 70% at 1, 3 threads)"
    pool = group(2, "c", **transform_pool(0.50, 0.90))
    assert stoppers.stopped_by(pool, held=held) == \
        "data threads (each transform thread 90% at 2, 70% at 1, 3 threads)"
    same = group(1, "d", **transform_pool(0.92, 0.45))
    assert stoppers.stopped_by(failed, held=same).startswith(
        "not found (prefetch thread 92% at 2, 92% at 1, 3 threads; ")


def test_a_solver_with_two_data_threads_is_allowed_two_threads_worth():
    """cpu_allows: a solver whose one thread delivers 0.6 of what its accelerator needs cannot
    feed it alone (0), but two such threads can (share 1.2, capped by the cores)."""
    rate = 0.6 * 0.9 * 64 * 1000 / 1.0471  # images per CPU second: 0.6 of what 0.90 of an H100 eats
    seconds = 1000 * 64 / rate

    def run(options, prefetch, decode=0.0):
        return [Record("s0", "mnist", "images", "warm", status="ok", returncode=0, au=0.5, iterations_setting=1000,
                       solver_seconds=TRAINING, environment={"cpu_cores": 2}, read_options=options,
                       compute={"mode": "emulated", "ms_per_iteration": 1.0471},
                       process={"thread_cpu_seconds": {proctrack.PREFETCH: prefetch, proctrack.DECODE: decode}})]
    n, share = data_path_cpu.cpu_allows(run(None, seconds))
    assert n == 0 and share == pytest.approx(0.6)
    n, share = data_path_cpu.cpu_allows(run({"decode_threads": 2}, seconds / 2, seconds / 2))
    assert share == pytest.approx(1.2) and n > 0
    four = run({"decode_threads": 4}, seconds / 4, 3 * seconds / 4)
    assert data_path_cpu.cpu_allows(four)[1] == pytest.approx(1.2)  # four threads, two cores
    assert words.cpu_allows_text(run({"decode_threads": 2}, seconds, seconds)) == "0 (2 threads: 0.60)"


def test_all_cores_is_named_only_where_they_were_not_as_busy_at_the_n_that_held(tmp_path):
    held = group(3, "a", tmp_path, cpu=70.0, process={**threads(0.1), "cpu_seconds": own(0.70, 3)})
    failed = group(4, "b", tmp_path, cpu=97.0, process={**threads(0.1), "cpu_seconds": own(0.97, 4)})
    assert stoppers.stopped_by(failed, tmp_path, held) == "all cores (97% at 4, 70% at 3)"
    same = group(3, "c", tmp_path, cpu=97.0, process={**threads(0.1), "cpu_seconds": own(0.97, 3)})
    assert stoppers.stopped_by(failed, tmp_path, same) == "not found (thread 10% at 4, 10% at 3, 1 thread; " \
                                                         "cores 97% at 4, 97% at 3)"


def test_the_cores_are_judged_in_the_training_window_where_the_record_keeps_its_cpu():
    """Each solver's CPU in its training window (Record.training_cpu_seconds) decides, not its
    whole run's: a start-up that kept the cores busy (the same whole-run CPU at both N) does not
    hide that the training's CPU crossed the threshold at N + 1 only; an older record without the
    field is judged over its run, start-up included."""
    def run(n, name, training_share, whole_share=0.95):
        return group(n, name, process={**threads(0.1), "cpu_seconds": own(whole_share, n)},
                     training_cpu_seconds=training_share * TRAINING * 2 / n)
    held, failed = run(3, "a", 0.60), run(4, "b", 0.92)
    assert stoppers.stopped_by(failed, held=held) == "all cores (92% at 4, 60% at 3)"
    older = [dataclasses.replace(r, training_cpu_seconds=None) for r in held + failed]
    assert measures.figures_of(older[3:]).cores == pytest.approx(0.95)
    assert stoppers.stopped_by(older[3:], held=older[:3]).startswith("not found (")


def test_the_cpu_measure_is_the_processes_own_with_the_monitors_shown_where_they_disagree(tmp_path):
    """The host's monitor counts every process on the host: other users' load kept it at 100%
    while the solvers used 20% of the cores; no stopper, both figures shown."""
    held = group(3, "a", tmp_path, cpu=100.0, process={**threads(0.05), "cpu_seconds": own(0.18, 3)})
    failed = group(4, "b", tmp_path, cpu=100.0, process={**threads(0.05), "cpu_seconds": own(0.20, 4)})
    assert stoppers.stopped_by(failed, tmp_path, held) == (
        "not found (thread 5% at 4, 5% at 3, 1 thread; cores 20% at 4, 18% at 3; "
        "the host monitor's CPU in training 100% at 4, 100% at 3)")
    busy = group(5, "c", tmp_path, cpu=60.0, process={**threads(0.05), "cpu_seconds": own(0.95, 5)})
    assert stoppers.stopped_by(busy, tmp_path, failed) == (
        "all cores (the host monitor's 60% in training; the processes' own 95% at 5, 20% at 4)")


def test_memory_names_the_runs_it_happened_in_where_not_most():
    def with_kill(n, name, killed):
        records = group(n, name)
        return [dataclasses.replace(r, status="failed", returncode=-signal.SIGKILL, au=None) if i < killed else r
                for i, r in enumerate(records)]
    runs = with_kill(3, "a", 1) + with_kill(3, "b", 0) + with_kill(3, "c", 0)
    assert stoppers.stopped_by(runs) == "memory (OOM killer: 1 of 9 solvers, in 1 of 3 runs)"
    runs = with_kill(3, "a", 1) + with_kill(3, "b", 2) + with_kill(3, "c", 0)
    assert stoppers.stopped_by(runs) == "memory (OOM killer: 3 of 9 solvers)"


def test_a_lock_is_named_from_the_solvers_logs(tmp_path):
    records = group(2, "a")
    records[1] = dataclasses.replace(records[1], status="failed", returncode=1, au=None)
    log = tmp_path / records[1].run_dir / "caffe.log"
    log.parent.mkdir(parents=True)
    log.write_text("F1125 12:00:00.000 db_leveldb.cpp:16] Check failed: status.ok() Failed to open leveldb x\n")
    assert stoppers.stopped_by(records, tmp_path, group(1, "h")) == "a lock (LevelDB's: 1 of 2 solvers refused)"


def test_the_page_cache_is_named_where_the_data_left_it():
    def cached(n, name, resident, read_bytes):
        return group(n, name, cache_resident_fraction_after=resident, monitor={"read_bytes_total": read_bytes})
    held = cached(3, "a", 0.99, 64 * 1024 * 3000.0)
    assert stoppers.stopped_by(cached(4, "b", 0.55, 64 * 1024 * 40000.0), held=held).startswith("memory (page cache:")
    assert not stoppers.stopped_by(cached(4, "c", 0.99, 64 * 1024 * 4000.0), held=held).startswith("memory")


def paced(n, name, ios, training_share=1.0):
    """A run under a 100 IOPS limit that paced `ios` reads, `training_share` of its bytes read in training."""
    process = {**threads(0.1), "read_bytes": 1000, "read_bytes_training": int(1000 * training_share)}
    return group(n, name, limits={"riops": 100, "throttled_reads": {"read_ios": ios}}, process=process)


def test_storage_iops_is_judged_in_the_training_window_not_over_the_wall_time():
    held = paced(3, "a", 700)            # 70 reads/s in training
    failed = paced(4, "b", 950)          # 95 reads/s
    assert stoppers.stopped_by(failed, held=held) == "storage (IOPS limit, 95% at 4, 70% at 3)"
    # the same reads, half of them at start-up: 47.5 reads/s in training, no stopper
    assert stoppers.stopped_by(paced(4, "c", 950, 0.5), held=held).startswith("not found")
    assert stoppers.stopped_by(failed, held=paced(3, "d", 940)).startswith("not found")  # as paced at N - 1


def test_storage_device_busy_is_named_from_the_windows_samples(tmp_path):
    held = group(3, "a", tmp_path, cpu=30.0, busy=0.5, process=threads(0.1))
    failed = group(4, "b", tmp_path, cpu=30.0, busy=0.96, process=threads(0.1))
    assert stoppers.stopped_by(failed, tmp_path, held) == "storage (device busy 96% at 4, 50% at 3)"
    same = group(3, "c", tmp_path, cpu=30.0, busy=0.96, process=threads(0.1))
    assert "device 96% at 4, 96% at 3" in stoppers.stopped_by(failed, tmp_path, same)


def test_the_servers_are_named_when_a_node_ran_out_of_its_core():
    def served(n, name, node_cpu):
        return group(n, name, process=threads(0.1), location={"kind": "redis", "servers": {
            "n1": {"cpu_seconds": node_cpu * TRAINING}, "n2": {"cpu_seconds": 1.0}}})
    assert stoppers.stopped_by(served(4, "b", 0.9), held=served(3, "a", 0.6)) == \
        "the servers (a Redis node 90% at 4, 60% at 3)"
    assert stoppers.stopped_by(served(4, "b", 0.9), held=served(3, "c", 0.88)).startswith("not found")


def test_host_device_copies_are_never_named_without_a_measured_share():
    """HDF5 reads on the solver thread, which was not busy; the copies are emulated and no record
    measures their share of the solver's time: not found, with the figures."""
    records = group(1, "a", backend="hdf5", process={"thread_cpu_seconds": {proctrack.SOLVER: 2.0}},
                    compute={"mode": "emulated", "ms_per_iteration": 1.0471, "host_copy_latency_us": 7.5})
    assert stoppers.stopped_by(records, held=[]) == "not found (thread 20%; cores 7%)"


def test_not_found_gives_each_figure_at_both_ns(tmp_path):
    held = group(3, "a", tmp_path, cpu=50.0, process={**threads(0.2), "cpu_seconds": own(0.5, 3)})
    failed = group(4, "b", tmp_path, cpu=55.0, process={**threads(0.25), "cpu_seconds": own(0.55, 4)})
    assert stoppers.stopped_by(failed, tmp_path, held) == \
        "not found (thread 25% at 4, 20% at 3, 1 thread; cores 55% at 4, 50% at 3)"


@pytest.mark.parametrize("build", [
    lambda n, name, results: group(n, name, process=threads(0.97)),
    lambda n, name, results: group(n, name, results, cpu=97.0, process={**threads(0.1), "cpu_seconds": own(0.97, n)}),
    lambda n, name, results: paced(n, name, 950),
    lambda n, name, results: group(n, name, results, cpu=30.0, busy=0.96, process=threads(0.1)),
    lambda n, name, results: group(n, name, process=threads(0.1), location={"kind": "redis", "servers": {
        "n1": {"cpu_seconds": 0.9 * TRAINING}}}),
], ids=["one-thread", "cores", "storage-iops", "storage-device", "servers"])
def test_a_figure_as_high_at_the_n_that_held_names_no_class(tmp_path, build):
    """Over its threshold at N + 1, but as high at N, which held: it does not say why N + 1 failed."""
    assert stoppers.stopped_by(build(4, "b", tmp_path), tmp_path, build(3, "a", tmp_path)).startswith("not found (")


def test_an_au_in_percent_is_printed_with_the_digits_that_decide_it():
    """analysis/answer.py prints AU in percent: 0.8954 failed 0.90 and must not read "90%"."""
    assert [words.au_percent(a) for a in (0.8954, 0.89996, 0.95, 0.9, 0.9004, 0.57)] == [
        "89.5%", "89.996%", "95%", "90%", "90%", "57%"]


def test_storage_iops_is_judged_on_the_monitors_reads_in_the_training_window(tmp_path):
    """At start-up the solvers read 300 requests/s (the test pass, the first batches); what
    counts is the training: 70/s at N, 97/s at N + 1 under a 100 IOPS limit."""
    def run(n, name, startup, training):
        seconds = {True: TRAINING + 1, False: START_UP}  # the rows the monitor.csv holds of each
        total = startup * seconds[False] + training * seconds[True]
        return group(n, name, tmp_path, cpu=30.0, requests=(startup, training), process=threads(0.1),
                     limits={"riops": 100, "throttled_reads": {"read_ios": total}},
                     monitor={"read_requests_total": total})
    held, failed = run(3, "a", 300, 70), run(4, "b", 300, 97)
    assert stoppers.stopped_by(failed, tmp_path, held) == "storage (IOPS limit, 97% at 4, 70% at 3)"
    assert stoppers.stopped_by(run(4, "c", 300, 40), tmp_path, held).startswith("not found")


def say(failed, held=None, results=None):
    """The verdict a table's "stopped by" cell shows for these runs."""
    return words.verdict(stoppers.judge(failed, results, held))


def test_the_verdict_is_a_few_words_and_its_figures_stay_behind_it(tmp_path):
    """A person reads what stopped an N in a few words with its one figure; the figures at both N
    are the stopper's own (stopped_by), for the table under the cells."""
    held, failed = group(3, "a", process=threads(0.70)), group(4, "b", process=threads(1.0))
    assert say(failed, held) == "one thread: the prefetch thread (100%)"
    assert stoppers.judge(failed, None, held).figures == "one thread (prefetch 100% at 4, 70% at 3, 1 thread)"
    pool = {"thread_cpu_seconds": {proctrack.PREFETCH: 2.0, proctrack.DECODE: 0.97 * TRAINING * 3}}
    assert say(group(4, "p", read_options={"decode_threads": 4}, process=pool),
               group(3, "q", read_options={"decode_threads": 4}, process={"thread_cpu_seconds": {
                   proctrack.PREFETCH: 2.0, proctrack.DECODE: 0.5 * TRAINING * 3}})) == "data threads: each decode thread (97%)"
    cores = group(4, "c", tmp_path, cpu=96.0, process={**threads(0.1), "cpu_seconds": own(0.96, 4)})
    calm = group(3, "d", tmp_path, cpu=60.0, process={**threads(0.1), "cpu_seconds": own(0.60, 3)})
    assert say(cores, calm, tmp_path) == "CPU: both cores busy (96%)"
    busy_too = group(3, "e", tmp_path, cpu=96.0, process={**threads(0.1), "cpu_seconds": own(0.96, 3)})
    assert say(cores, busy_too, tmp_path) == "no clear cause (both cores busy, 96%, as at the N before)"
    idle = group(4, "f", tmp_path, cpu=30.0, process={**threads(0.2), "cpu_seconds": own(0.3, 4)})
    assert say(idle, group(3, "g", tmp_path, cpu=25.0, process={**threads(0.2), "cpu_seconds": own(0.25, 3)}),
               tmp_path) == "nothing measured near its limit"
    one_core = group(2, "k", process={**threads(0.1), "cpu_seconds": own(0.96, 2)}, environment={"cpu_cores": 1})
    assert words.cores_words(measures.figures_of(one_core).allowed) == "its one core"
    assert words.cores_words(16) == "all 16 cores"


def test_lost_solvers_are_said_without_their_counts(tmp_path):
    killed = group(3, "a")
    killed[0] = dataclasses.replace(killed[0], status="failed", returncode=-signal.SIGKILL, au=None)
    assert say(killed) == "memory (OOM killer)"
    some = killed + group(3, "b") + group(3, "c")
    assert say(some) == "memory (OOM killer) in some runs"
    assert stoppers.stopped_by(some) == "memory (OOM killer: 1 of 9 solvers, in 1 of 3 runs)"
    refused = group(2, "l")
    refused[1] = dataclasses.replace(refused[1], status="failed", returncode=1, au=None)
    log = tmp_path / refused[1].run_dir / "caffe.log"
    log.parent.mkdir(parents=True)
    log.write_text("F1125 12:00:00.000 db_leveldb.cpp:16] Check failed: status.ok() Failed to open leveldb x\n")
    assert say(refused, group(1, "h"), tmp_path) == "LevelDB's lock"


def test_the_tables_show_the_verdict_in_the_cell_and_its_figures_in_a_table_below():
    from analysis import capacity_tables as tables
    held = [dataclasses.replace(r, au=0.95) for r in group(3, "a", process=threads(0.70))]
    failed = group(4, "b", process=threads(1.0))
    full = tables.table(held + failed)
    cell_row = next(line for line in full.splitlines() if line.startswith("| mnist |"))
    assert cell_row.endswith("| one thread: the prefetch thread (100%) at 4 |")
    assert "| lmdb | warm | one thread: the prefetch thread (100%) at 4 | " \
           "one thread (prefetch 100% at 4, 70% at 3, 1 thread) |" in full
    short = tables.compact(held + failed)
    assert next(line for line in short.splitlines() if line.startswith("| lmdb | 7,")).endswith(
        "| one thread: the prefetch thread (100%) at 4 |")
    assert "| lmdb | warm | one thread: the prefetch thread (100%) at 4 | " \
           "one thread (prefetch 100% at 4, 70% at 3, 1 thread) |" in short


def test_the_run_line_says_what_held_it_up_in_the_tables_words():
    """Record.what_limited (the line under each run) leads with the capacity tables' words, its
    figures after them."""
    def run(prefetch):
        return Record("r", "mnist", "images", "warm", au=0.3, solver_seconds=TRAINING,
                      process={"thread_cpu_seconds": {proctrack.PREFETCH: prefetch * TRAINING}})
    assert run(0.98).what_limited("ImageData").startswith("one thread: the prefetch thread's CPU (busy 98% of ")
    assert run(0.2).what_limited("Data") == \
        "nothing measured near its limit: waiting on the data (the prefetch thread busy 20%)"
