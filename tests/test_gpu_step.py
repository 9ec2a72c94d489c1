"""The calibration's GPU step (device/gpu_calibrate.py), checked where there is no GPU: its plan
fits one loan and asks run.py for what it means to, the bundle check tells a stale or missing
bundle, and the CPU probe every record carries measures something."""
import json
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "device"))
import gpu_calibrate  # noqa: E402
from experiments import run as run_cli  # noqa: E402
from monitor import cpu_probe  # noqa: E402


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
