"""One run of the paper's experiment: a stock net trained from one backend under one cache
state, with the system monitor on, recorded as one Record (experiments/record.py).

A run's files: RESULTS/DATASET/runs/RUN_ID/{train,test,solver}.prototxt, caffe.log,
monitor.csv; its record is appended to RESULTS/DATASET/records.jsonl when the run finished,
ok or failed (a failed run keeps its log); an interrupted run leaves its folder but no record.
The steps: resolve a RunConfig's cell (Cell: backend, cache, repeat) into a Run (the artifact, its
location, the compute, the solver; what the flags imply comes from experiments.resolved), set
the cache, start the monitor and the training processes (experiments.training), record.
"""
import fcntl
import os
import platform
import signal
import subprocess
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import psutil

import toolchain
from data_prep import backends, cache, datasets, locations
from data_prep import manifest as manifest_file
from experiments import accelerators, caffe_log, cgroup, hosts, proctrack, resolved
from experiments import record as record_module
from experiments.config import RunConfig
from experiments.record import NEEDS, Record, append, cache_state
from experiments.training import Progress, child_setup, train_all
from models.nets import SolverSettings, write_net_files
from monitor import cpu_probe
from monitor.summary import summarize as summarize_monitor

ROOT = toolchain.ROOT
LOCK = toolchain.RUN_LOCK  # one run at a time per user


class RunError(RuntimeError):
    pass


# a failed append: the OS's error, or the one experiments.record raises for a short write
RECORD_WRITE_ERRORS = (record_module.RecordWriteError, OSError)  # OSError: whatever else the write met


@dataclass(frozen=True)
class Cell:
    """Which cell of the configuration's plan a run is: its backend, cache state and repeat."""
    backend: str
    cache: str                       # warm | cold
    repeat: int = 0
    plan: dict = None                # position in the matrix's interleaved order


@dataclass
class Run:
    """A cell of a configuration, resolved: what every step of one run works on."""
    config: object                   # experiments.config.RunConfig: what the run asked (its record keeps it)
    cell: Cell
    resolution: object               # experiments.resolved.Resolved: what the config implies
    data_root: Path                  # config.data and config.out, absolute
    results: Path
    read_options: dict               # the backend's reader options (Backend.options)
    location_options: dict           # how its location is reached (Location.options)
    test_iter: int                   # None: the stock solver's, within the test split
    monitor_interval: float
    dataset: object                  # data_prep.datasets.Dataset
    backend: object                  # data_prep.backends.Backend
    dest: Path                       # the artifact
    manifest: object                 # its data_prep.manifest.Manifest
    compute: object                  # experiments.accelerators.Compute
    settings: SolverSettings
    group_id: str
    run_ids: list
    log: callable
    location: object = None          # data_prep.locations.Location, open while the run is
    group: object = None             # its cgroup, if limits were asked
    cold: dict = None                # cold_condition(run), for a cold run of local data

    @property
    def run_dirs(self):
        return [self.results / self.dataset.name / "runs" / run_id for run_id in self.run_ids]


def environment():
    """Where a number came from: build, machine."""
    env = {"caffe_build_key": toolchain.build_key(), "caffe_options": toolchain.build_options(),
           "kernel": platform.release(), "cpu_model": _cpu_model(), "cpu_cores": os.cpu_count(),
           "memory_bytes": psutil.virtual_memory().total, "python": platform.python_version(),
           "cgroup": cgroup.version(), "image_decoder": toolchain.image_decoder(),
           "proactive_reclaim": cache.proactive_reclaim(), "container": container(),
           "cpu_probe": cpu_probe.measure(), "boot_id": boot_id()}
    env.update(_gpu_info())
    return env


BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def boot_id():
    """This machine since it last started: two runs with one boot id ran on one machine (a lent
    machine's second call, a fresh VM or a reboot has another). None where the kernel does not say."""
    try:
        return BOOT_ID.read_text().strip() or None
    except OSError:
        return None


IMAGE_DESCRIPTION = Path("/etc/imgstore-image")  # written by the Dockerfile


