"""The calibration's GPU step (device/gpu_calibrate.py), checked where there is no GPU: its plan
fits one loan and asks run.py for what it means to, the bundle check tells a stale or missing
bundle, and the CPU probe every record carries measures something."""
import json
import subprocess
import sys

import pytest

from conftest import ROOT

from device import gpu_calibrate, gpu_host
from benchmarks import capacity as capacity_sweep
from benchmarks import host_check
from experiments import config
from experiments import run as run_cli
from monitor import cpu_probe


def test_the_plan_fits_one_loan_and_pairs_each_real_run_with_an_emulated_one(tmp_path):
    plan = gpu_calibrate.make_plan(tmp_path / "results", tmp_path / "data")
    assert plan.estimate() + gpu_calibrate.START_UP_SECONDS <= gpu_calibrate.LOAN_SECONDS - 60
    runs = [s for s in plan.steps if "warm #" in s.name]
    assert len(runs) == 2 * len(gpu_calibrate.CELLS) * gpu_calibrate.REPEATS
    computes = {}
    for step in runs:
        a = run_cli.parser().parse_args(step.argv[2:])
        computes.setdefault(step.name.rsplit(" ", 1)[1], set()).add(run_cli.compute_choice(a))
        assert a.iters and a.cache == "warm" and str(tmp_path) in a.out
    assert computes == {"real": {(0, None)}, "emulated": {(-1, gpu_calibrate.EMULATED)}}
    # which of the pair goes first alternates, so that a drift of the host does not land on one
    firsts = [runs[i].name.endswith("real") for i in range(0, len(runs), 2)]
    assert True in firsts and False in firsts


def test_the_host_steps_come_after_the_gpu_steps_and_leave_the_gpu_alone(tmp_path):
    plan = gpu_calibrate.make_plan(tmp_path / "results", tmp_path / "data")
    names = [s.name for s in plan.steps]
    assert names[-2:] == ["host-check", "capacity sweep cifar10 lmdb warm"]
    assert names.index("host-check") > max(i for i, n in enumerate(names) if "warm #" in n or n == "gpu_time")
    check = host_check.parser().parse_args(plan.steps[-2].argv[2:])
    assert (check.gpu, check.out, check.data) == (-1, tmp_path / "results", tmp_path / "data")
    # host-check's MNIST and CIFAR-10 cells are the GPU step's emulated runs: same iterations,
    # accelerator and results, so run.py counts them as host-check's own
    cells = {(c.dataset, c.backend, c.iters) for c in host_check.CELLS}
    assert {(d, b, i) for d, b, i, _ in gpu_calibrate.CELLS} <= cells and gpu_host.CAPACITY in cells
    assert gpu_calibrate.EMULATED == host_check.ACCELERATOR
    sweep, run_options = capacity_sweep.parser().parse_known_args(plan.steps[-1].argv[2:])
    a = run_cli.parser().parse_args([sweep.dataset, sweep.backends, sweep.cache] + run_options)
    assert run_cli.compute_choice(a) == (-1, "h100") and a.out == str(tmp_path / "results")
    assert (sweep.dataset, sweep.backends, sweep.iters) == gpu_host.CAPACITY and sweep.max == 16
    # the host's steps fit what the budget leaves after the GPU's (9 minutes with the start-up)
    budget = gpu_calibrate.LOAN_SECONDS - gpu_calibrate.START_UP_SECONDS - 60
    assert plan.estimate() <= budget


def test_the_plans_runs_and_sweep_are_run_configs_as_run_py_reads_them(tmp_path):
    """Every run.py step, and the capacity sweep's run flags, are a RunConfig's arguments
    (config.arguments): a run flag renamed or added in RunConfig reaches the plan."""
    plan = gpu_calibrate.make_plan(tmp_path / "results", tmp_path / "data")
    runs = [s for s in plan.steps if s.argv[1].endswith("run.py")]
    for step in runs:
        assert step.argv[2:] == config.arguments(run_cli.parse(step.argv[2:])), step.name
    assert run_cli.parse(runs[0].argv[2:]) == config.RunConfig(
        "mnist", "lmdb", "warm", iters=5000, iters_reason=gpu_calibrate.ITERS_REASON, gpu=0, accelerator="none",
        data=str(tmp_path / "data"), out=str(tmp_path / "results"), quiet=True)
    sweep = plan.steps[-1].argv[2:]
    assert sweep[-4:] == ["--max", "16", "--confirm", "1"]
    assert sweep[:-4] == config.arguments(run_cli.parse(sweep[:-4]))


