"""docs/faults.md: a waiting run names the pid holding the run lock. Two real run.py processes
with one IMGSTORE_LOCK: the second says it waits, naming the first's pid, and trains only after
the first is done."""
import os
import select
import signal
import subprocess
import sys
import time

from conftest import ROOT, ended_within, given_up


def run_py(mnist_small, out, iters, lock):
    args = [sys.executable, str(ROOT / "experiments" / "run.py"), "mnist", "lmdb", "warm", "--accelerator", "5ms",
            "--iters", str(iters), "--data", str(mnist_small.parent), "--out", str(out), "--quiet"]
    return subprocess.Popen(args, env=dict(os.environ, IMGSTORE_LOCK=str(lock)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def line_with(process, words, timeout):
    """The first line of `process`'s stderr holding `words`, read within `timeout` seconds. Read
    from the pipe itself: select() does not see lines the file object has already buffered (two
    lines written together, the second would wait there unseen)."""
    fd, deadline, text = process.stderr.fileno(), time.monotonic() + timeout, ""
    while time.monotonic() < deadline:
        if select.select([fd], [], [], 0.5)[0]:
            chunk = os.read(fd, 1 << 16)
            assert chunk, f"its stderr ended without {words!r}: {text[-2000:]}"
            text += chunk.decode(errors="replace")
            found = [line for line in text.splitlines(keepends=True) if words in line and line.endswith("\n")]
            if found:
                return found[0]
    raise AssertionError(f"no {words!r} within {timeout} s: {text[-2000:]}")


def first_write(run_out):
    """When the run under `run_out` wrote its first file in its run folder (made once it holds the lock)."""
    run_dir = next(run_out.rglob("caffe.log")).parent
    return min(p.stat().st_mtime for p in run_dir.iterdir())


def test_a_second_run_waits_on_the_lock_naming_the_first_and_trains_after_it(mnist_small, tmp_path):
    lock = tmp_path / "run.lock"
    first = run_py(mnist_small, tmp_path / "first", 200, lock)
    second = None
    try:
        deadline = time.monotonic() + 120
        while not (lock.exists() and lock.read_text().startswith(f"pid {first.pid},")):  # it holds the lock
            if first.poll() is not None or time.monotonic() > deadline:
                given_up(first, f"the first run holding the run lock within 120 s (exit status {first.returncode})")
            time.sleep(0.1)
        os.kill(first.pid, signal.SIGSTOP)  # held while the second asks, however fast the first would train
        second = run_py(mnist_small, tmp_path / "second", 20, lock)
        waiting = line_with(second, "waiting for the run lock", 60)
        assert waiting.startswith(f"waiting for the run lock {lock}: another run is training (pid {first.pid}, "), \
            waiting
        assert "experiments/run.py mnist lmdb warm" in waiting  # the holder's command line
        assert first.poll() is None and second.poll() is None  # the second waits
        os.kill(first.pid, signal.SIGCONT)
        first_err = ended_within(first, "the first run's end", 300)[1]
        assert first.returncode == 0, first_err[-3000:]
        second_err = ended_within(second, "the second run's end", 300)[1]
        assert second.returncode == 0, second_err[-3000:]
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    assert lock.read_text().startswith(f"pid {second.pid},")  # the lock went to the second
    first_recorded = (tmp_path / "first" / "mnist" / "records.jsonl").stat().st_mtime  # under the first's lock
    assert first_write(tmp_path / "second") >= first_recorded
