"""One run of the paper's experiment: a stock net trained from one backend under one cache
state, with the system monitor on, recorded as one Record (experiments/record.py).

A run's files: RESULTS/DATASET/runs/RUN_ID/{train,test,solver}.prototxt, caffe.log,
monitor.csv; its record is appended to RESULTS/DATASET/records.jsonl when the run finished,
ok or failed (a failed run keeps its log); an interrupted run leaves its folder but no record.
"""
import fcntl
import json
import os
import platform
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import psutil

import toolchain
from data_prep import backends, cache, datasets, locations
from experiments import accelerators, caffe_log, cgroup, proctrack
from experiments.record import Record, append

ROOT = toolchain.ROOT
LOCK = Path(os.environ.get("IMGSTORE_LOCK", "/tmp/imgstore-run.lock"))


class RunError(RuntimeError):
    pass


@dataclass
class RunSpec:
    dataset: str
    backend: str
    cache: str                       # warm | cold
    repeat: int = 0
    iters: int = None                # None: the stock solver's max_iter
    test_interval: int = None
    test_iter: int = None
    gpu: int = -1                    # -1: CPU
    accelerator: str = None          # an accelerators.json profile, "2.5ms", or None: real compute
    data_root: Path = ROOT / "data"
    results: Path = ROOT / "results"
    limits: cgroup.Limits = field(default_factory=cgroup.Limits)
    cold_fallback: str = None        # None or "fadvise"
    monitor_interval: float = 1.0
    seed: int = None
    plan: dict = None                # position in the matrix's interleaved order
    iterations_reason: str = None    # why iters differ from the stock solver, if chosen for the user
    progress: bool = True            # a progress line on stderr while Caffe trains
    rtt_ms: float = None             # round trip to a server location (delay proxy); None: direct
    read_options: dict = field(default_factory=dict)  # DataParameter fields for the backend (redis, lmdb)
    concurrent: int = 1              # training processes on the same artifact at once


def test_interval_for(max_iter, wanted):
    """The largest interval <= wanted that divides max_iter, so that Caffe's last test pass
    runs at the last iteration (Caffe tests after the loop only when it divides)."""
    wanted = max(1, min(wanted, max_iter))
    return next(i for i in range(wanted, 0, -1) if max_iter % i == 0)