def container():
    """None on a host; inside this project's Docker image, what the image says it was built
    from (base, pip source, Caffe build). A container may not drop caches or write cgroups."""
    if not Path("/.dockerenv").exists() and not IMAGE_DESCRIPTION.exists():
        return None
    found = {"kind": "docker" if Path("/.dockerenv").exists() else "unknown"}
    if IMAGE_DESCRIPTION.exists():
        for line in IMAGE_DESCRIPTION.read_text().splitlines():
            key, _, value = line.partition("=")
            if key:
                found[key.strip()] = value.strip()
    return found


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


def run(config, cell=None, log=print, resolution=None, test_iter=None, monitor_interval=1.0):
    """Run one cell of the matrix with one solver; return its Record (also appended to records.jsonl).
    config: an experiments.config.RunConfig; the rest as run_group has them."""
    if config.concurrent != 1:
        raise RunError("several solvers at once give several records: use run_group")
    return run_group(config, cell, log, resolution, test_iter, monitor_interval)[0]


def run_group(config, cell=None, log=print, resolution=None, test_iter=None, monitor_interval=1.0):
    """Run one cell of `config` (an experiments.config.RunConfig; cell: its Cell, by default
    config's backend and cache, repeat 0) with config.concurrent solvers at once; return their
    Records. resolution: config's experiments.resolved.Resolved, if already made. test_iter: the
    solver's (None: the stock one's); monitor_interval: the sampler's, in seconds."""
    cell = cell or Cell(config.backend, config.cache)
    resolution = resolution or resolved.resolve(config)
    with run_lock(log):
        try:
            toolchain.check_not_swapped()
        except toolchain.MissingBuild as e:
            raise RunError(str(e)) from None
        return _run_locked(config, cell, resolution, log, test_iter, monitor_interval)


class RecordNotWritten(RuntimeError):
    """A run finished, but its record could not be appended (the records file's write failed)."""


# this process's holds of the run lock: a second flock of it on a new descriptor would wait for
# the first for ever, so a caller already holding it (run.py across its plan) is let through
_lock_depth = 0


@contextmanager
def run_lock(log):
    """The user's run lock (one run, or one run.py's plan, at a time), waited for with a line
    naming its holder; re-entrant within a process."""
    global _lock_depth
    if _lock_depth:
        _lock_depth += 1
        try:
            yield
        finally:
            _lock_depth -= 1
        return
    with _run_lock(log):
        _lock_depth = 1
        try:
            yield
        finally:
            _lock_depth = 0


_held_fd = None  # the run lock's descriptor while this process holds it


def _drop_lock_in_child():
    """A forked child (a preparation's worker process) lets go of the run lock: it would
    otherwise hold it after this process died. Its descriptor now reads /dev/null."""
    if _held_fd is not None:
        null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        os.dup2(null, _held_fd, inheritable=False)
        os.close(null)


os.register_at_fork(after_in_child=_drop_lock_in_child)


@contextmanager
def _run_lock(log):
    global _held_fd
    LOCK.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise RunError(f"cannot open the run lock {LOCK} ({e.strerror}); IMGSTORE_LOCK names another") from None
    with os.fdopen(fd, "r+") as lock:
        if os.fstat(fd).st_uid != os.geteuid():
            raise RunError(f"the run lock {LOCK} belongs to uid {os.fstat(fd).st_uid}, not this user: "
                           "remove it, or name another with IMGSTORE_LOCK")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for the run lock {LOCK}: another run is training ({lock.read().strip() or 'pid unknown'})...")
            fcntl.flock(lock, fcntl.LOCK_EX)
        lock.seek(0)
        lock.truncate()
        lock.write(f"pid {os.getpid()}, {' '.join(psutil.Process().cmdline())[:200]}\n")
        lock.flush()
        _held_fd = fd
        try:
            yield
        finally:
            _held_fd = None


