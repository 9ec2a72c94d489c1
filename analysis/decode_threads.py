r"""The decode/transform-threads benchmark's tables (benchmarks/decode_threads.py measures): per dataset
and thread count the median AU (its range), the AU over one thread's and the data path's images per
CPU second; then how busy the prefetch thread and the data threads were; from the records of its runs.

  python analysis/decode_threads.py --out results/decode-threads --datasets mnist,cifar10
  python analysis/decode_threads.py --out DIR --datasets imagenet --backend lmdb --caches warm,cold \
      --accelerators h100,titanx2016
"""
import argparse
import statistics

from analysis.capacity_measures import data_threads_share
from data_prep import backends
from experiments.data_path_cpu import images_per_core_second
from experiments.record import recorded

# what each thread option's threads do; the backends that declare one (data_prep/backends) are compared
THREAD_WORK = {"decode_threads": "decode", "transform_threads": "transform"}
# backend -> (its read option, its run.py flag, what the threads do)
THREAD_OPTIONS = {b.name: (o.name, o.flag, THREAD_WORK[o.name])
                  for b in backends.REGISTRY.values() for o in b.options if o.name in THREAD_WORK}


def iterations(a, dataset):
    """--iters, else the dataset's matrix's, else 2000."""
    from data_prep import datasets as registry
    return a.iters or registry.get(dataset).matrix_config.get("iters", 2000)


def table(a, datasets, threads):
    _, _, work = THREAD_OPTIONS[a.backend]
    label = backends.get(a.backend).label
    lines = [f"{label[:1].upper() + label[1:]}, {a.cache}, emulated {a.accelerator}, "
             f"{', '.join(f'{d} {iterations(a, d)}' for d in datasets)} iterations; median AU "
             f"(range) over the runs, and over one {work} thread's median:", "",
             f"| dataset | {work} threads | runs | AU | AU / one thread's | data path images per CPU second |",
             "|---|---|---|---|---|---|"]
    for dataset in datasets:
        by_threads = runs_by_threads(a, dataset, threads)
        base = statistics.median(r.au for r in by_threads[threads[0]]) if by_threads[threads[0]] else None
        for n, rs in by_threads.items():
            if not rs:
                continue
            aus = [r.au for r in rs]
            rate = images_per_core_second(rs)
            lines.append(f"| {dataset} | {n} | {len(rs)} | {statistics.median(aus):.3f} ({min(aus):.3f}-{max(aus):.3f}) "
                         f"| {statistics.median(aus) / base:.2f}x | {f'{rate:,.0f}' if rate else '-'} |" if base else "")
    return "\n".join(lines)


def runs_by_threads(a, dataset, threads):
    """{thread count: the ok runs of the dataset on a's backend, cache, accelerator and iterations}."""
    option = THREAD_OPTIONS[a.backend][0]
    mine = [r for r in recorded(a.out, dataset, strict=False) if r.ok and r.backend == a.backend and r.cache == a.cache
            and (r.compute or {}).get("accelerator") == a.accelerator and r.iterations_setting == iterations(a, dataset)]
    return {n: [r for r in mine if (r.read_options or {}).get(option, 1) == n] for n in threads}


def busy_table(a, datasets, threads):
    """Per dataset and thread count: the prefetch thread's CPU over the solver's time, and the data
    threads' (prefetch, pool, readers) per thread, median (range) over the runs."""
    _, _, work = THREAD_OPTIONS[a.backend]
    lines = ["Busy over the solver's time (100% is one core), and the other load on the host (its "
             "monitor's CPU over the run less the run's own, in shares of all cores), median (range) over the "
             "same runs:", "",
             f"| dataset | {work} threads | prefetch thread busy | data threads busy, per thread | other load |",
             "|---|---|---|---|---|"]
    for dataset in datasets:
        for n, rs in runs_by_threads(a, dataset, threads).items():
            if rs:
                lines.append(f"| {dataset} | {n} | {percent_range([r.prefetch_share() for r in rs])} "
                             f"| {percent_range([data_threads_share(r) for r in rs])} "
                             f"| {percent_range([other_load(r) for r in rs])} |")
    return "\n".join(lines)


def other_load(r):
    """The host's CPU over a run that was not the run's own: its monitor's mean user + system share
    less the process's CPU over the wall time and the cores (at least 0: the 1 Hz samples miss
    the run's last fraction of a second); None where either is not recorded."""
    m, cores = r.monitor or {}, (r.environment or {}).get("cpu_cores")
    used = (r.process or {}).get("cpu_seconds")
    if m.get("cpu_user_mean") is None or not (cores and used and r.wall_seconds):
        return None
    return max(0.0, (m["cpu_user_mean"] + (m.get("cpu_system_mean") or 0)) / 100 - used / r.wall_seconds / cores)


def percent_range(shares):
    """'81% (78-84%)': the median share and its range; '-' where no run measured it."""
    shares = [s for s in shares if s is not None]
    if not shares:
        return "-"
    return f"{statistics.median(shares):.0%} ({min(shares) * 100:.0f}-{max(shares):.0%})"


def report(a, datasets, threads):
    """The AU table and the busy table of one backend, cache and accelerator."""
    return table(a, datasets, threads) + "\n\n" + busy_table(a, datasets, threads)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="the folder of the runs' records (benchmarks/decode_threads.py --out)")
    p.add_argument("--datasets", default="mnist,cifar10")
    p.add_argument("--backend", default="images", choices=list(THREAD_OPTIONS))
    p.add_argument("--threads", default="1,2", help="thread counts, the first the one the others are set against")
    p.add_argument("--caches", default="warm", help="one table pair per cache and accelerator (comma-separated)")
    p.add_argument("--accelerators", default="h100")
    p.add_argument("--iters", type=int, help="the runs' iterations (default: as benchmarks/decode_threads.py's)")
    a = p.parse_args(argv)
    datasets, threads = a.datasets.split(","), [int(t) for t in a.threads.split(",")]
    for cache in a.caches.split(","):
        for accelerator in a.accelerators.split(","):
            one = argparse.Namespace(**vars(a), cache=cache, accelerator=accelerator)
            if any(any(runs_by_threads(one, d, threads).values()) for d in datasets):
                print(report(one, datasets, threads), end="\n\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
