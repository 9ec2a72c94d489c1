"""The runner: every backend trains through it and leaves a record; cache states are real
and measured; the monitor samples; refusals and interruptions are clean; limits bite."""
import os
import signal
import subprocess
import sys
import time

import pytest

import toolchain
from conftest import ROOT, run
from data_prep import backends, cache, locations, manifest
from experiments import cgroup, runner
from experiments.config import RunConfig
from experiments.record import COLD_AT_MOST, recorded
from monitor.summary import summarize

PY = str(ROOT / ".venv" / "bin" / "python")
BACKENDS = list(backends.REGISTRY)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return tmp_path_factory.mktemp("results")


def run_cli(args, **kw):
    return run([PY, str(ROOT / "experiments" / "run.py")] + args, **kw)


def gets_served(cluster):
    """The GETs every node of `cluster` has run since it started, from INFO commandstats."""
    total = 0
    for c in cluster.nodes():
        try:
            total += c.info("commandstats").get("cmdstat_get", {}).get("calls", 0)
        finally:
            c.close()
    return total


def warm_pass_gets(dest):
    """The GETs the servers ran for a warm cache state of the Redis artifact at `dest` (the
    cluster up for it, and stopped after where it was not running)."""
    from data_prep.redis_cluster.keys import cluster_of
    cluster = cluster_of(dest)
    with cluster.session():
        before = gets_served(cluster)
        locations.of(backends.get("redis"), dest).set_cache("warm")
        return gets_served(cluster) - before


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_backend_trains_through_the_runner(backend, mnist_small, results):
    run_cli(["mnist", backend, "warm", "--cpu", "--iters", "40", "--test-interval", "40",
             "--data", str(mnist_small.parent), "--out", str(results)])
    records = [r for r in recorded(results, "mnist") if r.backend == backend]
    assert len(records) == 1
    r = records[0]
    assert r.ok and r.iterations == 40 and r.cache == "warm" and r.compute == {"mode": "cpu"} and r.au is None
    assert r.test_accuracy is not None and r.test_iteration == 40 and r.final_loss < r.first_loss
    assert 0 < r.startup_seconds < r.wall_seconds and r.solver_seconds > 0
    assert r.wall_seconds >= r.solver_seconds + (r.startup_seconds + r.initial_test_seconds) * 0.9
    if backends.get(backend).location == "local":  # measured by mincore; a server's memory is not measured so
        assert r.cache_resident_fraction > 0.99 and r.cache_method.startswith("read")
    else:  # the servers hold every record either way: what warm does is read each one once
        assert r.cache_method.startswith("every record read once over the network")
        dest, split = mnist_small / backend, manifest.load(mnist_small / backend).splits
        gets = warm_pass_gets(dest)
        # every train and test record, plus a GET of each split's marker when its keys are
        # listed and again when it is checked
        counts = {phase: s.count for phase, s in split.items()}
        assert gets == sum(counts.values()) + 2 * len(split), f"the warm pass ran {gets} GETs for the records {counts}"
    assert r.monitor["samples"] >= 1 and "cpu_user_mean" in r.monitor
    assert r.process["cpu_seconds"] > 0 and "solver (main thread)" in r.process["thread_cpu_seconds"]
    assert 10 * 2**20 < r.process["peak_rss_bytes"] < 4 * 2**30
    assert 5 * 2**20 < r.process["peak_anon_bytes"] <= r.process["peak_rss_bytes"]
    if backends.get(backend).location == "local":
        assert r.location["kind"] == "local" and r.location["path"].endswith(f"mnist/{backend}")
        from data_prep.disk import read_ahead_knob
        knob = read_ahead_knob(mnist_small)
        assert r.location["read_ahead_kb"] == (int(knob.read_text()) if knob.exists() else None)
    else:
        assert r.location["kind"] == backends.get(backend).location
    run_dir = results / r.run_dir
    assert (run_dir / "caffe.log").exists() and (run_dir / "monitor.csv").exists()
    assert r.environment["caffe_build_key"] and isinstance(r.environment["proactive_reclaim"], list)
    # the host's per-core speed at Caffe's image path, measured for this run
    probe = r.environment["cpu_probe"]
    assert probe["images_per_second"] > 10 and probe["seconds"] >= 1.0 and probe["images"] >= 10