def test_the_host_steps_dry_run_prints_them_without_a_gpu(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "device" / "gpu_host.py"), "--dry-run", "--results",
                          str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "host_check.py --rounds 2 --gpu -1" in out.stdout and "capacity.py cifar10 lmdb warm" in out.stdout
    assert not list(tmp_path.iterdir())


def test_the_dry_run_names_a_missing_or_stale_bundle(tmp_path):
    plan = gpu_calibrate.make_plan(tmp_path / "results", tmp_path / "data")
    assert "no GPU bundle" in gpu_calibrate.dry_run(plan, bundle=tmp_path / "none")[0]
    bundle = tmp_path / "bundle"
    for part in ("caffe/bin/caffe", "caffe/lib/libcaffe.so", "cppmem_train", "cpu_probe",
                 "caffe/python/caffe/_caffe.so"):
        (bundle / part).parent.mkdir(parents=True, exist_ok=True)
        (bundle / part).write_text("")
    digest = gpu_calibrate.source_digest()
    (bundle / "BUNDLE.json").write_text(json.dumps({"sources": digest}))
    assert gpu_calibrate.bundle_problems(bundle) == []
    (bundle / "BUNDLE.json").write_text(json.dumps({"sources": "0" * 16}))
    assert "make gpu-bundle again" in gpu_calibrate.bundle_problems(bundle)[0]
    (bundle / "cpu_probe").unlink()
    assert any("cpu_probe: missing" in p for p in gpu_calibrate.bundle_problems(bundle))


def test_the_dry_run_command_prints_the_plan_without_a_gpu():
    out = subprocess.run([sys.executable, str(ROOT / "device" / "gpu_calibrate.py"), "--dry-run"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "cifar10 images warm #2" in out.stdout and "gpu_time" in out.stdout and "to carry:" in out.stdout
    assert "host-check" in out.stdout and "capacity sweep" in out.stdout


def test_the_cpu_probe_measures_and_says_when_it_cannot(monkeypatch, tmp_path):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    probe = cpu_probe.measure(0.2)
    assert probe["images_per_second"] > 10 and probe["png_bytes"] > 10_000
    # the per-file work: far more small files than large images per second, and nothing left behind
    assert probe["small_files_per_second"] > 10 * probe["images_per_second"]
    assert not list(tmp_path.glob("imgstore-cpu-probe-*"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "no-such-folder"))
    assert "exited 1" in cpu_probe.measure(0.2)["error"]
    monkeypatch.delenv("TMPDIR")
    monkeypatch.setattr(cpu_probe.toolchain, "CPU_PROBE", tmp_path / "absent")
    assert "missing" in cpu_probe.measure(0.2)["error"]
    assert cpu_probe.spread([100, 104, None, 102]) == pytest.approx(0.04 / 1.02, rel=1e-3)
    assert cpu_probe.spread([100]) is None


def test_a_failed_step_says_why_and_a_resumed_call_runs_only_what_did_not_finish(tmp_path):
    """What a lent machine's call leaves: calibrate.json names a failed step's last error line; a
    later call with --resume keeps the steps that finished and runs the others again."""
    counts = tmp_path / "ran"

    def step(name, code):
        script = f"open({str(counts)!r}, 'a').write({name!r} + '\\n'); import sys; {code}"
        return gpu_calibrate.Step(name, [sys.executable, "-c", script], 1)

    def plan():
        return gpu_calibrate.Plan(tmp_path / "results", tmp_path / "data",
                                  [step("fine", "pass"), step("broken", "sys.exit('no module named redis')")])

    assert gpu_calibrate.run_plan(plan(), 60, None, log=lambda *_: None) == 1
    state = json.loads((tmp_path / "results" / "calibrate.json").read_text())
    assert [(s["name"], s["status"], s["note"]) for s in state["steps"]] == [
        ("fine", "ok", None), ("broken", "failed", "exit 1: no module named redis")]
    assert gpu_calibrate.run_plan(plan(), 60, None, log=lambda *_: None, resume=True) == 1
    assert counts.read_text().split() == ["fine", "broken", "broken"]  # the finished step not run again
    state = json.loads((tmp_path / "results" / "calibrate.json").read_text())
    assert state["steps"][0]["status"] == "ok" and state["steps"][0]["note"] == "an earlier call's"
