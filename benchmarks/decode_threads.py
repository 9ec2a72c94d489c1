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
import sys

import toolchain
from analysis.decode_threads import THREAD_OPTIONS, iterations, report
from experiments import run
from experiments.config import RunConfig


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
    print(report(a, datasets, threads))
    return 0






if __name__ == "__main__":
    sys.exit(main())