def _resolve(config, cell, resolution, log, test_iter, monitor_interval, gpu_model=None):
    # Caffe runs in the run's folder: every path it is given must be absolute
    data_root, results = Path(config.data).resolve(), Path(config.out).resolve()
    absent = hosts.missing(config.client_hosts) if config.client_hosts else []
    if absent:
        raise RunError(f"no network namespace {', '.join(absent)} on this machine (ip netns list): "
                       "client hosts are made by experiments/hosts.py, benchmarks/multihost.py say")
    dataset, backend = datasets.get(config.dataset), backends.get(cell.backend)
    dest = data_root / dataset.name / backend.name
    manifest = manifest_file.load(dest)
    if manifest is None:
        raise RunError(f"{dest}: no complete artifact (run data_prep/prepare.py {dataset.name} {backend.name})")
    read_options, location_options = resolution.read_for(cell.backend)
    backend.layer_options(read_options)  # an option the backend does not declare stops here
    gpu, accelerator = resolution.gpu, resolution.accelerator
    compute = (accelerators.choose(accelerator, dataset.model, gpu) if accelerator
               else accelerators.real(dataset.model, gpu, gpu_model))
    settings = SolverSettings.of(dataset.model, manifest.splits["test"].count, config.iters, test_iter,
                                 config.test_interval, gpu=gpu >= 0, seed=config.seed)
    group_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
    run_ids = [group_id] if config.concurrent == 1 else [f"{group_id}-s{i}" for i in range(config.concurrent)]
    return Run(config, cell, resolution, data_root, results, read_options, location_options, test_iter,
               monitor_interval, dataset, backend, dest, manifest, compute, settings, group_id, run_ids, log)


def _write_run_folders(run):
    layer = run.backend.data_layer(run.dest, run.dataset, run.dest.parent / "mean.binaryproto", run.read_options,
                                   **_reached_through(run.location))
    for run_dir in run.run_dirs:
        run_dir.mkdir(parents=True)
        write_net_files(run_dir, run.dataset.model, layer, run.settings, run.compute)


def _reached_through(location):
    """The data layer's keywords for what the run's open location reaches: a Redis location's
    cluster (the one the run named, --cluster), which the net must read rather than the one the
    artifact's folder would name on its own (none, for data prepared before it kept its seeds)."""
    cluster = getattr(location, "cluster", None)
    return {} if cluster is None else {"cluster": cluster}


PAPER_DATA_OVER_MEMORY = 5  # MLPerf Storage asks >= 5x; the paper's ImageNet was ~9x its machine's memory
PREFETCHED_BATCHES = 5      # Caffe's data layer keeps 4 batches prefetched, plus the one in use


def solver_memory_estimate(model):
    """A solver's own memory before it runs: its prefetched batches of float crops (CaffeNet: ~0.74
    GiB, what its records measure as peak anonymous memory; LeNet: ~1 MiB)."""
    c, h, w = model.input_shape
    return PREFETCHED_BATCHES * model.batch * c * h * w * 4


def cold_condition(run):
    """For a cold run of data in local files: how many passes it makes over the train data, that
    data's bytes, and the most memory could leave to the page cache (the run's memory limit less
    the solvers' estimated own memory, else the host's memory): when the data fits, only the
    first pass reads the disk."""
    if run.cell.cache != "cold" or run.backend.location != locations.LocalFolder.name:
        return None
    train = run.manifest.splits["train"]
    data = (train.footprint or {}).get("allocated_bytes")
    if not data or not train.count:
        return None
    limits = run.resolution.limits.for_solvers(run.config.concurrent)
    own = run.config.concurrent * solver_memory_estimate(run.dataset.model)
    room = max(limits.mem_bytes - own, 1) if limits.mem_bytes else psutil.virtual_memory().total
    passes = run.settings.max_iter * run.dataset.model.batch / train.count
    return {"passes": round(passes, 2), "train_bytes": data, "cache_room_upper_bytes": room,
            "data_over_room": round(data / room, 3), "first_pass_only": passes > 1 and data <= room,
            "room_from": ("the run's memory limit less the solvers' prefetched batches" if limits.mem_bytes
                          else "the host's memory")}


