"""The CPU Docker image, built and run for real (make docker-test): debootstrap base, wheels
served from this host, Caffe built inside, the quick MNIST matrix run in a container with no
network and its records checked. It takes ~15 minutes on the CI machine from nothing cached,
so it runs where IMGSTORE_DOCKER_TEST=1 (.ci/run sets it); elsewhere run `make docker-test`."""
import os
import subprocess

import pytest

from experiments import runner
from experiments.record import recorded

@pytest.mark.timeout(3900)  # the build's own limit (3600 s) and the checks
@pytest.mark.skipif(os.environ.get("IMGSTORE_DOCKER_TEST") != "1",
                    reason="builds a Docker image (~15 min): IMGSTORE_DOCKER_TEST=1 or make docker-test")
def test_the_cpu_image_runs_the_quick_matrix_and_says_how(tmp_path):
    out = tmp_path / "results"
    done = subprocess.run(["docker/test.sh", "mnist"], cwd=runner.ROOT, capture_output=True, text=True,
                          env=dict(os.environ, DOCKER_TEST_OUT=str(out)), timeout=3600)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-6000:]
    records = recorded(out, "mnist")
    cold = [r for r in records if r.cache == "cold"]
    assert cold and all(r.cache_method.endswith("fadvise") for r in cold)  # no --privileged: never drop_caches
    images = {r.environment["container"]["caffe_build"] for r in records}
    assert len(images) == 1 and all(r.environment["container"]["kind"] == "docker" for r in records)
    assert all(r.environment["container"]["pip_source"].startswith("wheelhouse") for r in records)
    assert all(r.compute["mode"] == "emulated" for r in records)


def test_the_record_carries_the_image_description(tmp_path, monkeypatch):
    description = tmp_path / "imgstore-image"
    description.write_text("base=imgstore-base:bookworm\npip_source=the package registry\ncaffe_build=ab12\n")
    monkeypatch.setattr(runner, "IMAGE_DESCRIPTION", description)
    assert runner.container()["caffe_build"] == "ab12"
    assert runner.container()["pip_source"] == "the package registry"