def test_a_recorded_run_is_skipped(mnist_small, tmp_path):
    args = ["mnist", "lmdb", "warm", "--iters", "20", "--data", str(mnist_small.parent), "--out", str(tmp_path)]
    assert "already recorded" not in run_cli(args).stderr
    assert "already recorded" in run_cli(args).stderr
    assert len(recorded(tmp_path, "mnist")) == 1


def test_cold_run_is_measured_not_resident(mnist_small, tmp_path):
    if not cache.can_drop_caches():
        pytest.skip("needs root to drop caches")
    run_cli(["mnist", "images", "cold", "--cpu", "--iters", "20", "--test-interval", "20",
             "--data", str(mnist_small.parent), "--out", str(tmp_path)])
    [r] = recorded(tmp_path, "mnist")
    assert r.cache_method == "drop_caches"
    assert r.cache_resident_fraction < 0.05
    assert r.process["read_bytes"] > 0.5 * r.train_footprint["apparent_bytes"]  # the run itself read the files
    assert r.cache_resident_fraction_after > 0.4  # measured once it had read them


def test_a_warm_run_after_a_cold_one_finds_its_program_warm_too(mnist_small, tmp_path):
    """pymem's Python modules are loaded by no other backend: after a cold run dropped them, a
    warm pymem run used to read ~75 MiB of them at start-up (14 s at the 2016 disk's 150 IOPS)."""
    if not cache.can_drop_caches():
        pytest.skip("needs root to drop caches")
    common = ["--iters", "10", "--accelerator", "2ms", "--data", str(mnist_small.parent), "--out", str(tmp_path)]
    run_cli(["mnist", "lmdb", "cold"] + common)
    run_cli(["mnist", "pymem", "warm"] + common)
    [r] = [r for r in recorded(tmp_path, "mnist") if r.backend == "pymem"]
    assert r.ok and "program loaded once" in r.cache_method
    assert r.process["read_bytes"] < 8 * 2**20, r.process["read_bytes"]


def test_residency_follows_drop_and_warm(mnist_small):
    files = [f for f in (mnist_small / "images" / "train").iterdir()][:200]
    cache.warm(files)
    assert cache.residency(files) == 1.0
    cache.fadvise_dontneed(files)
    assert cache.residency(files) < 0.05


def test_cold_run_without_privilege_is_refused_clearly(mnist_small, tmp_path):
    script = ("import sys\n"
              "from data_prep import cache\n"
              "try:\n    cache.make_state('cold', [%r])\n"
              "except cache.CacheError as e:\n    print('REFUSED', e); sys.exit(3)\n") % (
                  str(mnist_small / "lmdb" / "train_lmdb" / "data.mdb"),)
    os.chmod(tmp_path, 0o755)
    p = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", PY, "-c", script],
                       capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 3, p.stderr
    assert "needs root" in p.stdout and "fadvise" in p.stdout


def test_fadvise_fallback_is_recorded_as_such(mnist_small, tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "can_drop_caches", lambda: False)
    config = RunConfig("mnist", "lmdb", "cold", iters=10, test_interval=10, cpu=True, data=str(mnist_small.parent),
                       out=str(tmp_path), cold_fallback="fadvise")
    r = runner.run(config, runner.Cell("lmdb", "cold", repeat=7), log=lambda *_: None)
    assert r.cache_method == "fadvise" and r.ok
    assert r.cache_resident_fraction <= COLD_AT_MOST and r.cache_state == "cold", \
        f"after fadvise {r.cache_resident_fraction:.1%} resident before the clock ({r.cache_state}; " \
        f"cold <= {COLD_AT_MOST:.0%})"


def test_monitor_samples_cpu_memory_disk_and_measures_itself(tmp_path):
    out = tmp_path / "m.csv"
    p = subprocess.Popen([PY, str(ROOT / "monitor" / "sampler.py"), str(out), "--interval", "0.2"])
    time.sleep(1.5)
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=10)
    summary = summarize(out)
    assert summary["samples"] >= 5
    assert 0 <= summary["cpu_idle_mean"] <= 100 and summary["mem_used_bytes_mean"] > 0
    assert "read_bytes_total" in summary
    assert 0 <= summary["monitor_cpu_fraction_of_core"] < 0.05  # CPU clock ticks are 10 ms: may read 0
    assert summary["monitor_startup_cpu_seconds"] > 0  # imports, kept out of the sampling's share


