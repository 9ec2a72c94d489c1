"""The decode/transform-threads benchmark's table (benchmarks/decode_threads.py measures): per dataset
and thread count the median AU (its range), the AU over one thread's and the data path's images per
CPU second, from the records of its runs."""
import statistics

from analysis import capacity
from data_prep import backends
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
    option, _, work = THREAD_OPTIONS[a.backend]
    label = backends.get(a.backend).label
    lines = [f"{label[:1].upper() + label[1:]}, {a.cache}, emulated {a.accelerator}, "
             f"{', '.join(f'{d} {iterations(a, d)}' for d in datasets)} iterations; median AU "
             f"(range) over the runs, and over one {work} thread's median:", "",
             f"| dataset | {work} threads | runs | AU | AU / one thread's | data path images per CPU second |",
             "|---|---|---|---|---|---|"]
    for dataset in datasets:
        mine = [r for r in recorded(a.out, dataset) if r.ok and r.backend == a.backend and r.cache == a.cache
                and (r.compute or {}).get("accelerator") == a.accelerator and r.iterations_setting == iterations(a, dataset)]
        by_threads = {n: [r for r in mine if (r.read_options or {}).get(option, 1) == n] for n in threads}
        base = statistics.median(r.au for r in by_threads[threads[0]]) if by_threads[threads[0]] else None
        for n, rs in by_threads.items():
            if not rs:
                continue
            aus = [r.au for r in rs]
            rate = capacity.images_per_core_second(rs)
            lines.append(f"| {dataset} | {n} | {len(rs)} | {statistics.median(aus):.3f} ({min(aus):.3f}-{max(aus):.3f}) "
                         f"| {statistics.median(aus) / base:.2f}x | {f'{rate:,.0f}' if rate else '-'} |" if base else "")
    return "\n".join(lines)