def cold_words(condition):
    """The line a cold run prints before it trains: its data against the memory that could cache it,
    and, below the paper's condition, what that means and how to get it."""
    if not condition:
        return None
    gib = 2 ** 30
    data, room = condition["train_bytes"] / gib, condition["cache_room_upper_bytes"] / gib
    head = (f"cold: {condition['passes']:g} passes over {data:.2f} GiB of train data; at most {room:.2f} GiB "
            f"({condition['room_from']}) can cache it: the data is {condition['data_over_room']:.2g}x that")
    if condition["data_over_room"] >= PAPER_DATA_OVER_MEMORY:
        return head + " (the paper's condition: its ImageNet was ~9x its memory; MLPerf Storage asks >= 5x)"
    what = ("only the first pass reads the disk, every later one the page cache" if condition["first_pass_only"]
            else "not the >= 5x MLPerf Storage asks")
    share = data / PAPER_DATA_OVER_MEMORY
    how = ("cold means the first pass from the disk here, as in the paper's MNIST and CIFAR-10 runs"
           if share < 0.5 else
           f"for the paper's condition leave at most {share:.1f} GiB to the cache: --mem-limit {share:.1f}G plus "
           "the solvers' own memory")
    return f"{head}: {what}; {how}"


def _run_locked(config, cell, resolution, log, test_iter, monitor_interval):
    env = environment()
    run = _resolve(config, cell, resolution, log, test_iter, monitor_interval, env.get("gpu_model"))
    run.cold = cold_condition(run)
    if run.cold:
        log(cold_words(run.cold))
    run.location = locations.of(run.backend, run.dest, run.location_options)  # before the net, which reads it
    try:
        _write_run_folders(run)
        for path in cgroup.remove_abandoned():
            log(f"removed cgroup {path}, left by an earlier run")
        # limits first: a run refused for them must not have flushed the page cache; the read
        # limits wait until the cache is set (cgroup.Group.limit_reads)
        limits = resolution.limits
        run.group = (cgroup.create(limits.for_solvers(config.concurrent), run.group_id, run.location,
                                   limit_reads_now=False)
                     if limits.any() else None)
        trainings, how, resident, monitor_csv = _train(run)
        errors = {}
        monitor = _measuring(errors, run.log)("monitor", lambda: summarize_monitor(monitor_csv))
        shared = _shared_fields(run, how, resident, monitor, env, errors)
        together = ({"group": run.group_id, "solvers": config.concurrent,
                     "makespan_seconds": round(max(t.wall for t in trainings), 3),
                     "device_read_bytes": (monitor or {}).get("read_bytes_total")}
                    if config.concurrent > 1 or config.client_hosts else None)
        return _record_all(run, trainings, shared, together)
    finally:
        run.location.close()
        if run.group:
            run.group.remove()


def _record_all(run, trainings, shared, together):
    """Every solver's Record, appended: one whose record cannot be written does not keep the
    others from theirs; then RecordNotWritten names those lost."""
    records, lost, unexpected = [], [], None
    for i, (run_id, t) in enumerate(zip(run.run_ids, trainings)):
        concurrent = dict(together, member=i, **_placed(run.config, i)) if together else None
        try:
            records.append(_record(run, run_id, t, shared, concurrent))
        except RECORD_WRITE_ERRORS as e:
            lost.append(f"{run_id}: {e}")
            run.log(f"  the record of {run_id} was not written: {e}")
        except Exception as e:  # noqa: BLE001 -- a fault of this code: the other solvers are still recorded
            unexpected = unexpected or e
            run.log(f"  the record of {run_id} was not made: {type(e).__name__}: {e}")
    if unexpected:
        raise unexpected
    if lost:
        raise RecordNotWritten(f"{len(lost)} of {len(trainings)} records not written to "
                               f"{run.results / run.dataset.name / 'records.jsonl'} "
                               f"(the runs' folders are kept): {'; '.join(lost)}"[:1500])
    return records


def _host_of(config, member):
    """The network namespace solver `member` runs in (None: this process's own)."""
    return config.client_hosts[member % len(config.client_hosts)] if config.client_hosts else None


def _placed(config, member):
    return {"client_hosts": len(config.client_hosts), "host": _host_of(config, member)} if config.client_hosts else {}


