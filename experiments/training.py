"""The training processes of a run: started in the run's cgroup, watched (their threads'
CPU, their reads at each phase the log shows) until they exit, with a progress line. They
die with the process that started them (a killed run.py leaves none training), and a run whose
processes all make no progress (no log line, no CPU) for STALL_SECONDS is stopped."""
import os
import subprocess
import sys
import time

from experiments import caffe_log, proctrack
from processes import child_setup  # noqa: F401 (runner and hosts take it from here too)

# A stopped or deadlocked solver shows neither; a cold test pass, which logs nothing for
# minutes, still uses CPU for every record it reads.
STALL_SECONDS = float(os.environ.get("IMGSTORE_STALL_SECONDS", "600"))
# how often train_all looks at each run (its log, its CPU and reads): one look at all of them per poll
POLL_SECONDS = 0.5


class Stalled(RuntimeError):
    pass


class Training:
    """One Caffe training process, its log in its run folder, watched until it exits."""

    def __init__(self, cmd, run_dir, env, group):
        self.cmd, self.run_dir, self.started = cmd, run_dir, time.time()
        self.log = open(run_dir / "caffe.log", "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, cwd=run_dir, env=env,
                                     preexec_fn=child_setup(group))
        self.tracker = proctrack.Tracker(self.proc.pid)
        self.process, self.returncode, self.wall = {}, None, None
        self.reads_at = {}  # phase -> the process's read bytes when its log first showed it (caffe_log.phases_begun)
        self._log_read_to = 0
        self._progress_mark, self.progress_at = None, time.time()

    def finished(self, timeout):
        """Samples its threads; True once it has exited (then its counters are read, it is reaped)."""
        if self.returncode is not None:
            return True
        self.tracker.sample()
        self._mark_phases()
        if not self.tracker.wait(timeout):
            return False
        self.process = dict(self.tracker.summary(), **self._reads_by_phase())
        self.returncode = self.proc.wait()
        self.wall = self.tracker.ended_at - self.started
        self.log.close()
        return True

    def note_progress(self):
        """Notes when its log or its CPU time last changed (the stall limit's clock). A process
        stopped by a signal (Ctrl-Z, SIGSTOP, state T) is paused, not stalled: its clock waits."""
        try:
            state, cpu = self._state_and_cpu()
            mark = ((self.run_dir / "caffe.log").stat().st_size, cpu)
        except OSError:
            return
        if mark != self._progress_mark or state == "T":
            self._progress_mark, self.progress_at = mark, time.time()

    def _state_and_cpu(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[11]) + int(fields[12])

    def _mark_phases(self):
        if "training" in self.reads_at:
            return
        with open(self.run_dir / "caffe.log", "rb") as f:
            f.seek(self._log_read_to)
            chunk = f.read()
        complete = chunk.rfind(b"\n") + 1  # a half-written line waits for the next look
        self._log_read_to += complete
        for phase in caffe_log.phases_begun(chunk[:complete].decode(errors="replace")):
            self.reads_at.setdefault(phase, self.tracker.read_bytes())

    def _reads_by_phase(self):
        """The process's reads split at the initial test pass and the first iteration, as sampled
        (every POLL_SECONDS): before the test pass (libraries, net set-up, opening the data), the test
        pass at iteration 0, and training. {} when the log never showed training."""
        total, train = self.tracker.read_bytes(), self.reads_at.get("training")
        if total is None or train is None:
            return {}
        test = self.reads_at.get("initial test", train)
        return {"read_bytes_before_test": test, "read_bytes_initial_test": train - test,
                "read_bytes_training": total - train}

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def train_all(commands, env, group, progress, stall_seconds=None):
    """Start one Training per (command, run folder) at once and watch them until all exit.
    Ctrl-C, a kill or a stall (no log line and no CPU in any of them for stall_seconds)
    stops every one: no orphan is left."""
    stall_seconds = stall_seconds or STALL_SECONDS
    trainings = []
    try:
        for cmd, run_dir in commands:
            trainings.append(Training(cmd, run_dir, env, group))
        while not all([t.finished(POLL_SECONDS / len(trainings)) for t in trainings]):  # a list: every one is looked at
            progress.show()
            _check_stall([t for t in trainings if t.returncode is None], stall_seconds)
        progress.done()
    except BaseException:
        for t in trainings:
            t.kill()
        raise
    return trainings


def _check_stall(running, stall_seconds):
    if not running:
        return
    for t in running:
        t.note_progress()
    quiet = time.time() - max(t.progress_at for t in running)
    if quiet >= stall_seconds:
        raise Stalled(f"no training process wrote a log line or used CPU for {quiet:.0f} s (deadlocked, or "
                      f"waiting on something that never comes?): stopped them all; logs: {', '.join(str(t.run_dir / 'caffe.log') for t in running)}"
                      f" (IMGSTORE_STALL_SECONDS sets the limit, {stall_seconds:g} s)")


class Progress:
    """A line on stderr while Caffe trains: iteration, images/s, time left. Caffe's own log
    goes to a file, so without this a long run would print nothing for hours."""

    def __init__(self, log_path, max_iter, batch, enabled, every=None):
        self.log_path, self.max_iter, self.batch = log_path, max_iter, batch
        self.enabled, self.tty = enabled, sys.stderr.isatty()
        self.every = every if every is not None else (0 if self.tty else 30)
        self.start, self.last_shown, self.first = time.time(), 0.0, None
        self.read_to, self.iteration = 0, None  # how far the log was read; the last iteration in it

    def _new_iteration(self):
        """The last iteration in what Caffe wrote since the last look (the log is read once)."""
        with open(self.log_path, "rb") as f:
            f.seek(self.read_to)
            chunk = f.read()
        complete = chunk.rfind(b"\n") + 1  # a half-written line waits for the next look
        self.read_to += complete
        found = caffe_log.last_iteration(chunk[:complete].decode(errors="replace"))
        self.iteration = found if found is not None else self.iteration
        return self.iteration

    def show(self):
        if not self.enabled or time.time() - self.last_shown < max(self.every, 1.0):
            return
        it = self._new_iteration()
        now = time.time()
        if it is None:
            line = f"    starting ({now - self.start:.0f} s)"
        else:
            if self.first is None:
                self.first = (now, it)
            t0, i0 = self.first
            rate = (it - i0) / (now - t0) if now > t0 and it > i0 else None
            left = f", ~{(self.max_iter - it) / rate:.0f} s left" if rate else ""
            speed = f", {rate * self.batch:,.0f} images/s" if rate else ""
            line = f"    iteration {it}/{self.max_iter}{speed}{left}"
        print(("\r" + line.ljust(72)) if self.tty else line, end="" if self.tty else "\n", file=sys.stderr, flush=True)
        self.last_shown = now

    def done(self):
        if self.enabled and self.tty and self.last_shown:
            print("\r" + " " * 72 + "\r", end="", file=sys.stderr, flush=True)
