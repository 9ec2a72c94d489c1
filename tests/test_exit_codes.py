"""What run.py, the matrix and the capacity sweep say when a run goes wrong, on real Caffe runs of
tiny data: one run.py at a time per user from deciding what is recorded to the last cell (two
run.py of one cell record it once; a preparation waits for a training), everything after
training guarded (the record is written whatever else fails), and exit statuses that say what
happened (experiments/exit_codes.py): 3 a stall, 4 an internal error with its log named."""
import os
import shutil
import subprocess
import sys
import time

import pytest

from benchmarks import capacity as sweep
from conftest import ROOT, ended_within, given_up
from data_prep import backends
from data_prep.backends import lmdb_store
from experiments import exit_codes, matrix, run, runner, training
from experiments.config import RunConfig
from experiments.record import recorded
from test_claims_run_lock import line_with


class LMDBCopy(lmdb_store.LMDBBackend):
    """LMDB under another name, its artifact a copy of mnist_small's."""
    name, label = "lmdb-copy", "LMDB, a copy"

    def paths(self, dest, phase):
        return [dest / f"{phase}_lmdb"]


class LMDBStalling(LMDBCopy):
    """A solver that never logs a line nor uses CPU: a reader waiting for data that never comes."""
    name, label = "lmdb-stalling", "LMDB, its solver stalling"

    def train_command(self, solver, dest, dataset, gpu):
        return ["sleep", "60"]


class LMDBBroken(LMDBCopy):
    """A fault of this code between the cache and the training: an internal error."""
    name, label = "lmdb-broken", "LMDB, its command a bug"

    def train_command(self, solver, dest, dataset, gpu):
        raise KeyError("a bug in train_command")


class LMDBNoSolver(LMDBCopy):
    """Real Caffe given a solver file that is not there: it dies within a fraction of a second."""
    name, label = "lmdb-nosolver", "LMDB, Caffe dying at once"

    def train_command(self, solver, dest, dataset, gpu):
        return super().train_command(solver.parent / "absent.prototxt", dest, dataset, gpu)


class LMDBDyingAtOnce(LMDBCopy):
    """A solver that exits within milliseconds (a binary that cannot load, say): before a sampler
    started beside it could have set up its SIGTERM handler."""
    name, label = "lmdb-dying", "LMDB, its solver dying at once"

    def train_command(self, solver, dest, dataset, gpu):
        return ["sh", "-c", "exit 1"]


def registered(monkeypatch, mnist_small, data, *kinds, alone=False):
    """The backends `kinds` registered (alone: the only ones), each with a copy of mnist_small's LMDB."""
    if alone:
        monkeypatch.setattr(backends, "REGISTRY", dict(backends.REGISTRY))
        backends.REGISTRY.clear()
    for kind in kinds:
        monkeypatch.setitem(backends.REGISTRY, kind.name, kind())
        shutil.copytree(mnist_small / "lmdb", data / "mnist" / kind.name)


def flags(tmp_path):
    return ["--iters", "20", "--accelerator", "1ms", "--quiet", "--data", str(tmp_path / "data"),
            "--out", str(tmp_path / "out")]


@pytest.fixture
def own_lock(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "LOCK", tmp_path / "run.lock")


@pytest.fixture
def quick_stall(monkeypatch):
    monkeypatch.setattr(training, "STALL_SECONDS", 2.0)


