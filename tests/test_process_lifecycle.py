"""What the project starts dies with its starter, and what it removes or signals is provably its
own, each with real processes, cgroups and files:

- the forked workers that prepare a dataset (data_prep/build.py) die when the process that forked
  them is SIGKILLed; a pool that is not killed still gives every record;
- an empty cgroup of this project is removed only once the process that made it is gone (another
  run's, made a moment ago, is left: experiments/cgroup.py);
- a pid `ip netns pids` listed that is no longer in the namespace is not killed (experiments/hosts.py);
- a Caffe build swap whose process was SIGKILLed is undone by the next use, which says so (toolchain.py).
"""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from conftest import ROOT, line_within

WAIT_S = 10  # the most a death signal's effect is waited for


def gone(proc, timeout=WAIT_S):
    """Whether psutil.Process `proc` exited (or is a zombie) within `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


POOL = """
import os, sys, time
import numpy as np
from data_prep import build, datasets
folder = sys.argv[1]

def get(i):  # a record that never comes: the worker waits as one blocked on its work would
    open(os.path.join(folder, str(os.getpid())), "w").close()
    time.sleep(600)

split = datasets.Split("train", 512, (1, 2, 2), get, 2)
build.convert(split, None, None, 2, sink=lambda record: None, progress=False)
"""


def test_a_preparing_pools_forked_workers_die_with_the_process_that_forked_them(tmp_path):
    starter = subprocess.Popen([sys.executable, "-c", POOL, str(tmp_path)], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    workers = []
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.iterdir())) < 2:
            assert starter.poll() is None and time.monotonic() < deadline, starter.stderr.read()
            time.sleep(0.05)
        workers = [psutil.Process(int(p.name)) for p in tmp_path.iterdir()]
        assert all(w.ppid() == starter.pid for w in workers)
        starter.kill()
        starter.wait(timeout=WAIT_S)
        assert all(gone(w) for w in workers), [w.pid for w in workers if not gone(w, 0)]
    finally:
        starter.kill()
        starter.wait(timeout=WAIT_S)
        for w in workers:  # only this test's
            if not gone(w, 0):
                w.kill()


def test_a_pool_that_is_not_killed_gives_every_record_in_order():
    from data_prep import build, datasets
    images = np.arange(600 * 4, dtype=np.uint32).reshape(600, 1, 2, 2).astype(np.uint8)
    split = datasets.Split("train", 600, (1, 2, 2), lambda i: (str(i), i % 2, images[i]), 2)
    got = []
    total = build.convert(split, None, None, 2, sink=got.append, want_sum=True, progress=False)
    assert [r[0] for r in got] == [str(i) for i in range(600)]
    assert np.array_equal(total, images.astype(np.int64).sum(axis=0))


MADE_BY_A_KILLED_RUN = """
import sys, time
from experiments import cgroup
group = cgroup.create(cgroup.Limits(cpu_quota=0.5), sys.argv[1], None)
print(" ".join(map(str, group.paths)), flush=True)
time.sleep(600)
"""


def test_an_empty_cgroup_is_removed_only_once_its_maker_is_gone(tmp_path):
    """Three empty groups under imgstore/: one this process made a moment ago (a run before its
    first solver: kept), one whose maker was SIGKILLed (removed), one no owner file names, young
    (an older checkout's: kept until it is UNOWNED_AGE_S old)."""
    from experiments import cgroup
    if cgroup.version() != "v1" or os.geteuid() != 0:
        pytest.skip("needs root and cgroup v1 (as the project's CI machine has)")
    tag = f"lifecycle-{os.getpid()}"
    ours = cgroup.create(cgroup.Limits(cpu_quota=0.5), f"{tag}-ours", None)
    unowned = cgroup.CGROUP_ROOT / "cpu" / "imgstore" / f"{tag}-unowned"
    unowned.mkdir()
    maker = subprocess.Popen([sys.executable, "-c", MADE_BY_A_KILLED_RUN, f"{tag}-killed"], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)
    killed = []
    try:
        killed = [Path(p) for p in line_within(maker, "a cgroup's paths", time.monotonic() + 60).split()]
        assert killed and all(p.is_dir() for p in killed)
        maker.kill()
        maker.wait(timeout=WAIT_S)
        removed = cgroup.remove_abandoned()
        assert set(killed) <= set(removed) and not any(p.exists() for p in killed)
        assert not (cgroup.OWNERS / f"{tag}-killed").exists()
        assert not set(ours.paths) & set(removed) and all(p.is_dir() for p in ours.paths)
        assert unowned not in removed and unowned.is_dir()
    finally:
        maker.kill()
        maker.wait(timeout=WAIT_S)
        ours.remove()
        for path in killed + [unowned]:
            if path.exists():
                path.rmdir()
    assert not any(p.exists() for p in ours.paths) and not (cgroup.OWNERS / f"{tag}-ours").exists()


def test_a_pid_no_longer_in_the_namespace_is_not_killed_with_it():
    """`ip netns pids` listed a process that then exited and whose number another process took:
    stood in for by listing a process outside the namespace besides the one inside it."""
    from experiments import hosts
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    name = f"{hosts.PREFIX}{os.getpid()}-lifecycle"
    subprocess.run(["ip", "netns", "add", name], check=True)
    inside = subprocess.Popen(hosts.command_in(name, ["sleep", "600"]))
    outside = subprocess.Popen(["sleep", "600"])
    real_ip = hosts._ip

    def listing_a_reused_pid(*args, check=True):
        said = real_ip(*args, check=check)
        return said + f"{outside.pid}\n" if args[:2] == ("netns", "pids") else said
    try:
        deadline = time.monotonic() + WAIT_S
        while str(inside.pid) not in real_ip("netns", "pids", name).split():
            assert time.monotonic() < deadline and inside.poll() is None
            time.sleep(0.05)
        hosts._ip = listing_a_reused_pid
        hosts.remove(name)
        assert inside.wait(timeout=WAIT_S) == -signal.SIGKILL
        assert outside.poll() is None  # listed, but not in the namespace: left alone
        assert name not in hosts.namespaces()
    finally:
        hosts._ip = real_ip
        for p in (inside, outside):
            p.kill()
            p.wait(timeout=WAIT_S)
        if name in hosts.namespaces():
            subprocess.run(["ip", "netns", "del", name], check=True)


def test_a_build_swap_killed_inside_is_undone_by_the_next_use_which_says_so(tmp_path):
    cache, build = tmp_path / "cache", tmp_path / ".build"
    for key in ("aaaa", "bbbb"):
        (cache / f"build-{key}" / "install").mkdir(parents=True)
    build.mkdir()
    (build / "caffe").symlink_to(cache / "build-aaaa" / "install")
    (build / "caffe.key").write_text("aaaa\n")
    setup = f"""
import pathlib, sys, time
import toolchain
b = pathlib.Path({str(build)!r})
toolchain.BUILD_CACHE, toolchain.CAFFE, toolchain.CAFFE_KEY = pathlib.Path({str(cache)!r}), b / "caffe", b / "caffe.key"
toolchain.SWAP, toolchain.RUN_LOCK = b / "caffe.swapped", pathlib.Path({str(tmp_path / 'run.lock')!r})
"""
    swapper = subprocess.Popen([sys.executable, "-c", setup + """
with toolchain.using_build("bbbb"):
    print("swapped", flush=True)
    time.sleep(600)
"""], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert line_within(swapper, "'swapped'", time.monotonic() + 60).strip() == "swapped"
        assert (build / "caffe.key").read_text() == "bbbb\n"
    finally:
        swapper.kill()
        swapper.wait(timeout=WAIT_S)
    after = subprocess.run([sys.executable, "-c", setup + "toolchain.check_not_swapped(); print(toolchain.build_key())"],
                           cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert after.stdout.strip() == "aaaa", after.stderr
    assert (build / "caffe").resolve() == cache / "build-aaaa" / "install"
    assert f"restored {build / 'caffe'} -> {cache / 'build-aaaa' / 'install'} (build aaaa): pid {swapper.pid} " \
           "swapped it for cached build bbbb (toolchain.using_build) and was killed before it put it back" in after.stderr
    assert not (build / "caffe.swapped").exists()
