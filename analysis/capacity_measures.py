"""What was busy over the runs of one N of a capacity curve (Figures): the busiest data thread,
the group's cores (the processes' own CPU and the host monitor's), the storage (paced reads, the
device) and the Redis servers, each the median over the runs; the stoppers judge from these."""
import collections
import dataclasses

from analysis.capacity_logs import sampled_mean, training_window, window_samples
from analysis.capacity_stats import median_of, solvers_cpu
from data_prep import backends, datasets
from experiments import proctrack
from experiments.data_path_cpu import data_path_cpu, data_threads, groups, servers_cpu, solvers


@dataclasses.dataclass
class Figures:
    """What ran out, measured over the runs of one N (each the median over its runs; None: not
    measured). thread: the busiest of the solvers' data threads (`busiest` says which, the
    prefetch thread or each thread of the pool beside it; `threads` of them in all), its CPU over
    the solver's time (on_solver: the solver thread's); cores: the share of the group's cores
    its solvers' processes and the Redis servers used, their own accounting (processes_cpu): in
    the training window where the records keep the processes' CPU there
    (Record.training_cpu_seconds), else, in older records, over the group's run, start-up
    included; monitor: the host's CPU in the training window (the 1 Hz samples; it counts
    every process on the host, other users' too); paced: reads per second in the training
    window over the IOPS limit; device: the data device's busy time in the window; servers: the
    busiest Redis node's CPU over the window; allowed: the cores the group could use (the host's,
    or its cpuset's where fewer)."""
    n: int = 0
    thread: float = None
    busiest: str = None
    threads: int = 1
    on_solver: bool = False
    layer: str = None
    cores: float = None
    monitor: float = None
    paced: float = None
    device: float = None
    servers: float = None
    allowed: float = None


def figures_of(records, results=None):
    """Figures of the runs of one N (records: every solver of them; only finished ones count)."""
    ok = [r for r in records if r.ok]
    if not ok:
        return Figures(n=solvers(records[0]) if records else 0)
    layer = backends.get(ok[0].backend).layer
    on_solver = layer in ("HDF5Data", "MemoryData")
    runs = list(groups(ok).values())
    windows = {id(g): training_window(g) for g in runs}
    samples = {id(g): window_samples(g, windows[id(g)], results) for g in runs}
    busiest = [(_solver_share(r), None) if on_solver else busiest_data_thread(r) for r in ok]
    return Figures(
        n=solvers(ok[0]), layer=layer, on_solver=on_solver, threads=data_threads(ok[0]),
        thread=median_of(share for share, _ in busiest), busiest=_most_common(which for _, which in busiest),
        cores=median_of(processes_cpu(g) for g in runs),
        monitor=median_of(_sampled_cpu(g[0], samples[id(g)]) for g in runs),
        paced=median_of(_reads_at_limit(g, windows[id(g)], samples[id(g)]) for g in runs),
        device=median_of(sampled_mean(samples[id(g)], "device_busy") for g in runs),
        servers=median_of(_busiest_server(g[0], windows[id(g)]) for g in runs), allowed=allowed_cores(ok[0]))


def _most_common(names):
    found = collections.Counter(n for n in names if n).most_common(1)
    return found[0][0] if found else None


# the pool beside the prefetch thread, by the read option that asks for it: its threads' role, in words
POOLS = {"decode_threads": (proctrack.DECODE, "each decode thread"),
         "transform_threads": (proctrack.TRANSFORM, "each transform thread")}


def busiest_data_thread(r):
    """(share, which): the busiest of a solver's data threads, its CPU over the solver's time (1.0:
    one core), and which it is: "prefetch", or "each decode thread" / "each transform thread" for
    the pool beside it (its role's CPU per thread: roles() sums a role's threads); (None, None)
    unmeasured. An average over all of them would hide a prefetch thread at its limit beside a
    pool with room."""
    prefetch = r.prefetch_share()
    threads, options = data_threads(r), r.read_options or {}
    pool = next(((role, words) for option, (role, words) in POOLS.items() if (options.get(option) or 1) > 1), None)
    if threads == 1 or pool is None or not r.solver_seconds:
        return (prefetch, "prefetch") if prefetch is not None else (None, None)
    by_role = (r.process or {}).get("thread_cpu_seconds") or {}
    each = by_role.get(pool[0], 0) / (threads - 1) / r.solver_seconds
    return max([(prefetch or 0, "prefetch"), (each, pool[1])], key=lambda found: found[0])


