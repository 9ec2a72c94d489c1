"""What a run measured on one host predicts for another, from the two hosts' CPU probes
(monitor/cpu_probe.py): the one model behind the fidelity tables' scaling
(analysis/fidelity.py) and `make host-check` (benchmarks/host_check.py).

The model's assumptions:

- A run's solver time is the longer of its accelerator's compute and its data path's time
  (Caffe's prefetch thread works while the accelerator does). The compute is the reference
  run's AU x solver seconds: an emulated accelerator sleeps the same time on any host, and a
  real one does not depend on the host's cores. It never scales.
- The data path's time is CPU work on one core, the prefetch thread's (one solver, one decode
  thread): it scales with the probe of the work it is like, reference probe / here probe.
  Image files: PNG decoding per file, MNIST's and CIFAR-10's small files with the per-file probe
  (small_files_per_second), ImageNet's large ones with the pixel probe (images_per_second;
  cpu_probe.WORK_OF). Records in a database (LMDB, LevelDB, Redis, HDF5, memory): the copy of
  the record's pixels out of it and Caffe's DataTransformer, pixel work, with the pixel probe.
  The emulated host-device copies (patch 0010) are part of the emulated compute: they do not.
  More than one decode thread (decode_threads) spreads the data path over threads: not modelled,
  host-check runs one.
- What is not CPU does not scale: the disk (a cold cell's reads), the network (Redis' round
  trips), the accelerator. Such cells are predicted as if all their data path were CPU, so a
  cold or remote cell's prediction is only as good as its CPU share; host-check uses warm,
  local cells.
- The data path's own time is the CPU seconds of its threads (the prefetch thread and its
  readers, experiments/data_path_cpu.py data_path_cpu): in a data-path-bound run they are the
  solver's time, in a compute-bound one they hid under the compute, so a compute-bound cell stays
  at its compute until a host is slow enough for its data path to come out from under it. What the
  reference run spent beyond both (the solver's start, test passes' waits) is kept as it was.
  Records without thread CPU: the solver's seconds where the run was data-path-bound (AU below
  COMPUTE_BOUND_AU), unknown where it was compute-bound.
- Cores enter only where several solvers share a host: the N the data path's CPU allows is
  experiments/data_path_cpu.py's cpu_allows (cores x images per CPU second per core over what one
  accelerator eats) of the reference records with their threads' CPU seconds scaled by the
  probe ratio and the host's cores put in; a Redis server's CPU is not image work and is not
  scaled. One solver's time does not depend on the number of cores.
- A host of another shape: a cpuset of N cores is a host of N cores. Under a CPU quota of F
  cores' worth of time (all threads together), a probe measures min(1, F) of one core's speed
  (it is one thread), so a quota below one core is a slower host of one core (probe_cores), and
  the CPU seconds a run spent under it are CPU seconds as fast as anywhere on the host: its
  cores for the N measured are F (data_path_cpu.cpu_allows counts a quota's cores).
"""
import dataclasses
import statistics

from experiments.data_path_cpu import cpu_allows, data_path_cpu
from monitor import cpu_probe

COMPUTE_BOUND_AU = 0.97  # a run at or above this AU waited on its accelerator, not its data path
PIXEL_BACKENDS_WORK = cpu_probe.PIXELS  # what a database record costs the prefetch thread: pixel work


def work_of(dataset, backend):
    """The probe whose work a cell's data path is like: image files by their size
    (cpu_probe.WORK_OF), records in a database by their pixels."""
    return cpu_probe.WORK_OF[dataset] if backend == "images" else PIXEL_BACKENDS_WORK


def bound(au):
    """'compute' where the data path never held the accelerator up, 'data path' where it did,
    None where AU is unknown."""
    if au is None:
        return None
    return "compute" if au >= COMPUTE_BOUND_AU else "data path"


def probe(records, work=cpu_probe.PIXELS):
    """Median images/s of one work of the CPU probe over ok records that carry it, or None."""
    rates = [cpu_probe.rate(r.environment, work) for r in records if r.ok and cpu_probe.rate(r.environment, work)]
    return statistics.median(rates) if rates else None


def scaled_to_host(seconds, compute_seconds, probe_there, probe_here):
    """Data-path-bound seconds measured on a host whose probe was probe_there, moved to one whose
    probe is probe_here: the data path's time scales with the ratio, never below the compute."""
    return max(compute_seconds or 0, seconds * probe_there / probe_here)


