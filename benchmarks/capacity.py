#!/usr/bin/env python3
"""How many accelerators can one host keep fed from this storage? MLPerf Storage's per-client
question, asked of Caffe's backends.

N solvers train at once on the same artifact (run.py --concurrent N), each with its own
emulated accelerator; the host holds at N when the group's accelerator utilisation is at
least 0.90. The group's AU is the mean of its solvers' AU (MLPerf Storage's AU of a client: the
accelerators' compute time over the run's time, all accelerators together). The sweep doubles
N from the N that N = 1's runs predict (the data path's CPU: analysis/capacity.py cpu_allows;
from 1 when it predicts nothing) until the group falls below 0.90 or loses a solver (MLPerf
Storage's rule: every accelerator finishes its run; a solver killed, by the OOM killer say,
fails its N), bisects, then repeats the runs at the answer N and
at N + 1 until each has --confirm runs and the answer holds on their medians. When N + 1 holds
after all (one low run had stopped the doubling), the search goes on above it the same way:
N + 2, N + 3, N + 5, ... then bisecting; when N fails after all, it bisects again below N. A backend whose runs run.py refuses (Redis under disk
limits, say) is named at the end and the others are swept.

  python benchmarks/capacity.py mnist lmdb warm                        # emulated H100
  python benchmarks/capacity.py mnist lmdb,leveldb,images cold --max 32
  python benchmarks/capacity.py imagenet lmdb cold --profile paper2016 --iters 40
  python benchmarks/capacity.py cifar10 lmdb warm --lmdb-read coalesced   # any run.py option
  make capacity DATASET=cifar10 ACCEL=h100      # LMDB, image files and Redis, ranked, with the figure
  python benchmarks/capacity.py --predict --accelerator h100   # predicted from this host's data-path probe, nothing run

Each run is an ordinary record in results/DATASET/records.jsonl (concurrent.solvers = N); runs
already recorded for the same setup are reused, so a sweep stopped half-way resumes where it
was. analysis/capacity.py draws AU against N and tabulates the answers from those records.
Exit status (experiments/exit_codes.py), the worst over the backends winning (130 > 4 > 2 > 3 > 1 > 0),
each said: 0 every solver finished; 1 the sweep answered, but some solvers failed on the way
(said, with their N); 2 run.py refused a backend (or bad input); 3 a backend's run stalled or
timed out (that backend is not swept further); 4 an internal error (a line names the log holding
its traceback); 130 interrupted.
Emulated solvers mostly wait, so many fit on few cores: what runs out is the data path's CPU
and the storage, which are real.
"""
import argparse
import contextlib
import io
import math
import statistics
import sys
import time
from pathlib import Path

from analysis import capacity
from data_prep import datasets
from experiments import config as config_module, exit_codes, run

THRESHOLD = capacity.THRESHOLD


class Refused(Exception):
    """run.py did not run a backend's runs (its error says why; `code`: its exit status, 2 for a
    refusal, 3 a stall, 4 an internal error): the sweep goes on with the next."""

    def __init__(self, message, code=exit_codes.REFUSED):
        super().__init__(message)
        self.code = code


class Interrupted(Exception):
    """run.py was interrupted (Ctrl-C, SIGTERM): the sweep stops."""


NOT_SWEPT = {exit_codes.REFUSED: "run.py refused it", exit_codes.STALLED: "its run stalled or timed out",
             exit_codes.INTERNAL: "an internal error"}


