#!/usr/bin/env python3
"""Are image files slow because of where they live, or because one thread decodes them? And is
the Data layer (LMDB, LevelDB, Redis) held up by its one prefetch thread's transform?
Image-file cells with ImageData decoding on 1, 2, ... threads (caffe/patches/0015), or, with
--backend lmdb|leveldb|redis, Data layer cells transforming on 1, 2, ... threads (0016,
--transform-threads), the rounds interleaved so that the machine's drift falls on every setting
alike; prints per dataset and setting the median AU (its range) and the data path's images per
CPU second, and each setting's AU over one thread's, measured side by side.

  python benchmarks/decode_threads.py --datasets mnist,cifar10 --threads 1,2 --rounds 3
  python benchmarks/decode_threads.py --datasets cifar10 --cache cold --accelerator titanx2016
  python benchmarks/decode_threads.py --datasets imagenet --backend lmdb --threads 1,2 --rounds 3 --accelerator h100

Every run is an ordinary record under --out (default results/decode-threads).
"""
import argparse
import statistics
import sys


from analysis import capacity  # noqa: E402
import toolchain  # noqa: E402
from data_prep import backends  # noqa: E402
from experiments import run  # noqa: E402
from experiments.config import RunConfig  # noqa: E402
from experiments.record import recorded  # noqa: E402


# what each thread option's threads do; the backends that declare one (data_prep/backends) are compared
THREAD_WORK = {"decode_threads": "decode", "transform_threads": "transform"}
# backend -> (its read option, its run.py flag, what the threads do)
THREAD_OPTIONS = {b.name: (o.name, o.flag, THREAD_WORK[o.name])
                  for b in backends.REGISTRY.values() for o in b.options if o.name in THREAD_WORK}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default="mnist,cifar10")
    p.add_argument("--backend", default="images", choices=list(THREAD_OPTIONS),
                   help="images: ImageData's decode threads; lmdb, leveldb, redis: the Data layer's transform "
                        "threads (default %(default)s)")
    p.add_argument("--threads", default="1,2", help="decode or transform threads to compare (default %(default)s)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cache", default="warm", choices=["warm", "cold"])
    p.add_argument("--accelerator", default="h100")
    p.add_argument("--iters", type=int, help="iterations per run (default: the dataset's matrix's where it has "
                                             "one, ImageNet's 150 = 3 passes of its stand-in; else 2000)")
    p.add_argument("--data", default=str(toolchain.ROOT / "data"))
    p.add_argument("--out", default=str(toolchain.ROOT / "results" / "decode-threads"))
    a = p.parse_args(argv)
    datasets, threads = a.datasets.split(","), [int(t) for t in a.threads.split(",")]
    option, _, work = THREAD_OPTIONS[a.backend]
    for round_ in range(a.rounds):
        for dataset in datasets:
            for n in threads:
                print(f"round {round_ + 1}/{a.rounds}: {dataset} {a.backend}, {n} {work} thread(s)", file=sys.stderr)
                rc = run.run(RunConfig(dataset, a.backend, a.cache, accelerator=a.accelerator,
                                       iters=iterations(a, dataset), options={option: str(n)}, repeats=round_ + 1,
                                       data=a.data, out=a.out, quiet=True))
                if rc != 0:
                    return rc
    print(table(a, datasets, threads))
    return 0


def iterations(a, dataset):
    """--iters, else the dataset's matrix's, else 2000."""
    from data_prep import datasets as registry
    sized = list(registry.get(dataset).matrix_args or ())
    return a.iters or (int(sized[sized.index("--iters") + 1]) if "--iters" in sized else 2000)


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


if __name__ == "__main__":
    sys.exit(main())
