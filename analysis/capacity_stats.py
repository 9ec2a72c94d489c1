"""The capacity curves: per dataset, setup, backend and cache, the group AU at each number of
solvers N (the mean of its solvers' AU; median over runs), the largest N whose median is >= 0.90
and the runs behind it, where the CPU went per train image, and the data path's images per
second per core of each curve."""
import collections
import statistics

from data_prep import backends, datasets
from experiments.data_path_cpu import THRESHOLD, groups, images_per_core_second, servers_cpu, solvers, trained_iterations
from experiments.record import MISSED


def setup_of(r):
    """What the runs at every N of one curve share: the setup without the number of solvers,
    and the iterations each solver trained."""
    return r.setup(solvers=False) + (f"max_iter {r.iterations_setting or 'stock'}",)


def group_aus(records):
    """{group id: (the group's AU, how many of its solvers failed)} over groups whose every
    solver has a record. The group's AU is the mean of its solvers' (MLPerf Storage's AU of a
    client); a solver that failed (LevelDB: its lock, held by another solver) fed no
    accelerator and counts 0."""
    found = {}
    for group, rs in groups(records).items():
        if len(rs) == solvers(rs[0]):
            aus = [r.au if r.ok and r.au is not None else 0.0 for r in rs]
            found[group] = (statistics.fmean(aus), sum(1 for r in rs if not r.ok))
    return found


def curve_of(r):
    """The curve a run belongs to: (dataset, setup, backend, cache)."""
    return r.dataset, setup_of(r), r.backend, r.cache


def _cells(records):
    """{(dataset, setup, backend, cache, N): its records}."""
    cells = {}
    for r in records:
        cells.setdefault(curve_of(r) + (solvers(r),), []).append(r)
    return cells


def curves(records):
    """{(dataset, setup, backend, cache): {N: [group AU of each run]}}, setup without the
    number of solvers."""
    found = {}
    for key, rs in _cells(records).items():
        aus = sorted(au for au, _ in group_aus(rs).values())
        if aus:
            found.setdefault(key[:4], {})[key[4]] = aus
    return found


def lost(records):
    """{curve: the Ns at which a run lost a solver (killed, failed)}. MLPerf Storage's rule:
    every accelerator finishes its run, so no such N holds, whatever its group AU."""
    found = {}
    for key, rs in _cells(records).items():
        if any(failed for _, failed in group_aus(rs).values()):
            found.setdefault(key[:4], set()).add(key[4])
    return found


def failed_solvers(records):
    """How many solvers failed, over all runs of these records."""
    return sum(1 for r in records if not r.ok)


def largest_n(by_n, lost_at=frozenset()):
    """(N, its runs, N + 1's runs or None): the largest N measured whose median group AU is
    >= 0.90 and at which no run lost a solver (lost_at), below which every measured N also
    held; (0, None, N = 1's runs) when one solver already fails."""
    held = 0
    for n in sorted(by_n):
        if statistics.median(by_n[n]) < THRESHOLD or n in lost_at:
            break
        held = n
    return held, by_n.get(held), by_n.get(held + 1)


def first_failed(by_n, lost_at=frozenset()):
    """The smallest N measured above the answer (the N that failed), or None."""
    held = largest_n(by_n, lost_at)[0]
    return min((n for n in by_n if n > held), default=None)


def bracketed(by_n, lost_at=frozenset()):
    """Whether the answer is known: N + 1 was run (and failed)."""
    return largest_n(by_n, lost_at)[2] is not None


def cpu_per_image(records):
    """Where the CPU went per train image, in microseconds, median over the complete groups of
    these records: (the solvers' processes, the servers holding the data); the processes' own
    accounting, which includes the kernel's network path each of them ran. None without figures."""
    split = []
    for group in groups([r for r in records if r.ok]).values():
        if len(group) != solvers(group[0]):
            continue
        images = sum(trained_iterations(x) * datasets.get(x.dataset).model.batch for x in group)
        own = solvers_cpu(group)
        if images and own:
            split.append((1e6 * own / images, 1e6 * servers_cpu(group[0]) / images))
    return tuple(statistics.median(v[i] for v in split) for i in range(2)) if split else None


def solvers_cpu(group):
    """CPU seconds of a group's solvers: each process's own, which counts threads that ended
    between the samples of thread_cpu_seconds (older records: the sampled threads' sum)."""
    return sum(process_cpu(x) for x in group)


def process_cpu(r):
    process = r.process or {}
    return max(process.get("cpu_seconds") or 0, sum((process.get("thread_cpu_seconds") or {}).values()))


def median_of(values):
    found = [v for v in values if v is not None]
    return statistics.median(found) if found else None


def per_core_rates(records):
    """{(dataset, setup, backend): {cache: images/s per core}} over every run of each curve."""
    rates = collections.defaultdict(dict)
    for key in curves(records):
        dataset, setup, backend, cache = key
        rate = images_per_core_second([r for r in records if curve_of(r) == key])
        if rate:
            rates[(dataset, setup, backend)][cache] = rate
    return rates


def curve_order(item):
    (dataset, setup, backend, cache), _ = item
    names = list(backends.REGISTRY)
    return (dataset, setup, names.index(backend) if backend in names else len(names), cache)


def cache_had(records, curve):
    """A curve's cache as its runs had it (record.cache_state): "warm", "partly warm" where no run
    had it warm, "warm (partly warm at N = 1)" where only some Ns missed it."""
    cache, mine = curve[3], [r for r in records if r.ok and curve_of(r) == curve]
    missed = sorted({solvers(r) for r in mine if r.cache_state != cache})
    if not missed:
        return cache
    if all(r.cache_state != cache for r in mine):
        return MISSED[cache]
    return f"{cache} ({MISSED[cache]} at N = {', '.join(map(str, missed))})"


def client_hosts(r):
    """Over how many client hosts a run's solvers ran (run.py --client-hosts), None: this host alone."""
    return (r.concurrent or {}).get("client_hosts")
