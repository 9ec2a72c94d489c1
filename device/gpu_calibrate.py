#!/usr/bin/env python3
"""make gpu-calibrate: the calibration's GPU step, made to fit one short loan of an H100 or H200
(at most 10 minutes, start-up included). On the GPU machine, with .device-bundle and
.device-data carried (README: GPU machines without a package registry):

  source device/env.sh && python3 device/gpu_calibrate.py            # runs the plan below
  .venv/bin/python device/gpu_calibrate.py --dry-run                 # any machine: plan, time, bundle

What it measures, in this order, each step only while the time left allows it:
  1. the data: MNIST (LMDB, image files) from the carried Fashion-MNIST, CIFAR-10 image files
     (the generated stand-in), prepared on the machine's own disk
  2. the host's CPU probe (monitor/cpu_probe.cpp), three times: how fast one core of this GPU
     host decodes and transforms a large image (pixel work) and reads small image files (per-file
     work), the numbers that scale image-file cells between hosts
  3. benchmarks/gpu_time.py --train: each stock net on constant data, no I/O (the compute ceiling)
  4. three cells, real GPU against the emulated H100 on the same host, n = 3, interleaved
     (repeat by repeat, which of the two goes first alternating): MNIST LMDB warm (compute-bound:
     tests the compute fit), MNIST image files warm and CIFAR-10 image files warm (data-path-bound:
     test the emulated data path). Iterations are cut from the stock solvers' to fit the loan;
     the records say so (iterations_setting, iterations_reason).
  5. the GPU machine as another host (device/gpu_host.py, no GPU): make host-check on its 16
     cores, which counts step 4's emulated runs as its own, and an emulated capacity sweep.

Everything lands in RESULTS (default results/<gpu>-calibrate/: records per dataset, runs/,
benchmarks/, calibrate.json with each step's status and time); with $OUT set (the device tool)
the folder is also packed into $OUT/<gpu>-calibrate.tar.xz, after every step, so that a call cut
off at its limit still brings back what finished. A later call with that folder carried and
--resume runs only the steps that are not ok yet; it may get another machine: host-check then
leaves the earlier call's runs out (another boot id), and each call's runs belong in a folder of
their own, since the fidelity tables take one probe per folder.
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from device import gpu_host
from device.steps import LOAN_SECONDS, Plan, Step, gpu_tag, run_plan  # noqa: F401 (run_plan: offered here too)
from experiments.config import RunConfig, arguments

ROOT = Path(__file__).resolve().parents[1]

BUNDLE = ROOT / ".device-bundle"
DEVICE_DATA = ROOT / ".device-data"
MNIST_SOURCE = DEVICE_DATA / "fashion-mnist"
START_UP_SECONDS = 60         # a machine's start and the transfers, measured on the lent machines
REPEATS = 3
EMULATED = "h100"             # the profile under test (models/accelerators.json)
CARRY_LIMIT_MIB = 64          # what the device tool sends: tracked tree + carried folders

# (dataset, backend, iterations, seconds one run takes on the GPU host, run.py's start-up and
# warming included): as measured on the H200 host, 2026-11-26 (h200-calibrate/calibrate.json, catalogued);
# the H100 host of the same day took 9-23 s per run, 357 s for the whole plan (h100-calibrate)
CELLS = [("mnist", "lmdb", 5000, 10), ("mnist", "images", 5000, 22), ("cifar10", "images", 1500, 21)]
GPU_TIME_TRAIN = "mnist=2000,cifar10=2000,imagenet=40"
ITERS_REASON = "cut to fit the GPU step of the calibration in one 10-minute loan"


def make_plan(results, data, python=sys.executable):
    run_py, prepare = str(ROOT / "experiments" / "run.py"), str(ROOT / "data_prep" / "prepare.py")
    plan = Plan(Path(results), Path(data))
    plan.steps += [
        Step("prepare mnist", [python, prepare, "mnist", "lmdb,images", "--source", str(MNIST_SOURCE),
                               "--out", str(data), "--quiet"], 10),
        Step("prepare cifar10", [python, prepare, "cifar10", "images", "--out", str(data), "--quiet"], 12),
        Step("cpu probe", [python, "-m", "monitor.cpu_probe", "--repeats", "3",
                           "--json", str(Path(results) / "benchmarks" / "cpu_probe.json")], 7),
        Step("gpu_time", [python, str(ROOT / "benchmarks" / "gpu_time.py"), "--gpu", "0", "--iterations", "20",
                          "--train", GPU_TIME_TRAIN, "--json", str(Path(results) / "benchmarks" / "gpu_time.json")], 30),
    ]
    for repeat in range(REPEATS):
        for i, (dataset, backend, iters, seconds) in enumerate(CELLS):
            cell = RunConfig(dataset, backend, "warm", repeats=repeat + 1, iters=iters, iters_reason=ITERS_REASON,
                             data=str(data), out=str(results), quiet=True)
            pair = [("real", cell.replace(gpu=0, accelerator="none")),
                    ("emulated", cell.replace(gpu=-1, accelerator=EMULATED))]
            if (repeat + i) % 2:
                pair.reverse()
            for kind, config in pair:
                plan.steps.append(Step(f"{dataset} {backend} warm #{repeat} {kind}",
                                       [python, run_py, *arguments(config)], seconds))
    plan.steps += [Step(*step) for step in gpu_host.host_steps(results, data, python)]
    return plan


# --- checks a CPU machine can make --------------------------------------------------------

def mib(path):
    if not path.exists():
        return 0.0
    if path.is_file():
        return path.stat().st_size / 2**20
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink()) / 2**20


def tracked_mib():
    try:
        names = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, text=True,
                               timeout=60).stdout.split("\0")
    except (OSError, subprocess.TimeoutExpired):
        return None
    return sum((ROOT / n).stat().st_size for n in names if n and (ROOT / n).is_file()) / 2**20


def source_digest():
    return subprocess.run([str(ROOT / "device" / "sources_digest.sh")], capture_output=True, text=True,
                          timeout=60).stdout.strip()


def bundle_problems(bundle=BUNDLE, digest=None):
    """What is wrong with the GPU bundle for this tree: [] when it is ready to be carried."""
    meta_file = bundle / "BUNDLE.json"
    if not meta_file.exists():
        return [f"no GPU bundle at {bundle}: make gpu-bundle PY_INCLUDE=python-include.tgz (device/probe.sh "
                "writes that file on the GPU machine)"]
    try:
        meta = json.loads(meta_file.read_text())
    except ValueError as e:
        return [f"{meta_file}: not JSON ({e}): make gpu-bundle again"]
    problems = [f"{bundle / p}: missing" for p in ("caffe/bin/caffe", "caffe/lib/libcaffe.so", "cppmem_train",
                                                    "cpu_probe", "caffe/python/caffe/_caffe.so")
                if not (bundle / p).exists()]
    digest = digest or source_digest()
    if meta.get("sources") != digest:
        problems.append(f"{meta_file}: built from sources {meta.get('sources')}, this tree's are {digest} "
                        "(Caffe's patches or the C++ programs changed): make gpu-bundle again")
    return problems


def dry_run(plan, bundle=BUNDLE):
    print(f"The GPU step of the calibration: {len(plan.steps)} steps, about {plan.estimate():.0f} s on a "
          f"16-core GPU host (+ ~{START_UP_SECONDS} s start-up and transfers; the loan: {LOAN_SECONDS} s)")
    for s in plan.steps:
        print(f"  {s.estimate_s:4.0f} s  {s.name}")
    print(f"results: {plan.results}   data: {plan.data}")
    problems = bundle_problems(bundle)
    if not MNIST_SOURCE.exists():
        problems.append(f"{MNIST_SOURCE}: missing (make gpu-data copies Debian's Fashion-MNIST there)")
    carried = {".device-bundle": mib(bundle), ".device-data": mib(DEVICE_DATA)}
    tree = tracked_mib()
    total = sum(carried.values()) + (tree or 0)
    print("to carry: " + ", ".join(f"{k} {v:.1f} MiB" for k, v in carried.items())
          + (f"; tracked tree {tree:.1f} MiB; together {total:.1f} of the device tool's {CARRY_LIMIT_MIB} MiB"
             if tree is not None else ""))
    if tree is not None and total > CARRY_LIMIT_MIB:
        print(f"  over the limit: send a tree without results/ (device/light_tree.sh on; off afterwards)")
    for p in problems:
        print(f"not ready: {p}")
    if not problems:
        print("ready: carry .device-bundle and .device-data, then make gpu-calibrate on the machine")
    return problems


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dry-run", action="store_true", help="print the plan and check the bundle; run nothing")
    p.add_argument("--budget", type=float, default=LOAN_SECONDS - START_UP_SECONDS - 60,
                   help="seconds this script may take; a step that would not fit is skipped (default: %(default)s)")
    p.add_argument("--results", type=Path, help="results folder (default: results/<gpu>-calibrate)")
    p.add_argument("--data", type=Path, default=Path("/tmp/imgstore-calibrate-data"),
                   help="where the data is prepared (default: %(default)s)")
    p.add_argument("--resume", action="store_true",
                   help="a later call into the same results folder (carried along): the steps its "
                        "calibrate.json says finished ok are kept, the others run")
    a = p.parse_args(argv)
    results = a.results or ROOT / "results" / f"{gpu_tag()}-calibrate"
    plan = make_plan(results, a.data)
    if a.dry_run:
        dry_run(plan)
        return 0
    problems = [p for p in bundle_problems() if "sources" not in p] if BUNDLE.exists() else []
    if not MNIST_SOURCE.exists():
        problems.append(f"{MNIST_SOURCE}: missing (carry .device-data; make gpu-data makes it)")
    if problems:
        print("\n".join(f"error: {p}" for p in problems), file=sys.stderr)
        return 2
    return run_plan(plan, a.budget, os.environ.get("OUT"), resume=a.resume)


if __name__ == "__main__":
    sys.exit(main())