def _shared_fields(run, how, resident, monitor, env, errors):
    """What every solver of the run shares, measured once. A measurement that fails after the
    training (a server gone, a command the user may not send) is recorded as that error, in
    `errors` (field -> error, those already met kept): the run's record is never lost to it."""
    config, cell, group, manifest = run.config, run.cell, run.group, run.manifest
    measured = _measuring(errors, run.log)
    return dict(
        dataset=run.dataset.name, backend=run.backend.name, cache=cell.cache, repeat=cell.repeat,
        cache_method=how, cache_resident_fraction=round(resident, 4),
        cache_resident_fraction_after=measured("cache_resident_fraction_after",
                                               lambda: _rounded(run.location.resident_fraction(), 4)),
        iterations_setting=config.iters, iterations_reason=config.iters_reason, cold_condition=run.cold,
        compute=run.compute.as_dict(), gpu_id=run.resolution.gpu,
        source=manifest.source, source_fingerprint=manifest.source_fingerprint,
        artifact_footprint=manifest.footprint, train_footprint=manifest.splits["train"].footprint,
        location=measured("location", run.location.describe), read_options=run.read_options or None,
        limits=dict(run.resolution.limits.as_dict(), cgroup=group.version if group else None,
                    applied=group.applied if group else None,
                    throttled_reads=measured("limits.throttled_reads", group.throttled_reads) if group else None,
                    cpu_throttling=measured("limits.cpu_throttling", group.cpu_throttling) if group else None),
        monitor=monitor, plan=cell.plan, environment=env, measurement_errors=errors or None,
        config=config.recorded())


def _measuring(errors, log):
    """measured(field, fn): fn()'s value, or None with the error kept in `errors` under field and said."""
    def measured(name, fn):
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 -- whatever failed, the run it measures is recorded
            errors[name] = f"{type(e).__name__}: {e}"[:500]
            log(f"  {name} not measured after training: {errors[name]}")
            return None
    return measured


def _train(run):
    """Sets the cache, then trains one process per run folder at once, with the monitor on.
    Returns (trainings, how the cache was set, resident fraction, the monitor's summary)."""
    config, cache_asked, group, location = run.config, run.cell.cache, run.group, run.location
    how, resident = location.set_cache(cache_asked, config.cold_fallback, group)
    python_path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    child_env = dict(os.environ, GLOG_logtostderr="1", GLOG_minloglevel="0", PYTHONPATH=python_path)
    warmup = run.backend.program_warmup() if cache_asked == "warm" else None
    if warmup:
        _warm_program(warmup, child_env, group)
        how += ", the training program loaded once"
    if group:
        group.limit_reads()
    held = (f"{resident:.1%} of {len(location.files)} files resident" if location.files
            else "every record in the servers' memory")
    state = cache_state(cache_asked, resident, measured=bool(location.files))
    if state != cache_asked:
        why = ("the memory limit leaves the page cache less room than the data" if run.resolution.limits.mem_bytes
               else "the page cache did not keep it")
        held += f": {state}, {why} ({NEEDS[cache_asked]}; tables label it so)"
    solvers = f", {len(run.run_ids)} solvers at once" if len(run.run_ids) > 1 else ""
    if config.client_hosts:
        count = len(config.client_hosts)
        solvers += f" on {count} client host{'s' * (count > 1)} (network namespaces)"
    run.log(f"{run.dataset.name} {run.backend.name} {cache_asked} (repeat {run.cell.repeat}): cache made {cache_asked} by "
            f"{how}, {held}; compute: {_compute_words(run.compute)}{solvers}")
    monitor_csv = run.run_dirs[0] / "monitor.csv"  # machine-wide: one for the group
    device = location.block_device()
    monitor = subprocess.Popen([str(toolchain.PYTHON), str(ROOT / "monitor" / "sampler.py"), str(monitor_csv),
                                "--interval", str(run.monitor_interval)] + (["--device", device] if device else []),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=child_setup())
    try:
        _await_monitor(monitor, monitor_csv, run.log)
        commands = [(_placed_command(config, i, run.backend.train_command(run_dir / "solver.prototxt", run.dest,
                                                                           run.dataset, run.resolution.gpu)), run_dir)
                    for i, run_dir in enumerate(run.run_dirs)]
        progress = Progress(run.run_dirs[0] / "caffe.log", run.settings.max_iter, run.dataset.model.batch,
                            not config.quiet)
        _remove_leftovers(run, "by an earlier run")
        trainings = train_all(commands, child_env, group, progress)
    finally:
        _stop_monitor(monitor, run.log)
        _remove_leftovers(run, "by solvers that died (no process holds it)")
        for run_dir in run.run_dirs:  # trained weights are no result here (CaffeNet: 240 MB)
            for f in run_dir.glob("snapshot_iter_*"):
                f.unlink()
    return trainings, how, resident, monitor_csv


