"""One run of the paper's experiment: a stock net trained from one backend under one cache
state, with the system monitor on, recorded as one JSON line.

A run's files: RESULTS/DATASET/runs/RUN_ID/{train,test,solver}.prototxt, caffe.log,
monitor.csv; its record is appended to RESULTS/DATASET/records.jsonl only when the run
finished (ok or failed); an interrupted run leaves its folder but no record.
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
from dataclasses import dataclass, field, asdict
from pathlib import Path

import psutil

from experiments import cache, caffe_log, cgroup
from monitor.sampler import block_device_of

ROOT = Path(__file__).resolve().parents[1]
CAFFE = ROOT / ".build" / "caffe"
CPPMEM = ROOT / ".build" / "cppmem_train"
PYTHON = Path(sys.executable)  # the interpreter running the runner: the venv, or a GPU machine's own
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
    data_root: Path = ROOT / "data"
    results: Path = ROOT / "results"
    limits: cgroup.Limits = field(default_factory=cgroup.Limits)
    cold_fallback: str = None        # None or "fadvise"
    monitor_interval: float = 1.0
    seed: int = None


def write_net_files(spec, run_dir):
    import caffe
    from data_prep import backends
    from models.nets import MODELS, net_proto, solver_text
    model = MODELS[spec.dataset]
    backend = backends.get(spec.backend)
    dest = Path(spec.data_root) / spec.dataset / spec.backend
    layer = backend.data_layer(dest, model, dest.parent / "mean.binaryproto")
    (run_dir / "train.prototxt").write_text(str(net_proto(model, layer, caffe.TRAIN)))
    (run_dir / "test.prototxt").write_text(str(net_proto(model, layer, caffe.TEST)))
    test_count = json.loads((dest / "manifest.json").read_text())["splits"]["test"]["count"]
    test_iter = spec.test_iter or min(model.solver.test_iter, max(1, test_count // model.test_batch))
    (run_dir / "solver.prototxt").write_text(solver_text(
        model, run_dir / "train.prototxt", run_dir / "test.prototxt", run_dir / "snapshot",
        gpu=spec.gpu >= 0, max_iter=spec.iters, test_iter=test_iter,
        test_interval=spec.test_interval, seed=spec.seed))
    return backend, dest


def training_command(spec, run_dir, dest):
    solver = str(run_dir / "solver.prototxt")
    if spec.backend == "pymem":
        cmd = [str(PYTHON), str(ROOT / "experiments" / "pymem_train.py"), solver, str(dest), spec.dataset]
        return cmd + (["--gpu", str(spec.gpu)] if spec.gpu >= 0 else [])
    if spec.backend == "cppmem":
        if not CPPMEM.exists():
            raise RunError(f"{CPPMEM} missing: run make caffe")
        return [str(CPPMEM), solver, str(dest / "train.f32"), str(dest / "test.f32"), str(spec.gpu)]
    cmd = [str(CAFFE / "bin" / "caffe"), "train", f"--solver={solver}"]
    return cmd + ([f"--gpu={spec.gpu}"] if spec.gpu >= 0 else [])


def environment(artifact):
    """Where a number came from: build, machine, storage."""
    opts = (CAFFE.resolve().parent / "options")
    env = {
        "caffe_build_key": (ROOT / ".build" / "caffe.key").read_text().strip()
        if (ROOT / ".build" / "caffe.key").exists() else None,
        "caffe_options": opts.read_text().split() if opts.exists() else None,
        "kernel": platform.release(), "cpu_model": _cpu_model(), "cpu_cores": os.cpu_count(),
        "memory_bytes": psutil.virtual_memory().total, "python": platform.python_version(),
        "artifact_device": block_device_of(artifact), "artifact_fs": _fs_type(artifact),
    }
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


def _fs_type(path):
    path, best = str(Path(path).resolve()), None
    for part in psutil.disk_partitions(all=True):
        if path.startswith(part.mountpoint) and (best is None or len(part.mountpoint) > len(best.mountpoint)):
            best = part
    return best.fstype if best else None


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
    for col in ["read_bytes", "read_requests"]:
        out[f"{col}_total"] = sum(float(r[col]) for r in rows) if rows else 0
    self_path = Path(str(csv_path) + ".self.json")
    if self_path.exists():
        me = json.loads(self_path.read_text())
        out["monitor_cpu_fraction_of_core"] = me["cpu_seconds"] / max(me["wall_seconds"], 1e-9)
        out["monitor_startup_cpu_seconds"] = me.get("startup_cpu_seconds")
    return out


def append_record(path, record):
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record, sort_keys=True) + "\n"
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def run(spec, log=print):
    """Run one cell of the matrix; return its record (also appended to records.jsonl)."""
    from data_prep import build
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for the run lock {LOCK} (another run is training)...")
            fcntl.flock(lock, fcntl.LOCK_EX)
        return _run_locked(spec, build, log)


def _run_locked(spec, build, log):
    run_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
    run_dir = Path(spec.results) / spec.dataset / "runs" / run_id
    run_dir.mkdir(parents=True)
    backend, dest = write_net_files(spec, run_dir)
    # limits first: a run refused for them must not have flushed the page cache
    group = cgroup.create(spec.limits, run_id, dest) if spec.limits.any() else None
    try:
        return _train_and_record(spec, run_id, run_dir, backend, dest, group, log)
    finally:
        if group:
            group.remove()


def _train_and_record(spec, run_id, run_dir, backend, dest, group, log):
    files = backend.files(dest)
    cmd = training_command(spec, run_dir, dest)
    how, resident = cache.set_and_measure(spec.cache, files, spec.cold_fallback)
    log(f"{spec.dataset} {spec.backend} {spec.cache} #{spec.repeat}: cache made {spec.cache} by {how}, "
        f"{resident:.1%} of {len(files)} files resident")

    python_path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, GLOG_logtostderr="1", GLOG_minloglevel="0", PYTHONPATH=python_path)
    device = block_device_of(dest)
    monitor = subprocess.Popen([str(PYTHON), str(ROOT / "monitor" / "sampler.py"), str(run_dir / "monitor.csv"),
                                "--interval", str(spec.monitor_interval)] + (["--device", device] if device else []),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    start, proc = time.time(), None
    try:
        with open(run_dir / "caffe.log", "w") as logf:
            proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, cwd=run_dir, env=env,
                                    preexec_fn=group.enter if group else None)
            rc = proc.wait()
    except BaseException:  # Ctrl-C, kill: no record, no orphan
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        raise
    finally:
        wall = time.time() - start
        monitor.send_signal(signal.SIGTERM)
        monitor.wait()
        for f in run_dir.glob("snapshot_iter_*"):  # trained weights are no result here (CaffeNet: 240 MB)
            f.unlink()

    parsed = caffe_log.parse((run_dir / "caffe.log").read_text(errors="replace"))
    manifest = json.loads((dest / "manifest.json").read_text())
    record = {
        "run_id": run_id, "dataset": spec.dataset, "backend": spec.backend, "cache": spec.cache,
        "cache_method": how, "cache_resident_fraction": round(resident, 4), "repeat": spec.repeat,
        "status": "ok" if rc == 0 and parsed["done"] else "failed", "returncode": rc,
        "iterations": parsed["last_iteration"], "iterations_setting": spec.iters,
        "wall_seconds": round(wall, 3),
        "solver_seconds": parsed["solver_seconds"],
        "iterations_per_second": (parsed["last_iteration"] / parsed["solver_seconds"]
                                  if parsed["solver_seconds"] else None),
        "test_accuracy": parsed["test_accuracy"], "test_loss": parsed["test_loss"],
        "first_loss": parsed["first_loss"], "final_loss": parsed["final_loss"],
        "device": "gpu" if spec.gpu >= 0 else "cpu", "gpu_id": spec.gpu,
        "source": manifest["source"], "source_fingerprint": manifest["source_fingerprint"],
        "artifact_footprint": manifest["footprint"],
        "train_footprint": manifest["splits"]["train"]["footprint"],  # what the paper's Table 2 counts
        "limits": asdict(spec.limits), "command": cmd,
        "monitor": summarize_monitor(run_dir / "monitor.csv"),
        "environment": environment(dest), "run_dir": str(run_dir.relative_to(spec.results)),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    append_record(Path(spec.results) / spec.dataset / "records.jsonl", record)
    log(f"  {record['status']}: {wall:.1f} s wall, solver {parsed['solver_seconds']} s, "
        f"accuracy {parsed['test_accuracy']}")
    return record


def recorded(results, dataset):
    path = Path(results) / dataset / "records.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
