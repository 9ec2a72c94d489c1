#!/usr/bin/env python3
"""Train a stock Caffe net from one storage backend under a warm or cold page cache, with
the system monitor on, and record the run (results/DATASET/records.jsonl).

  python experiments/run.py mnist lmdb cold
  python experiments/run.py cifar10 all all --repeats 3
  python experiments/run.py imagenet images cold --mem-limit 4G --iters 500
  python experiments/run.py mnist images cold --profile paper2016   # the paper's 2016 machine

The data is prepared first if missing (data_prep/prepare.py). cold: sync, then drop the page
cache, dentries and inodes (needs root); warm: read the whole artifact first. Either way the
share of the artifact resident in the page cache is measured (mincore) and recorded.
Runs already recorded are skipped unless --again.
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from data_prep import backends  # noqa: E402
from experiments import runner  # noqa: E402
from experiments.cache import CacheError  # noqa: E402
from experiments.cgroup import PROFILES, CgroupError, Limits  # noqa: E402


def parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", choices=["mnist", "cifar10", "imagenet"])
    p.add_argument("backend", help=f"{', '.join(backends.REGISTRY)}, a comma-separated list, or all")
    p.add_argument("cache", choices=["warm", "cold", "all"])
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--iters", type=int, help="max_iter (default: the stock solver's)")
    p.add_argument("--test-interval", type=int, help="test_interval (default: the stock solver's)")
    dev = p.add_mutually_exclusive_group()
    dev.add_argument("--gpu", type=int, help="GPU id (default: 0 when this Caffe has CUDA)")
    dev.add_argument("--cpu", action="store_true", help="train on the CPU")
    p.add_argument("--mem-limit", help="memory.max of the training cgroup, e.g. 4G (bounds the page cache)")
    p.add_argument("--cpus", type=int, help="cores the training may use (cpuset)")
    p.add_argument("--riops", type=int, help="io.max read IOPS on the data's disk")
    p.add_argument("--rbps", type=int, help="io.max read bytes/s on the data's disk")
    p.add_argument("--profile", choices=list(PROFILES), help="emulate a machine (paper2016: the paper's)")
    p.add_argument("--cold-fallback", choices=["fadvise"],
                   help="without root, make 'cold' with posix_fadvise(DONTNEED) (recorded as such)")
    p.add_argument("--data", default=str(runner.ROOT / "data"), help="data root (default: %(default)s)")
    p.add_argument("--out", default=str(runner.ROOT / "results"), help="results root (default: %(default)s)")
    p.add_argument("--again", action="store_true", help="run even if already recorded")
    p.add_argument("--seed", type=int, help="solver random_seed")
    return p


def cuda_built():
    opts = runner.CAFFE.resolve().parent / "options"
    return opts.exists() and "-DCPU_ONLY=OFF" in opts.read_text()


def plan(a):
    names = list(backends.REGISTRY) if a.backend == "all" else a.backend.split(",")
    caches = ["warm", "cold"] if a.cache == "all" else [a.cache]
    for n in names:
        backends.get(n)
    return [(b, c, r) for b in names for c in caches for r in range(a.repeats)
            if a.dataset in backends.get(b).supports]


def main(argv=None):
    a = parser().parse_args(argv)
    gpu = -1 if a.cpu else (a.gpu if a.gpu is not None else (0 if cuda_built() else -1))
    limits = Limits.from_args(a.mem_limit, a.cpus, a.riops, a.rbps, a.profile)
    done = {(r["backend"], r["cache"], r["repeat"]) for r in runner.recorded(a.out, a.dataset)
            if r["status"] == "ok" and r.get("iterations_setting") == a.iters and r["limits"] == limits.__dict__}
    from data_prep import build
    try:
        cells = plan(a)
        missing = sorted({b for b, _, _ in cells if build.load_manifest(Path(a.data) / a.dataset, b) is None})
        if missing:  # prepare only what is not there: an existing artifact is used as it is
            build.prepare(a.dataset, missing, a.data, log=lambda m: print(m, file=sys.stderr))
        if gpu < 0:
            print("Training on the CPU (this Caffe has no CUDA, or --cpu).", file=sys.stderr)
        for backend, cache_state, repeat in cells:
            if (backend, cache_state, repeat) in done and not a.again:
                print(f"{a.dataset} {backend} {cache_state} #{repeat}: already recorded", file=sys.stderr)
                continue
            spec = runner.RunSpec(a.dataset, backend, cache_state, repeat, a.iters, a.test_interval,
                                  gpu=gpu, data_root=Path(a.data), results=Path(a.out), limits=limits,
                                  cold_fallback=a.cold_fallback, seed=a.seed)
            runner.run(spec, log=lambda m: print(m, file=sys.stderr))
    except (CacheError, CgroupError, runner.RunError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: the run in progress was not recorded", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