MONITOR_READY_SECONDS = 30  # the sampler's start (Python, psutil, NVML) on a busy machine
MONITOR_STOP_SECONDS = 10


def _await_monitor(monitor, monitor_csv, log):
    """Until the sampler has written its CSV's header: it then handles SIGTERM (a solver that
    dies at once would otherwise stop it before it could, and leave no CSV). Bounded: a sampler
    that exits or is slow is said, and the run goes on (its summary is then a measurement error)."""
    deadline = time.monotonic() + MONITOR_READY_SECONDS
    while time.monotonic() < deadline:
        if monitor_csv.exists() and monitor_csv.stat().st_size > 0:
            return
        if monitor.poll() is not None:
            log(f"  the monitor (monitor/sampler.py) exited at its start (exit {monitor.returncode}): "
                "the run is not monitored")
            return
        time.sleep(0.02)
    log(f"  the monitor wrote no {monitor_csv.name} within {MONITOR_READY_SECONDS} s: training starts without waiting")


def _stop_monitor(monitor, log):
    monitor.send_signal(signal.SIGTERM)
    try:
        monitor.wait(MONITOR_STOP_SECONDS)
    except subprocess.TimeoutExpired:
        log(f"  the monitor did not stop within {MONITOR_STOP_SECONDS} s of SIGTERM: killed")
        monitor.kill()
        monitor.wait()


def _placed_command(config, member, argv):
    host = _host_of(config, member)
    return hosts.command_in(host, argv) if host else argv


def _remove_leftovers(run, when):
    for backend in backends.REGISTRY.values():  # whatever ran before: a ring keeps memory from the cache
        for path in backend.remove_leftovers():
            run.log(f"removed {path}, left {when}")  # a ring of lmdb_read SHARED, say


def _rounded(value, digits):
    return None if value is None else round(value, digits)


def _warm_program(cmd, env, group):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, preexec_fn=child_setup(group))
    if p.returncode != 0:
        raise RunError(f"loading the training program to warm it failed ({' '.join(cmd)}): "
                       f"{p.stderr.strip()[-500:]}")