def write_net_files(spec, run_dir, dataset, backend, dest, compute):
    import caffe
    from models.nets import net_proto, solver_text
    model = dataset.model
    unknown = set(spec.read_options) - set(backend.read_options)
    if unknown:
        raise RunError(f"{backend.name} takes no read option {', '.join(sorted(unknown))}")
    layer = backend.data_layer(dest, dataset, dest.parent / "mean.binaryproto", spec.read_options)
    emulated = compute.emulated
    test_emulated = (compute.test_ms_per_iteration, 0.0) if emulated else None
    for phase, name, phase_emulated in [(caffe.TRAIN, "train", emulated), (caffe.TEST, "test", test_emulated)]:
        (run_dir / f"{name}.prototxt").write_text(str(net_proto(model, layer, phase, emulated=phase_emulated,
                                                                host_copies=compute.host_copies)))
    test_count = json.loads((dest / "manifest.json").read_text())["splits"]["test"]["count"]
    test_iter = spec.test_iter or min(model.solver.test_iter, max(1, test_count // model.test_batch))
    max_iter = spec.iters or model.solver.max_iter
    test_interval = test_interval_for(max_iter, spec.test_interval or model.solver.test_interval)
    (run_dir / "solver.prototxt").write_text(solver_text(
        model, run_dir / "train.prototxt", run_dir / "test.prototxt", run_dir / "snapshot",
        gpu=spec.gpu >= 0, max_iter=max_iter, test_iter=test_iter, test_interval=test_interval, seed=spec.seed))
    return max_iter, test_iter


def environment():
    """Where a number came from: build, machine."""
    env = {"caffe_build_key": toolchain.build_key(), "caffe_options": toolchain.build_options(),
           "kernel": platform.release(), "cpu_model": _cpu_model(), "cpu_cores": os.cpu_count(),
           "memory_bytes": psutil.virtual_memory().total, "python": platform.python_version(),
           "cgroup": cgroup.version(), "image_decoder": toolchain.image_decoder(),
           "proactive_reclaim": cache.proactive_reclaim()}
    env.update(_gpu_info())
    return env


def _cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _gpu_info():
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        name = pynvml.nvmlDeviceGetName(h)
        return {"gpu_model": name.decode() if isinstance(name, bytes) else name,
                "gpu_driver": pynvml.nvmlSystemGetDriverVersion(),
                "cuda_driver_version": pynvml.nvmlSystemGetCudaDriverVersion()}
    except Exception:
        return {"gpu_model": None}


def summarize_monitor(csv_path):
    import csv
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    out = {"samples": len(rows)}
    for col in ["cpu_user", "cpu_system", "cpu_iowait", "cpu_idle", "mem_used_bytes", "mem_cached_bytes",
                "gpu_util", "gpu_mem_used_bytes"]:
        vals = [float(r[col]) for r in rows if r.get(col) not in (None, "")]
        if vals:
            out[f"{col}_mean"] = sum(vals) / len(vals)
            out[f"{col}_peak"] = max(vals)
    for col in ["read_bytes", "read_requests", "net_recv_bytes"]:
        out[f"{col}_total"] = sum(float(r.get(col) or 0) for r in rows) if rows else 0
    self_path = Path(str(csv_path) + ".self.json")
    if self_path.exists():
        me = json.loads(self_path.read_text())
        out["monitor_cpu_fraction_of_core"] = me["cpu_seconds"] / max(me["wall_seconds"], 1e-9)
        out["monitor_startup_cpu_seconds"] = me.get("startup_cpu_seconds")
    return out


def run(spec, log=print):
    """Run one cell of the matrix with one solver; return its Record (also appended to records.jsonl)."""
    if spec.concurrent != 1:
        raise RunError("several solvers at once give several records: use run_group")
    return run_group(spec, log)[0]


def run_group(spec, log=print):
    """Run one cell with spec.concurrent solvers at once; return their Records."""
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for the run lock {LOCK} (another run is training)...")
            fcntl.flock(lock, fcntl.LOCK_EX)
        return _run_locked(spec, log)


def _run_locked(spec, log):
    # Caffe runs in the run's folder: every path it is given must be absolute
    spec.data_root, spec.results = Path(spec.data_root).resolve(), Path(spec.results).resolve()
    dataset, backend = datasets.get(spec.dataset), backends.get(spec.backend)
    dest = Path(spec.data_root) / dataset.name / backend.name
    if not (dest / "manifest.json").exists():
        raise RunError(f"{dest}: no complete artifact (run data_prep/prepare.py {dataset.name} {backend.name})")
    env = environment()
    compute = (accelerators.choose(spec.accelerator, dataset.model, spec.gpu) if spec.accelerator
               else accelerators.real(dataset.model, spec.gpu, env.get("gpu_model")))
    group_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
    run_ids = [group_id] if spec.concurrent == 1 else [f"{group_id}-s{i}" for i in range(spec.concurrent)]
    run_dirs = [Path(spec.results) / dataset.name / "runs" / run_id for run_id in run_ids]
    for run_dir in run_dirs:
        run_dir.mkdir(parents=True)
        max_iter, test_iter = write_net_files(spec, run_dir, dataset, backend, dest, compute)
    location = locations.of(backend, dest, spec.rtt_ms)
    # limits first: a run refused for them must not have flushed the page cache; the read
    # limits wait until the cache is set (cgroup.Group.limit_reads)
    group = cgroup.create(spec.limits, group_id, location, limit_reads_now=False) if spec.limits.any() else None
    try:
        trainings, how, resident, monitor = _train(spec, run_dirs, dataset, backend, dest, location, compute,
                                                   max_iter, group, log)
        manifest = json.loads((dest / "manifest.json").read_text())
        shared = dict(  # what every solver of the run shares, measured once
            dataset=dataset.name, backend=backend.name, cache=spec.cache, repeat=spec.repeat,
            cache_method=how, cache_resident_fraction=round(resident, 4),
            cache_resident_fraction_after=_rounded(location.resident_fraction(), 4),
            iterations_setting=spec.iters, iterations_reason=spec.iterations_reason,
            compute=compute.as_dict(), gpu_id=spec.gpu,
            source=manifest["source"], source_fingerprint=manifest["source_fingerprint"],
            artifact_footprint=manifest["footprint"], train_footprint=manifest["splits"]["train"]["footprint"],
            location=location.describe(), read_options=spec.read_options or None,
            limits=dict(spec.limits.as_dict(), cgroup=group.version if group else None,
                        applied=group.applied if group else None),
            monitor=monitor, plan=spec.plan, environment=env)
        together = ({"group": group_id, "solvers": spec.concurrent,
                     "makespan_seconds": round(max(t.wall for t in trainings), 3),
                     "device_read_bytes": monitor.get("read_bytes_total")} if spec.concurrent > 1 else None)
        return [_record(spec, run_id, t, shared, compute, (max_iter, test_iter), dict(together, member=i) if together else None, log)
                for i, (run_id, t) in enumerate(zip(run_ids, trainings))]
    finally:
        location.close()
        if group:
            group.remove()


class Training:
    """One Caffe training process, its log in its run folder, watched until it exits."""

    def __init__(self, cmd, run_dir, env, group):
        self.cmd, self.run_dir, self.started = cmd, run_dir, time.time()
        self.log = open(run_dir / "caffe.log", "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, cwd=run_dir, env=env,
                                     preexec_fn=group.enter if group else None)
        self.tracker = proctrack.Tracker(self.proc.pid)
        self.process, self.returncode, self.wall = {}, None, None
        self.reads_at = {}  # phase -> the process's read bytes when its log first showed it (caffe_log.phases_begun)
        self._log_read_to = 0

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
        (every 0.5 s): before the test pass (libraries, net set-up, opening the data), the test
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


def _train(spec, run_dirs, dataset, backend, dest, location, compute, max_iter, group, log):
    """Sets the cache, then trains one process per run folder at once, with the monitor on.
    Returns (trainings, how the cache was set, resident fraction, the monitor's summary)."""
    how, resident = location.set_cache(spec.cache, spec.cold_fallback, group)
    python_path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    child_env = dict(os.environ, GLOG_logtostderr="1", GLOG_minloglevel="0", PYTHONPATH=python_path)
    warmup = backend.program_warmup() if spec.cache == "warm" else None
    if warmup:
        _warm_program(warmup, child_env, group)
        how += ", the training program loaded once"
    if group:
        group.limit_reads()
    held = (f"{resident:.1%} of {len(location.files)} files resident" if location.files
            else "every record in the servers' memory")
    solvers = f", {len(run_dirs)} solvers at once" if len(run_dirs) > 1 else ""
    log(f"{dataset.name} {backend.name} {spec.cache} #{spec.repeat}: cache made {spec.cache} by {how}, "
        f"{held}; compute: {_compute_words(compute)}{solvers}")
    device = location.block_device()
    monitor_csv = run_dirs[0] / "monitor.csv"  # machine-wide: one for the group
    monitor = subprocess.Popen([str(toolchain.PYTHON), str(ROOT / "monitor" / "sampler.py"), str(monitor_csv),
                                "--interval", str(spec.monitor_interval)] + (["--device", device] if device else []),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    trainings = []
    try:
        for run_dir in run_dirs:
            trainings.append(Training(backend.train_command(run_dir / "solver.prototxt", dest, dataset, spec.gpu),
                                      run_dir, child_env, group))
        progress = Progress(run_dirs[0] / "caffe.log", max_iter, dataset.model.batch, spec.progress)
        while not all([t.finished(0.5 / len(trainings)) for t in trainings]):  # a list: every one is looked at
            progress.show()
        progress.done()
    except BaseException:  # Ctrl-C, kill: no record, no orphan
        for t in trainings:
            t.kill()
        raise
    finally:
        monitor.send_signal(signal.SIGTERM)
        monitor.wait()
        for run_dir in run_dirs:  # trained weights are no result here (CaffeNet: 240 MB)
            for f in run_dir.glob("snapshot_iter_*"):
                f.unlink()
    return trainings, how, resident, summarize_monitor(monitor_csv)


def _rounded(value, digits):
    return None if value is None else round(value, digits)


def _warm_program(cmd, env, group):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600,
                       preexec_fn=group.enter if group else None)
    if p.returncode != 0:
        raise RunError(f"loading the training program to warm it failed ({' '.join(cmd)}): "
                       f"{p.stderr.strip()[-500:]}")


def _record(spec, run_id, training, shared, compute, solver_settings, concurrent, log):
    """One solver's Record, from its log and process, with the run's shared fields; appended.
    solver_settings: (max_iter, test_iter) as written, for a log that does not say them."""
    rc, run_dir = training.returncode, training.run_dir
    parsed = caffe_log.parse((run_dir / "caffe.log").read_text(errors="replace"))
    first = parsed["first_iteration_at"]
    started = datetime.fromtimestamp(training.started)
    timed = caffe_log.timing(parsed, compute, *solver_settings)
    au = timed.pop("au")
    record = Record(
        run_id=run_id, **shared, status="ok" if rc == 0 and parsed["done"] else "failed", returncode=rc,
        iterations=parsed["last_iteration"], wall_seconds=round(training.wall, 3),
        startup_seconds=round(((parsed["initial_test_at"] or first) - started).total_seconds(), 3) if first else None,
        **timed, solver_seconds=parsed["solver_seconds"],
        iterations_per_second=(parsed["last_iteration"] / parsed["solver_seconds"] if parsed["solver_seconds"] else None),
        test_accuracy=parsed["test_accuracy"], test_loss=parsed["test_loss"], test_iteration=parsed["test_iteration"],
        first_loss=parsed["first_loss"], final_loss=parsed["final_loss"],
        au=au, concurrent=concurrent,
        command=training.cmd, process=training.process,
        run_dir=str(run_dir.relative_to(spec.results)), finished=time.strftime("%Y-%m-%dT%H:%M:%S"))
    append(Path(spec.results) / shared["dataset"] / "records.jsonl", record)
    au_text = f", AU {au:.1%}" if au is not None else ""
    over = record.data_over_cache_room() or 0
    room_text = (f", train data {over:.1f}x the {record.cache_room_bytes() / 2**30:.2f} GiB the memory limit "
                 "leaves for the page cache" if over >= 1 else "")
    who = f"  solver {concurrent['member']}:" if concurrent else " "
    log(f"{who} {record.status}: {training.wall:.1f} s wall, start-up {record.startup_seconds} s, solver "
        f"{parsed['solver_seconds']} s{au_text}, test accuracy {parsed['test_accuracy']} at iteration "
        f"{parsed['test_iteration']}{room_text}")
    if record.status != "ok":
        log(f"  the run failed (exit {rc}); its log: {run_dir / 'caffe.log'}")
    return record


def _compute_words(compute):
    if compute.mode == "emulated":
        return f"emulated {compute.accelerator}, {compute.ms_per_iteration} ms per iteration (Caffe's data path is real)"
    return "real GPU" if compute.mode == "gpu" else "real CPU"


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