def data_threads_share(r):
    """The data threads' CPU over the solver's time, per thread: 1.0 is every one of them busy
    (with one thread, the prefetch thread's share, Record.prefetch_share). The stoppers take the
    busiest thread's instead (busiest_data_thread)."""
    threads = data_threads(r)
    if threads == 1:
        return r.prefetch_share()
    used = data_path_cpu(r)
    return used / r.solver_seconds / threads if used is not None and r.solver_seconds else None


def _sampled_cpu(r, rows):
    """The share of the group's cores busy (user + system) in the window's samples: the host's,
    scaled to a cpuset limit."""
    user, system = sampled_mean(rows, "cpu_user"), sampled_mean(rows, "cpu_system")
    return None if user is None else _over_allowed(r, (user + (system or 0)) / 100)


def _over_allowed(r, host):
    cores, allowed = (r.environment or {}).get("cpu_cores"), (r.limits or {}).get("cpus")
    return min(1.0, host * cores / allowed) if cores and allowed and allowed < cores else host


def device_bytes_per_image(group):
    """The data device's bytes read during a group's run over the images its solvers trained on."""
    r = group[0]
    total = (r.monitor or {}).get("read_bytes_total")
    images = sum(x.iterations or 0 for x in group) * datasets.get(r.dataset).model.batch
    return total / images if total is not None and images else None


def _solver_share(r):
    seconds = ((r.process or {}).get("thread_cpu_seconds") or {}).get(proctrack.SOLVER)
    return seconds / r.solver_seconds if seconds is not None and r.solver_seconds else None


def allowed_cores(r):
    """The cores a run's group could use: the host's, or its cpuset's where fewer; None unrecorded."""
    return min(filter(None, ((r.environment or {}).get("cpu_cores"), (r.limits or {}).get("cpus"))), default=None)


def processes_cpu(group):
    """The share of the group's cores its solvers' processes (and the Redis servers, on the
    same host) used, their own accounting: in the training window (training_window) where each
    solver's record keeps its CPU there (Record.training_cpu_seconds), else over the group's
    run, start-up included (records made before that field). The servers' CPU is theirs since
    the cache was set either way (their replies to the initial test pass included): no record
    splits it at the first iteration."""
    r = group[0]
    cores = allowed_cores(r)
    window, training = training_window(group), [x.training_cpu_seconds for x in group]
    if window and None not in training:
        used, seconds = sum(training) + servers_cpu(r), window[1] - window[0]
    else:
        used, seconds = solvers_cpu(group) + servers_cpu(r), max(x.wall_seconds or 0 for x in group)
    return min(1.0, used / (seconds * cores)) if cores and seconds > 0 and used else None


def _reads_at_limit(group, window, rows=None):
    """The group's reads per second in the training window over its cgroup's read IOPS limit
    (None without a limit or a window). With the monitor's samples: the read requests they
    counted on the data's device in the window, per second, times the reads the limit paced per
    request the device counted over the run where that is above 1 (the limit counts reads
    before the block layer merges them). Without: the reads the limit paced over the run times
    the share of the solvers' bytes read in training, over the window's length."""
    r = group[0]
    limits = r.limits or {}
    paced, riops = (limits.get("throttled_reads") or {}).get("read_ios"), limits.get("riops")
    if not (paced and riops and window and window[1] > window[0]):
        return None
    requests = (r.monitor or {}).get("read_requests_total")
    if rows and requests:
        per_request = max(1.0, paced / requests)
        counted = sum(float(row.get("read_requests") or 0) for row in rows)
        return counted * per_request / sum(row["seconds"] for row in rows) / riops
    return paced * _training_read_share(group) / (window[1] - window[0]) / riops


def _training_read_share(group):
    """The share of the group's solvers' bytes read that they read while training (1 where the
    record does not split its reads by phase)."""
    total = sum((x.process or {}).get("read_bytes") or 0 for x in group)
    training = [(x.process or {}).get("read_bytes_training") for x in group]
    if not total or None in training:
        return 1.0
    return min(1.0, sum(training) / total)


def _busiest_server(r, window):
    """The busiest Redis node's CPU seconds over the training window's length (its CPU is its
    replies: start-up loads nothing into it)."""
    servers = ((r.location or {}).get("servers") or {}).values()
    used = [s["cpu_seconds"] for s in servers if s]
    length = window[1] - window[0] if window else r.wall_seconds
    return max(used) / length if used and length else None