def _ok(records):
    return [r for r in records if r.ok and r.solver_seconds]


def compute_seconds(records):
    """The accelerator's seconds in a run (AU x solver seconds), mean over ok records; None where
    AU is unknown."""
    found = [r.au * r.solver_seconds for r in _ok(records) if r.au is not None]
    return statistics.mean(found) if found else None


def data_path_seconds(records):
    """The data path's own seconds in the reference runs, mean over ok records: the CPU seconds
    of its threads (data_path_cpu; the prefetch thread is busy the whole time it is not
    waiting for a free slot), or, in records without thread CPU, the solver's seconds where the
    runs were data-path-bound. None where neither is known."""
    runs = _ok(records)
    cpu = [data_path_cpu(r) for r in runs]
    if all(cpu):  # the threads start before the solver's first iteration: at most the solver's time
        return statistics.mean(min(c, r.solver_seconds) for c, r in zip(cpu, runs))
    aus = [r.au for r in runs if r.au is not None]
    return statistics.mean(r.solver_seconds for r in runs) if bound(statistics.mean(aus) if aus else None) == \
        "data path" else None


@dataclasses.dataclass
class Prediction:
    seconds: float = None      # the solver's seconds predicted here; None: unknown (see why)
    au: float = None
    reference_seconds: float = None
    reference_au: float = None
    work: str = None           # the probe used
    probe_ratio: float = None  # reference probe / here probe: > 1, this host is slower
    bound: str = None          # which was the longer at the reference: compute | data path
    n: int = 0                 # reference runs
    why: str = None            # why there is no prediction


def predict(reference_records, here_probe):
    """One cell's solver seconds and AU here, from its reference runs (ok records of one cell on
    one host) and this host's probe ({work: images/s}, as cpu_probe.measure returns)."""
    runs = _ok(reference_records)
    if not runs:
        return Prediction(why="no ok reference runs")
    work = work_of(runs[0].dataset, runs[0].backend)
    there, here = probe(runs, work), (here_probe or {}).get(work)
    aus = [x.au for x in runs if x.au is not None]
    found = Prediction(reference_seconds=statistics.mean(x.solver_seconds for x in runs),
                       reference_au=statistics.mean(aus) if aus else None, work=work, n=len(runs))
    compute, data_path = compute_seconds(runs), data_path_seconds(runs)
    if compute is None or data_path is None:
        found.why = "the reference runs have no AU or no data path CPU"
        return found
    found.bound = "compute" if compute >= data_path else "data path"
    if not there or not here:
        found.why = f"no {work} probe {'in the reference records' if not there else 'measured here'}"
        return found
    found.probe_ratio = there / here
    rest = max(0.0, found.reference_seconds - max(compute, data_path))  # neither's: start-up, test passes' waits
    found.seconds = scaled_to_host(data_path, compute, there, here) + rest
    found.au = compute / found.seconds
    return found


def predict_seconds(reference_records, here_probe):
    return predict(reference_records, here_probe).seconds


def predict_au(reference_records, here_probe):
    return predict(reference_records, here_probe).au


def _on_host(r, ratio, cores):
    """A record as if run on a host whose cores do image work 1/ratio as fast, with `cores`."""
    process = dict(r.process or {})
    process["thread_cpu_seconds"] = {k: v * ratio for k, v in (process.get("thread_cpu_seconds") or {}).items()}
    limits = {k: v for k, v in (r.limits or {}).items() if k != "cpus"}
    return dataclasses.replace(r, process=process, limits=limits,
                               environment=dict(r.environment or {}, cpu_cores=cores))


def probe_cores(cores, cpu_quota=None):
    """The cores a capacity prediction multiplies one core's probe by: the host's (a cpuset's),
    or under a CPU quota its cores' worth, at least one: a probe under a quota below one core
    already ran at that share of a core."""
    return max(1.0, cpu_quota) if cpu_quota else cores


def predict_cpu_allows(reference_records, here_probe, here_cores):
    """(N, one thread's share) the data path's CPU allows on this host
    (experiments/data_path_cpu.py's cpu_allows) from the reference records scaled by the pixel
    probe; None where unknown."""
    runs = [r for r in reference_records if r.ok]
    there, here = probe(runs), (here_probe or {}).get(cpu_probe.PIXELS)
    if not runs or not there or not here:
        return None
    return cpu_allows([_on_host(r, there / here, here_cores) for r in runs])
