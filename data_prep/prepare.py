#!/usr/bin/env python3
"""Write a dataset into storage backends, exactly as Caffe's data layers read them.

  python data_prep/prepare.py mnist all                 # embedded Fashion-MNIST, six backends
  python data_prep/prepare.py cifar10 lmdb,images       # generated stand-in unless --source
  python data_prep/prepare.py imagenet lmdb,leveldb,images --count 2000
  python data_prep/prepare.py verify mnist all          # re-read everything, compare to source
  python data_prep/prepare.py clean mnist redis         # remove artifacts (a cluster's records too)

Pixels are stored in BGR order (Caffe's convention) whatever the source. A backend that
cannot hold a dataset is skipped with the reason (hdf5/pymem/cppmem for imagenet, as in
the paper).
"""
import argparse
import sys
from pathlib import Path

from data_prep import backends, build, datasets, locations, options
from data_prep.datasets import SourceError
from data_prep.redis_cluster import external as redis_external, keys as redis_keys

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "data"


def backend_list(text):
    return backends.names(text)


def main(argv=None):
    known = "\n".join(f"  {d.name:<9} {d.label}: --source is {d.real_format}; default: "
                      f"{'a generated stand-in' if d.standin else 'Debian Fashion-MNIST'}"
                      for d in datasets.REGISTRY.values())
    p = argparse.ArgumentParser(description=__doc__, epilog="datasets:\n" + known,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", help=f"{', '.join(datasets.REGISTRY)}, or 'verify' or 'clean' followed by a dataset")
    p.add_argument("backends", nargs="+", help=f"comma-separated: {', '.join(backends.REGISTRY)}, or 'all'")
    p.add_argument("--source", help="the real dataset (IDX folder, CIFAR-10 batches folder, ImageNet tree)")
    p.add_argument("--out", default=str(DEFAULT_OUT), help="output root (default: %(default)s)")
    p.add_argument("--limit", type=int, help="only the first N records of each split (for tests)")
    p.add_argument("--count", type=int, help="train images of a generated stand-in (imagenet default 2000)")
    p.add_argument("--seed", type=int, default=0, help="seed of generated stand-ins")
    p.add_argument("--jobs", type=int, help="worker processes (default: all cores)")
    p.add_argument("--force", action="store_true", help="rewrite artifacts that are up to date; with clean on a "
                   "cluster you run, remove the data set's keys there even when the manifest here does not describe "
                   "them")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    add_where_flags(p)
    a = p.parse_args(argv)
    try:
        where = options.chosen(a, where_owners())
        if a.dataset == "verify":
            dataset, names = a.backends[0], backend_list(a.backends[1] if len(a.backends) > 1 else "all")
            failures = build.verify(dataset, names, a.out, a.source, a.seed, progress=not a.quiet)
            for f in failures:
                print(f"FAIL {dataset} {f}", file=sys.stderr)
            print(f"verify {dataset}: {'FAILED' if failures else 'all artifacts match the source'}")
            return 1 if failures else 0
        if a.dataset == "clean":
            if len(a.backends) != 2:
                p.error("clean DATASET BACKENDS: which dataset, which backends (comma-separated, or all)")
            clean(datasets.get(a.backends[0]).name, backend_list(a.backends[1]), a.out, a.force, where)
            return 0
        if len(a.backends) != 1:
            p.error("give the backends as one comma-separated list")
        results = build.prepare(a.dataset, backend_list(a.backends[0]), a.out, a.source, a.limit,
                                a.count, a.seed, a.jobs, a.force, progress=not a.quiet, location_options=where)
        print_footprints(results)
    except SourceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except redis_errors() as e:  # refused (an ACL), a node gone
        external = redis_external.cluster(where.get("seeds"))
        where = f" {external.name}, user {external.user()}" if external else ""
        print(f"error: Redis{where}: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    return 0


def redis_errors():
    """redis-py's errors, where it is installed: a machine without it (a lent GPU machine's Python)
    prepares every local backend all the same."""
    try:
        import redis
    except ImportError:
        return ()
    return redis.RedisError, redis.exceptions.RedisClusterException


def add_where_flags(parser):
    """The locations' options that say where an artifact is written (a Redis Cluster's seeds:
    --cluster), declared by their locations as run.py's are."""
    for option, owners in where_options().values():
        option.add_to(parser, owners)


def where_options():
    return {name: declared for name, declared in options.declared(where_owners()).items() if declared[0].written}


def where_owners():
    return list(locations.REGISTRY.values())


def clean(dataset, names, out_root, force, where=None):
    """build.clean, in a data set folder that exists; --force: the redis backend's keys on a
    cluster the user runs (--cluster, or the one the artifact was written to) even where no
    manifest here says they are this checkout's."""
    out = Path(out_root) / dataset
    if not out.is_dir():
        raise SourceError(f"clean {dataset}: no folder {out} (--out {out_root}): nothing here says what to remove")
    seeds = (where or {}).get("seeds")
    if force and "redis" in names and redis_keys.cluster_of(out / "redis", seeds).external:
        with build.dataset_lock(out):
            backends.get("redis").remove(out / "redis", force=True, seeds=seeds)
    build.clean(dataset, names, out_root, location_options=where)


def print_footprints(results):
    if not results:
        return
    print(f"{'backend':<9} {'apparent':>13} {'allocated':>13} {'files':>8}")
    for name, m in results.items():
        f = m.footprint
        print(f"{name:<9} {f['apparent_bytes'] / 2**20:>9.1f} MiB {f['allocated_bytes'] / 2**20:>9.1f} MiB {f['files']:>8}")


if __name__ == "__main__":
    sys.exit(main())