def _start_training(mnist_small, out):
    """run.py on a long CPU run, started as a shell starts a background job (SIGINT ignored,
    which Python then keeps), and the first Iteration in Caffe's log."""
    p = subprocess.Popen([PY, str(ROOT / "experiments" / "run.py"), "mnist", "lmdb", "warm", "--cpu",
                          "--iters", "100000", "--data", str(mnist_small.parent), "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    deadline = time.monotonic() + 120
    logs = []
    while time.monotonic() < deadline and not any("Iteration" in l.read_text() for l in logs):
        time.sleep(0.5)
        logs = list(out.glob("mnist/runs/*/caffe.log"))
    assert logs, "training never started"
    return p


def test_an_interrupted_run_leaves_no_record(mnist_small, tmp_path):
    p = _start_training(mnist_small, tmp_path)
    os.killpg(p.pid, signal.SIGINT)  # Ctrl-C: run.py and Caffe both get it
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert recorded(tmp_path, "mnist") == []


def test_a_caffe_stopped_by_a_signal_is_recorded_as_failed(mnist_small, tmp_path):
    p = _start_training(mnist_small, tmp_path)
    caffe = [int(c) for c in open(f"/proc/{p.pid}/task/{p.pid}/children").read().split()
             if os.path.basename(open(f"/proc/{c}/cmdline").read().split("\0")[0]) == "caffe"]
    assert len(caffe) == 1
    os.kill(caffe[0], signal.SIGINT)  # Caffe stops cleanly, exit 0, and logs "Optimization Done."
    _, err = p.communicate(timeout=60)
    assert p.returncode == 1, err  # run.py's own exit says a solver failed
    [r] = recorded(tmp_path, "mnist")
    assert r.status == "failed" and r.returncode == 0 and r.iterations < 100000
    assert "1 of 1 solvers failed" in err
    assert "Caffe was stopped by a signal at iteration" in err


def test_limits_without_a_cgroup_hierarchy_are_refused_clearly(mnist_small, tmp_path):
    env = dict(os.environ, IMGSTORE_CGROUP_ROOT=str(tmp_path))
    p = subprocess.run([PY, str(ROOT / "experiments" / "run.py"), "mnist", "lmdb", "warm", "--cpu",
                        "--iters", "10", "--mem-limit", "1G", "--data", str(mnist_small.parent),
                        "--out", str(tmp_path / "r")], capture_output=True, text=True, env=env)
    assert p.returncode == 2 and "holds no cgroup hierarchy" in p.stderr
    assert recorded(tmp_path / "r", "mnist") == []


def test_paper2016_profile_sets_the_documented_limits_and_a_changed_one_is_not_the_profile():
    limits = cgroup.Limits.from_args(profile="paper2016")
    assert (limits.cpus, limits.riops, limits.rbps, limits.mem_bytes) == (8, 188, 600 * 10**6, 16 * 2**30)
    assert limits.profile == "paper2016" and limits.label() == "paper2016 profile"
    changed = cgroup.Limits.from_args(profile="paper2016", riops=1000)
    assert changed.profile is None and changed.modified_from == "paper2016"
    assert "1000 read IOPS" in changed.label() and "600 MB/s" in changed.label()
    # records written before this check named the profile whatever was changed
    old = {"cpus": 8, "mem_bytes": 16 * 2**30, "riops": 1000, "rbps": 600 * 10**6, "profile": "paper2016"}
    assert cgroup.Limits.from_record(old).profile is None


def test_a_machine_profile_brings_its_accelerator_unless_one_is_asked():
    from experiments import run as run_py
    if toolchain.cuda_built():
        pytest.skip("with a CUDA build the real GPU trains")
    args = run_py.parser().parse_args(["mnist", "lmdb", "warm", "--profile", "paper2016"])
    assert run_py.compute_choice(args) == (-1, "titanx2016")
    args = run_py.parser().parse_args(["mnist", "lmdb", "warm", "--profile", "paper2016", "--accelerator", "h100"])
    assert run_py.compute_choice(args) == (-1, "h100")
    assert run_py.compute_choice(run_py.parser().parse_args(["mnist", "lmdb", "warm"])) == (-1, "h100")


def test_read_iops_limit_bites_under_this_machines_cgroup(mnist_small, tmp_path):
    """Under the cgroup the runner makes (v1 here, v2 where present), a cold read of 300 PNG
    files at 150 read IOPS takes seconds; unlimited, a fraction of one."""
    if not cache.can_drop_caches() or cgroup.version() is None:
        pytest.skip("needs root and a cgroup hierarchy")
    from data_prep import locations
    files = sorted((mnist_small / "images" / "train").iterdir())[:300]
    location = locations.LocalFolder(mnist_small / "images", files)
    group = cgroup.create(cgroup.Limits(riops=150, mem_bytes=2**30, cpus=1), f"test-{os.getpid()}", location)
    try:
        limited, free = _cold_read(files, group), _cold_read(files, None)
    finally:
        group.remove()
    assert group.version == cgroup.version()
    assert limited > 1.0 and limited > 4 * free, (limited, free)


def test_read_limits_wait_until_the_run_applies_them(mnist_small):
    """A run warms its cache inside its cgroup before the read limit: throttled, warming MNIST's
    70,002 PNGs at 287 IOPS takes about 4 minutes, and a proactive reclaimer evicted 16% again.
    Cold reads of 300 files: unthrottled before limit_reads(), >= 2 s at 150 IOPS after."""
    if not cache.can_drop_caches() or cgroup.version() is None:
        pytest.skip("needs root and a cgroup hierarchy")
    from data_prep import locations
    files = sorted((mnist_small / "images" / "train").iterdir())[:300]
    location = locations.LocalFolder(mnist_small / "images", files)
    group = cgroup.create(cgroup.Limits(riops=150, mem_bytes=2**30), f"test-defer-{os.getpid()}", location,
                          limit_reads_now=False)
    try:
        unlimited_keys = set(group.applied)
        before = _cold_read(files, group)
        group.limit_reads()
        after = _cold_read(files, group)
        paced = group.throttled_reads()
    finally:
        group.remove()
    assert not any(k.startswith(("blkio", "io.")) for k in unlimited_keys), unlimited_keys
    assert any(k.startswith(("blkio", "io.")) for k in group.applied), group.applied
    assert after > 1.0 and after > 4 * before, (before, after)
    # the throttle's own count (the files and the cold interpreter's libraries; the reads before
    # the limit not in it) explains the time at 150/s: at least that (less its first burst), and
    # at most that plus what the same cold read costs this host unthrottled, with room to spare
    assert len(files) <= paced["read_ios"], paced
    assert paced["read_bytes"] >= sum(f.stat().st_size for f in files)
    assert 0.9 * paced["read_ios"] / 150 <= after <= paced["read_ios"] / 150 + 2 * before + 1.0, (after, before, paced)


def test_a_cpu_quota_slows_a_busy_thread_to_its_share():
    """A quota of a quarter of a core: a thread spinning for 1.5 s of wall clock gets at most
    0.375 s of CPU (and one period's more), and the kernel says it throttled the group; on any
    host, however busy (unlimited it gets up to 1.5 s, less on a busy host: no bound of its own
    follows). The group is gone afterwards."""
    if cgroup.version() is None or not os.access(cgroup.CGROUP_ROOT, os.W_OK):
        pytest.skip("needs root and a cgroup hierarchy")
    spin = ("import time\nt, cpu = time.monotonic(), time.process_time()\nwhile time.monotonic() - t < 1.5: pass\n"
            "print(time.process_time() - cpu)\n")  # the spin's own CPU, not the interpreter's start's

    def cpu_seconds(group):
        out = subprocess.run([sys.executable, "-c", spin], check=True, capture_output=True, text=True,
                             preexec_fn=group.enter).stdout
        return float(out)

    group = cgroup.create(cgroup.Limits(cpu_quota=0.25), f"test-quota-{os.getpid()}", None)
    try:
        limited = cpu_seconds(group)
        throttling = group.cpu_throttling()
    finally:
        group.remove()
    assert any(k in group.applied for k in ("cpu.max", "cpu.cfs_quota_us")), group.applied
    assert 0 < limited <= 0.25 * 1.5 + 0.05 and throttling["throttled_periods"] > 0, (limited, throttling)
    assert not any(p.exists() for p in group.paths)
    with pytest.raises(cgroup.CgroupError, match="positive number of cores"):
        cgroup.Limits.from_args(cpu_quota=0)


def test_a_run_with_a_memory_limit_is_kept_from_proactive_reclaim(mnist_small):
    """Where the host runs a DAMON pageout scheme (this project's CI VM: file pages idle >= 60 s),
    a run's memory cgroup is filtered out of it while the group lives, the scheme's own filters
    come back after, and a filter left by a run that died is dropped by the next one."""
    from data_prep import locations
    folders = [f for f in (cache.filter_folder(s) for _, _, s in cache.pageout_schemes()) if f]
    if not folders or cgroup.version() is None:
        pytest.skip("needs a DAMON pageout scheme with filters, root and a cgroup hierarchy")
    folder = folders[0]
    original = [f for f in cache._filters(folder) if not f.get("memcg_path", "").startswith(cache.OURS)]
    location = locations.LocalFolder(mnist_small / "images", [])
    died = cgroup.create(cgroup.Limits(mem_bytes=2**30), f"test-died-{os.getpid()}", location)
    died._restore_reclaim = None  # as if killed before it could restore the filters
    died.remove()
    group = cgroup.create(cgroup.Limits(mem_bytes=2**30), f"test-reclaim-{os.getpid()}", location)
    try:
        during = cache._filters(folder)
    finally:
        group.remove()
    assert during[0] == dict(during[0], type="memcg", memcg_path=f"/imgstore/test-reclaim-{os.getpid()}",
                             matching="Y", allow="N")
    assert during[1:] == original and cache._filters(folder) == original
    assert any(k.startswith("damon ") for k in group.applied), group.applied


def _cold_read(files, group):
    cache.drop_caches()
    start = time.monotonic()
    subprocess.run([sys.executable, "-c", "import sys\nfor f in sys.argv[1:]: open(f, 'rb').read()\n"] +
                   [str(f) for f in files], check=True, preexec_fn=group.enter if group else None)
    return time.monotonic() - start


def test_relative_data_and_results_folders_work(mnist_small, tmp_path):
    """Caffe runs in the run's own folder; the paths it is given must not be relative."""
    import shutil
    shutil.copytree(mnist_small / "lmdb", tmp_path / "data" / "mnist" / "lmdb")
    p = subprocess.run([PY, str(ROOT / "experiments" / "run.py"), "mnist", "lmdb", "warm", "--iters", "10",
                        "--data", "data", "--out", "out"], cwd=tmp_path, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert [r.status for r in recorded(tmp_path / "out", "mnist")] == ["ok"]


def test_warming_under_a_memory_limit_keeps_only_what_the_limit_allows(tmp_path):
    """A warm artifact larger than the training's memory cannot stay cached whole: the warm
    read runs inside the training's cgroup, as the training's own reads would."""
    if not cache.can_drop_caches() or cgroup.version() is None:
        pytest.skip("needs root and a cgroup hierarchy")
    from data_prep import locations
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        for _ in range(32):
            f.write(b"\x01" * (8 << 20))  # 256 MiB
    location = locations.LocalFolder(tmp_path, [big])
    group = cgroup.create(cgroup.Limits(mem_bytes=96 * 2**20), f"test-warm-{os.getpid()}", location)
    try:
        cache.drop_caches()
        how, limited = location.set_cache("warm", group=group)
    finally:
        group.remove()
    how_free, free = location.set_cache("warm")
    assert how == "read in the training's cgroup" and limited < 0.5, limited
    assert how_free == "read" and free == 1.0


def test_warming_takes_more_files_than_a_command_line_holds(tmp_path):
    """MNIST as image files is 70,002 paths, ~3 MB of names: more than one exec may carry."""
    one = tmp_path / "a.png"
    one.write_bytes(b"\x02" * 4096)
    files = [one] * 70_002
    cache.fadvise_dontneed([one])
    cache.warm(files, enter=lambda: None)  # the child as the runner starts it inside a cgroup
    assert cache.residency([one]) == 1.0


def test_a_cold_run_whose_data_fits_in_memory_says_so_and_records_it(mnist_small, tmp_path):
    """MNIST fits in any memory: cold is the first pass from the disk, and the run says so before
    it trains; its record keeps the passes, the data and the room, and a warm run has none."""
    said = []
    r = runner.run(RunConfig("mnist", "lmdb", "cold", iters=40, cpu=True, data=str(mnist_small.parent), out=str(tmp_path),
                             quiet=True), log=said.append)
    c = r.cold_condition
    assert c["passes"] == pytest.approx(40 * 64 / 640) and c["first_pass_only"] and c["data_over_room"] < 0.01
    assert c["train_bytes"] > 0 and c["room_from"] == "the host's memory"
    line = next(s for s in said if s.startswith("cold:"))  # (a line about the run lock may come first)
    assert line.startswith("cold: 4 passes") and "only the first pass reads the disk" in line
    assert "the host's memory" in line and "as in the paper's MNIST and CIFAR-10 runs" in line
    warm = runner.run(RunConfig("mnist", "lmdb", "warm", iters=20, cpu=True, data=str(mnist_small.parent),
                                out=str(tmp_path), quiet=True), log=said.append)
    assert warm.cold_condition is None
    # data 5x what the memory leaves: the paper's condition, said as such
    assert "(the paper's condition" in runner.cold_words(dict(c, data_over_room=5.2, first_pass_only=False))
    # CaffeNet's own memory is its prefetched batches: ~0.74 GiB, as its records measure
    from data_prep import datasets
    assert runner.solver_memory_estimate(datasets.get("imagenet").model) / 2**30 == pytest.approx(0.74, abs=0.01)


def test_the_run_line_names_what_held_the_accelerator_up():
    from experiments.record import Record

    def run(au, threads, **kw):
        return Record("r", "mnist", "images", "cold", au=au, solver_seconds=10.0,
                      process={"thread_cpu_seconds": threads}, **kw)
    assert run(0.95, {"data prefetch": 9.8}).what_limited("ImageData") is None  # fed: nothing to name
    assert "prefetch thread's CPU (busy 98%" in run(0.3, {"data prefetch": 9.8}).what_limited("ImageData")
    paced = run(0.1, {"data prefetch": 1.0}, limits={"riops": 188, "throttled_reads": {"read_ios": 70000}})
    assert paced.what_limited("ImageData").startswith("the disk's read limit (188 IOPS")
    hdf5 = run(0.46, {"solver (main thread)": 0.7}, compute={"mode": "emulated", "host_copy_latency_us": 7.5})
    assert "host-to-device copies" in hdf5.what_limited("HDF5Data")
    assert "waiting on the data" in run(0.5, {"data prefetch": 2.0}).what_limited("Data")
    # a handful of paced reads is not what held a 10 s run up
    few = run(0.5, {"data prefetch": 2.0}, limits={"riops": 188, "throttled_reads": {"read_ios": 13}})
    assert "waiting on the data" in few.what_limited("ImageData")
    quota = run(0.6, {"data prefetch": 5.0}, limits={"cpu_quota": 0.6, "cpu_throttling": {
        "periods": 1000, "throttled_periods": 700, "throttled_seconds": 3.1}})
    assert quota.what_limited("ImageData") == "the CPU quota (0.6 cores; throttled in 70% of its periods)"
    pool = run(0.5, {"data prefetch": 9.0, "image decode": 20.0}, read_options={"decode_threads": 4})
    assert "beside 3 more threads" in pool.what_limited("ImageData")


def test_imagenet_is_sized_for_the_papers_condition_unless_the_command_line_chooses():
    from experiments import run as run_py
    a, applied = run_py.default_sizing(run_py.parse(["imagenet", "lmdb", "cold"]))
    assert applied == ["--count", "12800", "--mem-limit", "1G", "--iters", "150"]
    assert (a.count, a.mem_limit, a.iters) == (12800, "1G", 150) and "3 epochs" in a.iters_reason
    for chosen in (["--iters", "10"], ["--mem-limit", "2G"], ["--profile", "paper2016"], ["--concurrent", "2"]):
        a = run_py.parse(["imagenet", "lmdb", "cold", *chosen])
        assert run_py.default_sizing(a) == (a, None)
    assert run_py.default_sizing(run_py.parse(["mnist", "lmdb", "cold"]))[1] is None
