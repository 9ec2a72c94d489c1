"""The data path's CPU in a run's records: which threads read and transform the records, their
CPU seconds, the images they delivered per CPU second, and the number of solvers that CPU allows
on a host (the capacity tables, analysis/capacity.py, and the prediction for another host,
experiments/prediction.py)."""
from data_prep import datasets
from experiments import proctrack

THRESHOLD = 0.90  # a group of solvers at this AU or above keeps its accelerators fed


def solvers(r):
    return (r.concurrent or {}).get("solvers", 1)


def groups(records):
    """{group id: its solvers' records} (a lone run is a group of one)."""
    found = {}
    for r in records:
        found.setdefault((r.concurrent or {}).get("group", r.run_id), []).append(r)
    return found


def data_threads(r):
    """The threads that read and transform a solver's data: Caffe's prefetch thread, or as many
    as the reader's decode_threads (ImageData) or transform_threads (Data) ask."""
    options = r.read_options or {}
    return max(1, options.get("decode_threads") or 1, options.get("transform_threads") or 1)


def data_path_cpu(r):
    """CPU seconds of the threads that read and transform the records: Caffe's prefetch thread
    (and LMDB's read-ahead, Redis' I/O thread) for Data and ImageData; the solver thread for
    HDF5Data and MemoryData, which read on it (that count includes the net's set-up: a bound
    from above)."""
    threads = (r.process or {}).get("thread_cpu_seconds") or {}
    prefetch = threads.get(proctrack.PREFETCH, 0) + proctrack.readers_cpu(threads)
    return prefetch if prefetch > 0 else threads.get(proctrack.SOLVER)


def prefetch_cpu(r):
    """CPU seconds of Caffe's prefetch thread alone: one per solver, it transforms every image."""
    return ((r.process or {}).get("thread_cpu_seconds") or {}).get(proctrack.PREFETCH)


def trained_iterations(r):
    """The iterations a finished run trained: its max_iter (the last one Caffe logs can be
    earlier: ImageNet's solver logs every 20, 140 of 150)."""
    return r.iterations_setting or datasets.get(r.dataset).model.solver.max_iter


def images_per_core_second(records, cpu=data_path_cpu):
    """Train images delivered per CPU second (of the data path, unless `cpu` says which threads),
    over the records."""
    images = seconds = 0.0
    for r in records:
        used = cpu(r)
        if r.ok and used:
            images += trained_iterations(r) * datasets.get(r.dataset).model.batch
            seconds += used
    return images / seconds if seconds else None


def cpu_allows(records):
    """(N, the solver's data threads' share) the data path's CPU alone would allow at AU 0.90,
    from the records' own rates: the host's cores (a cpuset's, a quota's) x images/s per core over what 0.90 of one
    accelerator eats (its batch per emulated iteration), and 0 when one solver's data threads
    cannot deliver that much (their share: the threads, at most the cores, x one thread's rate
    over what is needed; one thread: Caffe's prefetch thread; several: decode_threads or
    transform_threads, one thread's rate then the data path's images per CPU second). Data on
    servers of the same host (Redis) costs their CPU too: their CPU seconds per image count in
    the rate. None for real compute and for backends read on the solver thread (its CPU
    includes the set-up)."""
    if not records:
        return None
    r = records[0]
    ms = (r.compute or {}).get("ms_per_iteration")
    threads = data_threads(r)
    one_thread = images_per_core_second(records, prefetch_cpu if threads == 1 else data_path_cpu)
    if not ms or not one_thread:
        return None
    needed = THRESHOLD * datasets.get(r.dataset).model.batch * 1000 / ms
    limits = r.limits or {}  # a cpuset leaves its CPUs; a quota, its cores' worth of CPU seconds
    cores = min((c for c in ((r.environment or {}).get("cpu_cores"), limits.get("cpus"), limits.get("cpu_quota"))
                 if c), default=None)
    if not cores:
        return None
    share = min(threads, cores) * one_thread / needed
    per_image = 1 / images_per_core_second(records) + servers_cpu_per_image(records)
    return (cores / per_image / needed if share >= 1 else 0.0), share


def servers_cpu_per_image(records):
    """The CPU seconds the servers holding the data (Redis nodes on this host) spent per train
    image delivered, over the complete groups of these records (0 without servers)."""
    images = seconds = 0.0
    for group in groups([r for r in records if r.ok]).values():
        if len(group) == solvers(group[0]) and (group[0].location or {}).get("servers"):
            seconds += servers_cpu(group[0])
            images += sum(trained_iterations(r) * datasets.get(r.dataset).model.batch for r in group)
    return seconds / images if images else 0.0


def servers_cpu(r):
    """CPU seconds the servers holding the data (Redis nodes) spent over a run (0 without any)."""
    return sum(s["cpu_seconds"] for s in ((r.location or {}).get("servers") or {}).values() if s)