class Sweep:
    """The runs of one backend x cache at growing N, through run.py, and what they gave."""

    def __init__(self, config, log=print, run_log=None):
        self.config, self.log = config, log  # config: the experiments.config.RunConfig of every run, but N
        self.run_log = run_log  # where run.py's own lines go (a line per solver), None: with the sweep's
        self.backend, self.cache = config.backend, config.cache
        self.seen = {}  # N: sorted group AUs
        self.lost = set()  # the Ns at which a run lost a solver: none of them holds
        self.records = {}  # N: its records
        self.runs, self.run_seconds = 0, []
        self.confirm = 1

    def aus_at(self, n, runs):
        """At least `runs` group AUs at N (running those not yet recorded)."""
        if len(self.seen.get(n, [])) >= runs:  # asked again while confirming: nothing new to run
            return self.seen[n]
        config = self.config.replace(concurrent=n, repeats=runs, quiet=True)
        self.runs += 1
        self.log(f"  run {self.runs}: N = {n}{self._time_left()}")
        started = time.time()
        said = io.StringIO()
        with contextlib.redirect_stderr(said) if self.run_log else contextlib.nullcontext():
            rc = run.run(config)
        if self.run_log:
            with open(self.run_log, "a") as f:
                f.write(said.getvalue())
        self.run_seconds.append(time.time() - started)
        if rc == exit_codes.INTERRUPTED:  # Ctrl-C: run.py stopped the run in progress; the sweep stops too
            raise Interrupted()
        if rc not in (exit_codes.OK, exit_codes.SOLVERS_FAILED):  # a solver failing is a finding at N
            if self.run_log:
                self.log(said.getvalue().strip()[-2000:])
            raise Refused(f"run.py {config_module.command_line(config)} failed (exit {rc}: "
                          f"{exit_codes.MEANING.get(rc, 'unknown')}; its error is above)", rc)
        mine = [r for r in run.recorded_runs(config, ok_only=False)
                if (r.backend, r.cache) == (self.backend, self.cache)]
        self.records[n] = [r for r in mine if capacity.solvers(r) == n]
        groups = capacity.group_aus(self.records[n]).values()
        aus = sorted(au for au, _ in groups)
        failed = sum(f for _, f in groups)
        self.seen[n] = aus
        if failed:
            self.lost.add(n)
        self.log(f"  N = {n:3d}: group AU {', '.join(capacity.au_text(a, 3) for a in aus)} "
                 f"(median {capacity.au_text(statistics.median(aus), 3)}, n = {len(aus)})"
                 + (f"; {failed} solvers failed: N = {n} does not hold (their logs say why)" if failed else ""))
        return aus

    def _time_left(self):
        """About how long the rest takes: the runs a bisection and the confirmations still need,
        at the mean time of a run so far."""
        if not self.run_seconds:
            return ""
        held = max([m for m in self.seen if self.holds_so_far(m)], default=0)
        failed = min([m for m in self.seen if m > held], default=held * 2 or 1)
        left = (math.ceil(math.log2(max(failed - held, 1))) + 2 * self.confirm) * statistics.fmean(self.run_seconds)
        return f" (about {max(1, round(left / 60))} min left for {self.backend})"

    def holds_so_far(self, n):
        return n in self.seen and statistics.median(self.seen[n]) >= THRESHOLD and n not in self.lost

    def predicted(self):
        """The N the data path's CPU allows, from N = 1's runs (None without a figure)."""
        allows = capacity.cpu_allows(self.records.get(1, []))
        return allows[0] if allows else None

    def holds(self, n, runs=1):
        return n == 0 or (statistics.median(self.aus_at(n, runs)) >= THRESHOLD and n not in self.lost)

    def largest_n(self, max_n, confirm):
        """The largest N that holds (no solver lost, median group AU >= 0.90) with N + 1 failing, both on
        `confirm` runs; max_n (confirmed) when even that holds."""
        self.confirm = confirm
        held, failed = self._start(max_n)
        while True:
            while failed - held > 1:  # bisecting
                mid = (held + failed) // 2
                held, failed = (mid, failed) if self.holds(mid) else (held, mid)
            if not self.holds(held, confirm):  # confirming on `confirm` runs at both ends
                held, failed = self._below(held), held  # one high run had misled the search
            elif failed <= max_n and self.holds(failed, confirm):
                held, failed = self._gallop(failed, max_n)  # one low run had stopped the search
            else:
                return held

    def _start(self, max_n):
        """(held, failed) to search from: N = 1, then the N its runs predict, tried at once."""
        if not self.holds(1):
            return 0, 1
        guess = min(max_n, int(self.predicted() or 0))
        if guess <= 2:
            return self._gallop(1, max_n)
        self.log(f"  N = 1's data path predicts N = {guess}: tried next")
        return self._gallop(guess, max_n) if self.holds(guess) else (1, guess)

    def _below(self, n):
        """The largest N under n that held on the runs so far (0 when none did)."""
        return max((m for m, aus in self.seen.items()
                    if m < n and statistics.median(aus) >= THRESHOLD and m not in self.lost), default=0)

    def _gallop(self, base, max_n):
        """Tries base + 1, + 2, + 4, ... (no more than max_n) until one fails: (the last N that
        held, the first that failed), failed being max_n + 1 when max_n held."""
        held, step = base, 1
        while held < max_n:
            n = min(base + step, max_n)
            if not self.holds(n):
                return held, n
            held, step = n, step * 2
        return held, max_n + 1


def parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", choices=list(datasets.REGISTRY))
    p.add_argument("backends", help="one backend or a comma-separated list (each swept on its own)")
    p.add_argument("cache", choices=["warm", "cold"])
    p.add_argument("--predict", action="store_true",
                   help="sweep nothing: each backend's N predicted from this host's data-path probe "
                        "(imgstore capacity --predict --accelerator T; --predict --help: its options)")
    p.add_argument("--max", type=int, default=64, help="the largest N tried (default %(default)s)")
    p.add_argument("--confirm", type=int, default=3,
                   help="runs at the answer N and at N + 1 (default %(default)s)")
    p.add_argument("--iters", type=int,
                   help="max_iter of every solver (default: the dataset's quick-matrix iterations)")
    return p


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if "--predict" in argv:  # predicted from this host's data-path probe, nothing swept
        from benchmarks import capacity_predict
        return capacity_predict.main([x for x in argv if x != "--predict"])
    a, run_options = parser().parse_known_args(argv)
    asked = run.parse([a.dataset, "lmdb", a.cache] + run_options)
    try:
        return _sweep_all(a, run_options, asked)
    except (Interrupted, KeyboardInterrupt):
        print("interrupted: the sweep stopped (its runs so far are recorded)", file=sys.stderr)
        return exit_codes.INTERRUPTED
    except run.REFUSALS as e:
        print(f"error: {e}", file=sys.stderr)
        return exit_codes.REFUSED
    except Exception as e:  # noqa: BLE001 -- a fault of this code: one line naming the traceback's log
        return exit_codes.internal_error(e, Path(asked.out) / a.dataset)


def _sweep_all(a, run_options, asked):
    """Each backend swept, the answer ranked, the figure drawn; the worst outcome."""
    iters = a.iters or datasets.get(a.dataset).quick_iters
    results = Path(asked.out)
    started, sweeps, refused = time.time(), {}, []
    run_log = results / a.dataset / "capacity.log"
    run_log.parent.mkdir(parents=True, exist_ok=True)
    print(f"run.py's lines (one per solver) go to {run_log}", file=sys.stderr)
    for backend in a.backends.split(","):
        print(f"{a.dataset} {backend} {a.cache}: N solvers at once, {iters} iterations each "
              f"{' '.join(run_options)}", file=sys.stderr)
        config = asked.replace(backend=backend, iters=iters,
                               test_interval=iters if asked.test_interval is None else asked.test_interval)
        sweep = Sweep(config, log=lambda m: print(m, file=sys.stderr), run_log=run_log)
        try:
            sweep.answer = sweep.largest_n(a.max, a.confirm)
            sweeps[backend] = sweep
        except Refused as e:
            print(e, file=sys.stderr)
            refused.append((backend, e.code))
    print(ranked(a, sweeps, refused, results, time.time() - started))
    records = [r for sweep in sweeps.values() for rs in sweep.records.values() for r in rs]
    if records:
        out = results / "report"
        out.mkdir(parents=True, exist_ok=True)
        print(f"figure: {capacity.figure(records, a.dataset, out)}")
    return exit_codes.worst(_failures_said(records), *(code for _, code in refused))


def _failures_said(records):
    """OK when every solver of the sweep finished; else SOLVERS_FAILED, having said how many failed and
    at which N (each such N was counted as not holding: MLPerf Storage's rule)."""
    failed = [r for r in records if not r.ok]
    if not failed:
        return exit_codes.OK
    at = sorted({capacity.solvers(r) for r in failed})
    print(f"{len(failed)} of {len(records)} solvers failed during the sweep (at N = {', '.join(map(str, at))}; "
          f"each such N counted as not holding; their logs are named in the run log)", file=sys.stderr)
    return exit_codes.SOLVERS_FAILED


def ranked(a, sweeps, refused, results, seconds):
    """The answer, most accelerators first: per backend the largest N, the median group AU at
    N and N + 1, and what stopped it (analysis/capacity.py stopped_by)."""
    took = f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"
    lines = [f"\n{a.dataset} {a.cache}: accelerators one host keeps at AU >= {THRESHOLD:.2f} with every solver "
             f"finishing (median of runs; {took})", "",
             "| backend | largest N | AU at N / N + 1 (n) | stopped by |", "|---|---|---|---|"]
    for backend, sweep in sorted(sweeps.items(), key=lambda item: -item[1].answer):
        n, seen = sweep.answer, sweep.seen
        failed = min((m for m in seen if m > n), default=None)
        stopped = (f"{capacity.stopped_by(sweep.records[failed], results, sweep.records.get(n))} at {failed}"
                   if failed else "not reached")
        at = capacity.au_text(statistics.median(seen[n]), 3) if n in seen else "-"
        above = capacity.au_text(statistics.median(seen[n + 1]), 3) if n + 1 in seen else "-"
        runs = f"{len(seen.get(n, []))}, {len(seen.get(n + 1, []))}"
        lines.append(f"| {backend} | {n}{'+' if failed is None else ''} | {at} / {above} ({runs}) | {stopped} |")
    lines += [f"| {backend} | not swept: {NOT_SWEPT.get(code, f'run.py exit {code}')} (its error is above) | | |"
              for backend, code in refused]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