def run_py(mnist_small, out, lock, *args, dataset="mnist", data=None):
    argv = [sys.executable, str(ROOT / "experiments" / "run.py"), dataset, "lmdb", "warm", "--accelerator", "5ms",
            "--data", str(data or mnist_small.parent), "--out", str(out), "--quiet", *args]
    return subprocess.Popen(argv, env=dict(os.environ, IMGSTORE_LOCK=str(lock)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def test_two_run_py_of_one_cell_started_together_record_it_once(mnist_small, tmp_path):
    lock, out = tmp_path / "run.lock", tmp_path / "out"
    both = [run_py(mnist_small, out, lock, "--iters", "20") for _ in range(2)]
    try:
        said = [ended_within(p, "a run.py's end", 300)[1] for p in both]
    finally:
        for p in both:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    assert [p.returncode for p in both] == [0, 0], said
    assert len(recorded(out, "mnist")) == 1, said
    assert sum("mnist lmdb warm (repeat 0): already recorded" in err for err in said) == 1, said


def test_a_preparation_started_while_a_run_trains_waits_for_it(mnist_small, tmp_path):
    lock = tmp_path / "run.lock"
    first = run_py(mnist_small, tmp_path / "first", lock, "--iters", "200")
    second = None
    try:
        deadline = time.monotonic() + 120
        while not (lock.exists() and lock.read_text().startswith(f"pid {first.pid},")):
            if first.poll() is not None or time.monotonic() > deadline:
                given_up(first, f"the first run holding the run lock within 120 s (exit status {first.returncode})")
            time.sleep(0.1)
        os.kill(first.pid, 19)  # SIGSTOP: held while the second starts, however fast the first would train
        fresh = tmp_path / "fresh-data"
        fresh.mkdir()
        second = run_py(mnist_small, tmp_path / "second", lock, "--iters", "10", "--count", "200",
                        dataset="cifar10", data=fresh)
        waiting = line_with(second, "waiting for the run lock", 60)
        assert f"(pid {first.pid}, " in waiting, waiting
        time.sleep(2)  # what an unlocked preparation would have begun by now
        assert not (fresh / "cifar10").exists() and second.poll() is None
        os.kill(first.pid, 18)  # SIGCONT
        first_err = ended_within(first, "the first run's end", 300)[1]
        assert first.returncode == 0, first_err[-3000:]
        second_err = ended_within(second, "the second run's end", 600)[1]
        assert second.returncode == 0, second_err[-3000:]
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    first_recorded = (tmp_path / "first" / "mnist" / "records.jsonl").stat().st_mtime
    prepared = [f.stat().st_mtime for f in (tmp_path / "fresh-data" / "cifar10").rglob("*") if f.is_file()]
    assert prepared and min(prepared) >= first_recorded


def test_a_monitor_that_never_started_leaves_the_record_with_its_error(mnist_small, tmp_path, own_lock):
    """The sampler refuses its interval and exits at its start: no monitor.csv, whose summary is
    then a measurement error, and the run is recorded with everything else."""
    config = RunConfig("mnist", "lmdb", "warm", iters=20, cpu=True, accelerator="1ms", data=str(mnist_small.parent),
                       out=str(tmp_path), quiet=True)
    said = []
    r = runner.run(config, log=said.append, monitor_interval=0)
    assert r.ok and r.au is not None and r.monitor is None
    assert "no monitor CSV" in r.measurement_errors["monitor"], r.measurement_errors
    assert [r.run_id] == [x.run_id for x in recorded(tmp_path, "mnist")]
    assert any("the monitor (monitor/sampler.py) exited at its start" in line for line in said), said


@pytest.mark.parametrize("kind", [LMDBDyingAtOnce, LMDBNoSolver])
def test_a_solver_dying_at_once_is_recorded_with_its_monitor(mnist_small, tmp_path, monkeypatch, own_lock, capsys,
                                                             kind):
    """A solver that dies within milliseconds, and real Caffe that dies at its start: the monitor,
    started before it, still writes its CSV (the training waits for the sampler's header), and the
    failed run is recorded."""
    registered(monkeypatch, mnist_small, tmp_path / "data", kind)
    rc = run.main(["mnist", kind.name, "warm", *flags(tmp_path)])
    err = capsys.readouterr().err
    assert rc == exit_codes.SOLVERS_FAILED, err
    [r] = recorded(tmp_path / "out", "mnist")
    assert r.status == "failed" and r.returncode != 0
    assert r.monitor is not None and "monitor" not in (r.measurement_errors or {}), r.measurement_errors
    assert (tmp_path / "out" / r.run_dir / "monitor.csv").read_text().startswith("t,cpu_user")


@pytest.mark.parametrize("solvers", [1, 2])
def test_a_record_that_cannot_be_written_exits_4_and_keeps_the_run_folder(mnist_small, tmp_path, monkeypatch,
                                                                          own_lock, capsys, solvers):
    """Each solver's record is tried (the second after the first failed), and the run says which were lost."""
    registered(monkeypatch, mnist_small, tmp_path / "data", LMDBCopy)
    (tmp_path / "out" / "mnist" / "records.jsonl").mkdir(parents=True)  # no file can be appended there
    rc = run.main(["mnist", LMDBCopy.name, "warm", "--concurrent", str(solvers), *flags(tmp_path)])
    err = capsys.readouterr().err
    assert rc == exit_codes.INTERNAL == 4, err
    assert f"error: {solvers} of {solvers} records not written to" in err and "Is a directory" in err, err
    runs = list((tmp_path / "out" / "mnist" / "runs").iterdir())
    assert len(runs) == solvers and all(f"the record of {d.name} was not written" in err for d in runs), err


def test_run_py_stalled_exits_3_and_says_the_failed_cells_before_it(mnist_small, tmp_path, monkeypatch, own_lock,
                                                                   quick_stall, capsys):
    """A cell that failed, then one that stalled: exit 3 (the worse), and the failure said too."""
    registered(monkeypatch, mnist_small, tmp_path / "data", LMDBNoSolver, LMDBStalling)
    rc = run.main(["mnist", f"{LMDBNoSolver.name},{LMDBStalling.name}", "warm", *flags(tmp_path)])
    err = capsys.readouterr().err
    assert rc == exit_codes.STALLED == 3, err
    assert f"error: 1 of 1 solvers failed ({LMDBNoSolver.name} warm)" in err
    assert "error: no training process wrote a log line or used CPU for" in err


def test_matrix_stalled_exits_3(mnist_small, tmp_path, monkeypatch, own_lock, quick_stall, capsys):
    registered(monkeypatch, mnist_small, tmp_path / "data", LMDBStalling, alone=True)
    rc = matrix.main(["mnist-quick", *flags(tmp_path)])
    assert rc == exit_codes.STALLED, capsys.readouterr().err


def test_capacity_sweep_stalled_exits_3_naming_the_backend(mnist_small, tmp_path, monkeypatch, own_lock,
                                                           quick_stall, capsys):
    registered(monkeypatch, mnist_small, tmp_path / "data", LMDBStalling)
    rc = sweep.main(["mnist", LMDBStalling.name, "warm", "--max", "1", "--confirm", "1", *flags(tmp_path)])
    out, err = capsys.readouterr()
    assert rc == exit_codes.STALLED, err
    assert f"| {LMDBStalling.name} | not swept: its run stalled or timed out" in out, out


def internal_error_said(err, out):
    """The one line naming the traceback's log, which holds it; no traceback on stderr."""
    [line] = [x for x in err.splitlines() if x.startswith("internal error: KeyError: 'a bug in train_command'")]
    [log] = list((out / "mnist").glob("internal-error-*.log"))
    assert f"its traceback is in {log}" in line
    assert "Traceback (most recent call last)" in log.read_text() and "train_command" in log.read_text()
    assert "Traceback" not in err


def test_run_py_internal_error_exits_4_naming_its_log(mnist_small, tmp_path, monkeypatch, own_lock, capsys):
    registered(monkeypatch, mnist_small, tmp_path / "data", LMDBBroken)
    rc = run.main(["mnist", LMDBBroken.name, "warm", *flags(tmp_path)])
    err = capsys.readouterr().err
    assert rc == exit_codes.INTERNAL, err
    internal_error_said(err, tmp_path / "out")


def test_matrix_internal_error_exits_4_naming_its_log(mnist_small, tmp_path, monkeypatch, own_lock, capsys):
    registered(monkeypatch, mnist_small, tmp_path / "data", LMDBBroken, alone=True)
    rc = matrix.main(["mnist-quick", *flags(tmp_path)])
    err = capsys.readouterr().err
    assert rc == exit_codes.INTERNAL, err
    internal_error_said(err, tmp_path / "out")


def test_capacity_sweep_internal_error_exits_4_naming_its_log(mnist_small, tmp_path, monkeypatch, own_lock, capsys):
    registered(monkeypatch, mnist_small, tmp_path / "data", LMDBBroken)
    rc = sweep.main(["mnist", LMDBBroken.name, "warm", "--max", "1", "--confirm", "1", *flags(tmp_path)])
    out, err = capsys.readouterr()
    assert rc == exit_codes.INTERNAL, err
    internal_error_said(err, tmp_path / "out")
    assert f"| {LMDBBroken.name} | not swept: an internal error" in out, out


def test_the_worst_outcome_wins():
    assert exit_codes.worst() == 0
    assert exit_codes.worst(1, 3, 0) == 3 and exit_codes.worst(3, 2) == 2 and exit_codes.worst(2, 4) == 4
    assert exit_codes.worst(4, 130, 1) == 130


def test_the_run_lock_is_reentrant_within_a_process(tmp_path, own_lock):
    """run.py holds it across its plan and run_group takes it again per cell: no deadlock, and
    it is free once the outermost hold ends."""
    import fcntl
    with runner.run_lock(print), runner.run_lock(print):
        pass
    with open(tmp_path / "run.lock") as f:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if still held


def test_a_forked_worker_does_not_keep_the_run_lock(tmp_path, own_lock):
    """A preparation's worker processes (forked under the lock) outliving the run do not hold it."""
    import fcntl
    started, said = os.pipe()
    with runner.run_lock(print):
        child = os.fork()
        if child == 0:  # past the fork's hooks: it runs as a worker would
            os.write(said, b"up")
            time.sleep(30)
            os._exit(0)
    try:
        assert os.read(started, 2) == b"up"
        with open(tmp_path / "run.lock") as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError while the child holds it
    finally:
        os.kill(child, 9)
        os.waitpid(child, 0)
        os.close(started)
        os.close(said)


@pytest.mark.timeout(120)  # a refusal that waited for the lock would wait for the holder's 60 s and more
def test_bad_input_is_refused_at_once_while_another_run_holds_the_lock(tmp_path, own_lock, capsys):
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'w'); "
                               "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
                               str(tmp_path / "run.lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        started = time.monotonic()
        rc = run.main(["mnist", "lmdb", "warm", "--concurrent", "0", "--out", str(tmp_path / "out")])
        assert rc == exit_codes.REFUSED and time.monotonic() - started < 30
        err = capsys.readouterr().err
        assert "--concurrent must be at least 1" in err and "waiting for the run lock" not in err
    finally:
        holder.kill()
        holder.wait(timeout=10)
