"""A device loan's steps, run in order within a budget: each a command with its estimated
seconds, its status written to RESULTS/calibrate.json after each (and the results folder packed
into $OUT), so that a loan cut short still says what ran. The calibration's GPU step
(device/gpu_calibrate.py) and the GPU machine's host steps (device/gpu_host.py) both run theirs
here.
"""
import json
import os
import subprocess
import sys
import tarfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import processes

ROOT = Path(__file__).resolve().parents[1]
LOAN_SECONDS = 600            # what the issue asks the whole step to fit, start-up included


@dataclass
class Step:
    name: str
    argv: list
    estimate_s: float
    status: str = "planned"   # planned | ok | failed | skipped
    seconds: float = None
    note: str = None


@dataclass
class Plan:
    results: Path
    data: Path
    steps: list = field(default_factory=list)

    def estimate(self):
        return sum(s.estimate_s for s in self.steps)


def gpu_tag():
    """'h100', 'h200', ... from the first GPU's name; 'gpu' where none answers."""
    try:
        name = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=30).stdout.splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "gpu"
    for word in name.replace("NVIDIA", "").split():
        if word[:1].isalpha() and any(c.isdigit() for c in word):
            return word.lower()
    return "gpu"


def write_state(plan, started, out_dir):
    state = {"started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
             "elapsed_s": round(time.time() - started, 1), "budget_note": f"the loan: {LOAN_SECONDS} s",
             "steps": [dict(asdict(s), argv=" ".join(s.argv[1:])) for s in plan.steps]}
    target = plan.results / "calibrate.json"
    partial = target.with_suffix(".json.partial")
    partial.write_text(json.dumps(state, indent=1))
    os.replace(partial, target)
    if out_dir:
        pack(plan.results, Path(out_dir) / f"{plan.results.name}.tar.xz")


def pack(folder, target):
    """The results folder as one tar.xz (snapshots excluded), written whole or not at all."""
    partial = target.with_name(target.name + ".partial")
    with tarfile.open(partial, "w:xz") as tar:
        tar.add(folder, arcname=folder.name, filter=lambda t: None if "snapshot_iter_" in t.name else t)
    os.replace(partial, target)


def earlier_steps(results):
    """The steps an earlier call into this results folder finished ok, by name (--resume)."""
    try:
        state = json.loads((results / "calibrate.json").read_text())
    except (OSError, ValueError):
        return {}
    return {s["name"]: s for s in state.get("steps", []) if s.get("status") == "ok"}


def run_step(step, env, timeout_s):
    """Run one step, its output shown as it comes and its errors when it ends; a failed step's
    note ends with its last line of errors, so that calibrate.json says why without the machine's
    terminal."""
    try:
        done = subprocess.run(step.argv, cwd=ROOT, env=env, timeout=timeout_s, stderr=subprocess.PIPE, text=True,
                              preexec_fn=processes.child_setup())
    except subprocess.TimeoutExpired as e:
        sys.stderr.write(e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr or "")
        step.status, step.note = "failed", "stopped at the budget's end"
        return
    sys.stderr.write(done.stderr)
    last = ([line.strip() for line in done.stderr.splitlines() if line.strip()] or [""])[-1]
    step.status = "ok" if done.returncode == 0 else "failed"
    step.note = None if done.returncode == 0 else f"exit {done.returncode}" + (f": {last[:300]}" if last else "")


def run_plan(plan, budget_s, out_dir, log=print, resume=False):
    """resume: the steps an earlier call into plan.results finished ok are kept, not run again."""
    started = time.time()
    (plan.results / "benchmarks").mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    earlier = earlier_steps(plan.results) if resume else {}
    for step in plan.steps:
        if step.name in earlier:
            step.status, step.seconds = "ok", earlier[step.name].get("seconds")
            step.note = "an earlier call's"
            log(f"[{time.time() - started:5.0f} s] {step.name}: done by an earlier call")
            continue
        left = budget_s - (time.time() - started)
        if step.estimate_s > left:
            step.status, step.note = "skipped", f"{left:.0f} s left of the budget, {step.estimate_s:.0f} s needed"
            log(f"[{time.time() - started:5.0f} s] skip {step.name}: {step.note}")
            continue
        log(f"[{time.time() - started:5.0f} s] {step.name}")
        t0 = time.time()
        run_step(step, env, max(left, 1))
        step.seconds = round(time.time() - t0, 1)
        write_state(plan, started, out_dir)
    write_state(plan, started, out_dir)
    failed = [s.name for s in plan.steps if s.status != "ok"]
    log(f"done in {time.time() - started:.0f} s; " + (f"not ok: {', '.join(failed)}" if failed else "every step ok"))
    return 1 if any(s.status == "failed" for s in plan.steps) else 0