def _record(run, run_id, training, shared, concurrent):
    """One solver's Record, from its log and process, with the run's shared fields; appended.
    Each measurement is guarded (a failure is a measurement_errors entry); only the append may raise."""
    rc, run_dir = training.returncode, training.run_dir
    errors = dict(shared["measurement_errors"] or {})
    measured = _measuring(errors, run.log)
    log_text = measured("caffe_log", lambda: (run_dir / "caffe.log").read_text(errors="replace")) or ""
    parsed = caffe_log.parse(log_text)
    first = parsed["first_iteration_at"]
    started = datetime.fromtimestamp(training.started)
    timed = measured("timing", lambda: caffe_log.timing(parsed, run.compute, run.settings.max_iter,
                                                        run.settings.test_iter, log=run_dir / "caffe.log")) or {}
    au = timed.pop("au", None)
    if parsed["failovers"]:  # this solver's reader saw a Redis master fail over to its replica
        failovers = [dict(f, **(measured("location.failovers", lambda f=f: run.location.failover_phases(f)) or {}))
                     for f in parsed["failovers"]]
        shared = dict(shared, location=dict(shared["location"] or {}, failovers=failovers))
    startup = (measured("startup_seconds", lambda: round(((parsed["initial_test_at"] or first) - started)
                                                         .total_seconds(), 3)) if first else None)
    record = Record(
        run_id=run_id, **dict(shared, measurement_errors=errors or None),
        status="ok" if rc == 0 and parsed["done"] else "failed", returncode=rc,
        iterations=parsed["last_iteration"], wall_seconds=round(training.wall, 3),
        startup_seconds=startup,
        **timed, solver_seconds=parsed["solver_seconds"],
        iterations_per_second=(parsed["last_iteration"] / parsed["solver_seconds"] if parsed["solver_seconds"] else None),
        test_accuracy=parsed["test_accuracy"], test_loss=parsed["test_loss"], test_iteration=parsed["test_iteration"],
        first_loss=parsed["first_loss"], final_loss=parsed["final_loss"],
        au=au, concurrent=concurrent, shared_rings=caffe_log.shared_rings(log_text) or None,
        command=training.cmd, process=training.process,
        training_cpu_seconds=measured("training_cpu_seconds", lambda: _training_cpu(training, parsed, first, started)),
        run_dir=str(run_dir.relative_to(run.results)), finished=time.strftime("%Y-%m-%dT%H:%M:%S"))
    append(run.results / shared["dataset"] / "records.jsonl", record)
    try:
        _report(run, record, training, parsed, au, concurrent)
    except Exception as e:  # noqa: BLE001 -- the record is written; its summary line is not worth the run
        run.log(f"  {run_id}: recorded, but its summary line failed: {type(e).__name__}: {e}")
    return record


def _training_cpu(training, parsed, first, started):
    """The process's own CPU seconds in its training window, from its first logged iteration for
    solver_seconds (the window capacity.training_window takes: start-up and the initial test pass
    apart), from the tracker's samples; None where the log shows no such window."""
    if not first or not parsed["solver_seconds"]:
        return None
    begin = training.started + (first - started).total_seconds()
    used = proctrack.cpu_between(training.tracker.cpu_timeline, begin, begin + parsed["solver_seconds"])
    return None if used is None else round(used, 3)


def _report(run, record, training, parsed, au, concurrent):
    au_text = f", AU {au:.1%}" if au is not None else ""
    over = record.data_over_cache_room() or 0
    room_text = (f", train data {over:.1f}x the {record.cache_room_bytes() / 2**30:.2f} GiB the memory limit "
                 "leaves for the page cache" if over >= 1 else "")
    who = f"  solver {concurrent['member']}:" if concurrent else " "
    status = record.status
    if record.ok and record.records_skipped:
        status += f", but skipped {record.records_skipped} records (left behind by the shared ring)"
    run.log(f"{who} {status}: {training.wall:.1f} s wall, start-up {record.startup_seconds} s, solver "
            f"{parsed['solver_seconds']} s{au_text}, {_accuracy_words(run.compute, parsed)}{room_text}")
    limited = record.what_limited(run.backend.layer) if record.ok else None
    if limited:
        run.log(f"{who} AU below 90%: held up by {limited}")
    if record.status != "ok":
        run.log(f"  the run failed (exit {record.returncode}); its log: {training.run_dir / 'caffe.log'}")
        if parsed["stopped_early"]:
            run.log(f"  Caffe was stopped by a signal at iteration {parsed['last_iteration']} of {run.settings.max_iter}")
        fatal = caffe_log.fatal_messages((training.run_dir / "caffe.log").read_text(errors="replace"))
        explained = run.location.explain("\n".join(fatal))
        if explained:
            run.log(f"  {explained}")


def _accuracy_words(compute, parsed):
    if compute.mode == "emulated":
        return "accuracy not computed (emulated compute: the net's layers do not run)"
    if parsed["test_accuracy"] is None:
        return "no test pass logged"
    return f"test accuracy {parsed['test_accuracy']:.4f} at iteration {parsed['test_iteration']}"


def _compute_words(compute):
    if compute.mode == "emulated":
        return f"emulated {compute.accelerator}, {compute.ms_per_iteration} ms per iteration (Caffe's data path is real)"
    return "real GPU" if compute.mode == "gpu" else "real CPU"
