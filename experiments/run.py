#!/usr/bin/env python3
"""Train a stock Caffe net from one storage backend under a warm or cold page cache, with
the system monitor on, and record the run (results/DATASET/records.jsonl).

  python experiments/run.py mnist lmdb cold
  python experiments/run.py cifar10 all all --repeats 3
  python experiments/run.py imagenet images cold --mem-limit 4G --iters 500
  python experiments/run.py mnist images cold --profile paper2016   # the paper's 2016 machine
  python experiments/run.py mnist lmdb warm --accelerator 2.5ms      # an accelerator of your own
  python experiments/run.py cifar10 redis warm --rtt 50ms --out-of-order  # a Redis Cluster, 50 ms away
  python experiments/run.py imagenet lmdb cold --lmdb-read coalesced  # LMDBIO's large reads, not mmap
  python experiments/run.py imagenet lmdb,images cold --concurrent 4  # 4 solvers on the same data
  python experiments/run.py imagenet lmdb cold --concurrent 4 --mem-limit 1G --mem-per-solver 800M  # cache share kept

Compute: with a CUDA build of Caffe, the real GPU. Without one, an emulated H100: Caffe runs
for real (data layers, prefetch threads, transformer, page cache, disk) and only the net's
forward/backward is replaced by the time an H100 takes (models/accelerators.json), so the
storage effect shows on any machine. --cpu trains on the CPU for real (slow: hours for the
stock solvers). Every record says which, and its accelerator utilisation (AU).

The data is prepared first if missing (data_prep/prepare.py). cold: sync, then drop the page
cache, dentries and inodes (needs root); warm: read the whole artifact first. Either way the
share of the artifact resident in the page cache is measured (mincore) and recorded.
Cells run interleaved (repeat by repeat, backends rotated, warm/cold alternated) so that a
drift of the machine does not land on one backend. Runs already recorded are skipped unless --again.
"""
import argparse
import os
import signal
import sys
from pathlib import Path


import toolchain  # noqa: E402
from data_prep import backends, datasets, locations, options, redis_external  # noqa: E402
from data_prep.cache import CacheError  # noqa: E402
from experiments import caffe_log, machines, runner, training  # noqa: E402
from experiments.accelerators import AcceleratorError, profiles  # noqa: E402
from experiments.cgroup import CgroupError, Limits  # noqa: E402
from experiments.record import recorded  # noqa: E402


SOLVERS_FAILED = 1  # exit status: the cells ran, and at least one solver's run failed (recorded as failed)

SHORT_HELP_END = """Each run prints what it made the cache, its compute, then: wall seconds, start-up, the solver's
seconds, AU (accelerator utilisation: compute time over the solver's time; >= 90%: the accelerator
was fed). Exit status: 0 every solver finished; 1 some solver failed (recorded as failed, its log
named); 2 refused (bad input, missing privilege); 130 interrupted. Backends' read options (LMDB read paths, Redis prefetching, a network delay) and the
long description: --help-all. In depth: docs/running.md."""


def parser(full=True):
    """The command line; full=False: the short help -h prints (no backend read options)."""
    examples = "\n".join(__doc__.split("\n\n")[1].splitlines()[:5])
    p = argparse.ArgumentParser(description=__doc__ if full else __doc__.split("\n\n")[0] + "\n\n" + examples,
                                epilog=None if full else SHORT_HELP_END,
                                formatter_class=lambda prog: argparse.RawDescriptionHelpFormatter(
                                    prog, width=100, max_help_position=28))

    def rare(text):  # in the full help only
        return text if full else argparse.SUPPRESS
    p.add_argument("dataset", choices=list(datasets.REGISTRY))
    p.add_argument("backend", help=f"{', '.join(backends.REGISTRY)}, a comma-separated list, or all")
    p.add_argument("cache", choices=["warm", "cold", "all"])
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--iters", type=int, help="max_iter (default: the stock solver's)")
    p.add_argument("--iters-reason", help=argparse.SUPPRESS)  # the matrix says why it scaled iterations
    p.add_argument("--test-interval", type=int, help=rare("test_interval (default: the stock solver's; "
                   "made to divide max_iter so the last test runs at the last iteration)"))
    dev = p.add_mutually_exclusive_group()
    dev.add_argument("--gpu", type=int, help="GPU id (default: 0 when this Caffe has CUDA)")
    dev.add_argument("--cpu", action="store_true", help="train on the CPU for real, no emulation")
    p.add_argument("--accelerator", help=f"emulate an accelerator: {', '.join(profiles())}, a time per "
                   "iteration such as 2.5ms, or none (real compute). Default: the real GPU with a CUDA "
                   "build, else h100 (titanx2016 under --profile paper2016)")
    p.add_argument("--mem-limit", help="memory limit of the training cgroup, e.g. 4G (bounds the page cache)")
    p.add_argument("--mem-per-solver", help=rare("with --concurrent N: memory added to --mem-limit for each solver "
                   "beyond the first (e.g. 800M, a CaffeNet solver's own), so that the page cache keeps "
                   "one solver's share at every N"))
    p.add_argument("--cpus", type=int, help=rare("cores the training may use (cpuset)"))
    p.add_argument("--cpu-quota", type=float, metavar="CORES",
                   help=rare("CPU time the training may use, in cores' worth shared by all its threads "
                             "(cgroup CPU quota; 0.5: half of one core): a slower host's CPU"))
    p.add_argument("--riops", type=int, help=rare("read IOPS limit on the data's disk"))
    p.add_argument("--rbps", type=int, help=rare("read bytes/s limit on the data's disk"))
    p.add_argument("--cluster", metavar="HOST:PORT[,...]", help=rare("the redis backend in a Redis or Valkey Cluster you run, reached at these seeds (sets "
                   "IMGSTORE_REDIS_CLUSTER); credentials from IMGSTORE_REDIS_USER and IMGSTORE_REDIS_PASSWORD or "
                   "IMGSTORE_REDIS_PASSWORD_FILE (chmod 600), never from the command line"))
    p.add_argument("--profile", choices=list(machines.PROFILES),
                   help="emulate a whole machine (experiments/machines.py): " +
                        "; ".join(f"{m.name} = {m.summary}" for m in machines.PROFILES.values()))
    if full:
        options.add_groups(p, list(backends.REGISTRY.values()), "reading from {name} ({label}): DataParameter fields")
        options.add_groups(p, list(locations.REGISTRY.values()), "data on a {name}")
    p.add_argument("--help-all", action="store_true", help="every option, the backends' read options too")
    p.add_argument("--concurrent", type=int, default=1, metavar="N",
                   help="N training processes on the same artifact at once, each its own accelerator "
                        "(emulated, or the same GPU); each is recorded, with the group's makespan and "
                        "device bytes")
    p.add_argument("--client-hosts", metavar="NS[,NS...]", type=lambda t: tuple(filter(None, t.split(","))), default=(),
                   help=rare("run the solvers in these network namespaces, in turn, as if on that many client "
                             "hosts (experiments/hosts.py makes them; benchmarks/multihost.py uses this)"))
    p.add_argument("--cold-fallback", choices=["fadvise"],
                   help=rare("without root, make 'cold' with posix_fadvise(DONTNEED) (recorded as such)"))
    p.add_argument("--count", type=int, help=rare("train images of a generated stand-in, when the data must be "
                   "prepared first (an existing artifact is used as it is)"))
    p.add_argument("--data", default=str(runner.ROOT / "data"), help="data root (default: %(default)s)")
    p.add_argument("--out", default=str(runner.ROOT / "results"), help="results root (default: %(default)s)")
    p.add_argument("--again", action="store_true", help=rare("run even if already recorded"))
    p.add_argument("--seed", type=int, help=rare("solver random_seed"))
    p.add_argument("--quiet", action="store_true", help=rare("no progress line while training"))
    return p


def plan(dataset, backend_text, cache, repeats):
    """[(backend, cache, repeat)] interleaved: repeat by repeat, the backends rotated by one
    each repeat, warm and cold alternating in which comes first."""
    ds = datasets.get(dataset)
    names = [n for n in backends.names(backend_text) if not backends.get(n).unsupported(ds)]
    caches = ["warm", "cold"] if cache == "all" else [cache]
    cells = []
    for r in range(repeats):
        rotated = names[r % len(names):] + names[:r % len(names)] if names else []
        for i, b in enumerate(rotated):
            order = caches if (r + i) % 2 == 0 else caches[::-1]
            cells += [(b, c, r) for c in order]
    return cells


def compute_choice(a):
    """(gpu id, accelerator text or None for real compute)."""
    gpu = -1 if a.cpu else (a.gpu if a.gpu is not None else (0 if toolchain.cuda_built() else -1))
    if a.accelerator:
        return gpu, None if a.accelerator == "none" else a.accelerator
    if a.cpu or gpu >= 0:
        return gpu, None
    return gpu, machines.get(a.profile).accelerator if a.profile else "h100"


def _same_setup(r, limits, accelerator, iters, reading, concurrent, client_hosts=0):
    """Whether record r ran the setup asked: reading = (its read options, its location options);
    a record of a cluster the user runs is only the same setup on that cluster."""
    c = r.compute or {}
    read_options, location_options = reading
    if r.backend not in backends.REGISTRY:  # a backend no longer registered: nothing to compare
        return False
    reached = locations.get(backends.REGISTRY[r.backend].location).options_of(r.location)
    return (r.iterations_setting == iters and Limits.from_record(r.limits).as_dict() == limits.as_dict()
            and (c.get("accelerator") if c.get("mode") == "emulated" else None) == accelerator
            and reached == location_options and (r.location or {}).get("seeds") == _cluster_seeds(r.backend)
            and (r.read_options or {}) == read_options
            and (r.concurrent or {}).get("solvers", 1) == concurrent
            and (r.concurrent or {}).get("client_hosts", 0) == client_hosts)


def read_choice(a):
    """({read option: value}, {location option: value}) set on the command line, checked."""
    return (options.chosen(a, list(backends.REGISTRY.values())),
            options.chosen(a, list(locations.REGISTRY.values())))


def _read_for(backend, reading):
    """The options that apply to this backend: its reader's, and those of its location."""
    b = backends.get(backend)
    return options.for_owner(b, reading[0]), options.for_owner(locations.get(b.location), reading[1])


def _check_read_flags(cells, reading):
    """An option that applies to none of the chosen backends is an error, not silently ignored."""
    chosen = [backends.get(b) for b in {b for b, _, _ in cells}]
    options.check_applies(reading[0], list(backends.REGISTRY.values()), chosen)
    remote = ", ".join(n for n, b in backends.REGISTRY.items() if locations.get(b.location).options)
    options.check_applies(reading[1], list(locations.REGISTRY.values()), [locations.get(b.location) for b in chosen],
                          words="data on a {names} (backends: " + remote + ")")


def limits_choice(a):
    return Limits.from_args(a.mem_limit, a.cpus, a.riops, a.rbps, a.profile, a.mem_per_solver, a.cpu_quota)


def recorded_runs(a, ok_only=True):
    """The records of a.dataset that ran the setup `a` asks: the same compute, limits,
    iterations, read and location options, and number of solvers. Successful ones only, unless
    ok_only is False; superseded ones never."""
    _, accelerator = compute_choice(a)
    limits = limits_choice(a)
    reading = read_choice(a)
    return [r for r in recorded(a.out, a.dataset)
            if not r.superseded and (r.ok or not ok_only)
            and _same_setup(r, limits, accelerator, a.iters, _read_for(r.backend, reading), a.concurrent,
                           len(a.client_hosts))]


def _cluster_seeds(backend):
    """The seeds of the cluster the user runs (--cluster) for a backend kept in a Redis Cluster;
    None for the project's own cluster and for every other backend."""
    external = redis_external.cluster()
    b = backends.REGISTRY.get(backend)
    return external.seed_text() if external and b and b.location == "redis-cluster" else None


def default_sizing(a):
    """A dataset whose stock run is not the paper's condition here (ImageNet: 15,000 iterations
    are ~1,900 passes over a stand-in that fits in memory) runs as its matrix sizes it, unless the
    command line chose --count, --mem-limit, --iters or --profile, or several solvers. Returns the
    arguments applied, or None."""
    ds = datasets.get(a.dataset)
    if not ds.matrix_args or a.concurrent != 1 or any(v is not None for v in (a.count, a.mem_limit, a.iters, a.profile)):
        return None
    sized = parser().parse_args([a.dataset, a.backend, a.cache, *ds.matrix_args])
    a.count, a.mem_limit, a.iters, a.iters_reason = sized.count, sized.mem_limit, sized.iters, sized.iters_reason
    return [x for x in ds.matrix_args if x != "--iters-reason" and x != sized.iters_reason]


def _stop(signum, frame):
    raise KeyboardInterrupt  # the runner stops the training, its monitor and its cgroup


def main(argv=None):
    signal.signal(signal.SIGTERM, _stop)  # `kill`: the same clean stop as Ctrl-C
    # a shell starts background jobs with SIGINT ignored, and Python then leaves it ignored;
    # Caffe never does, so a `kill -INT` would stop the training and not this process
    signal.signal(signal.SIGINT, signal.default_int_handler)
    argv = sys.argv[1:] if argv is None else argv
    if "-h" in argv or "--help" in argv:
        parser(full=False).print_help()
        return 0
    if "--help-all" in argv:
        parser().print_help()
        return 0
    a = parser().parse_args(argv)
    if a.cluster:
        os.environ[redis_external.SEEDS_ENV] = a.cluster
    sized = default_sizing(a)
    if sized:
        print(f"{datasets.get(a.dataset).label}: sized for the paper's condition by default ({' '.join(sized)}): "
              "the data several times what memory leaves to the page cache, a few passes over it; "
              "--count, --mem-limit or --iters choose otherwise", file=sys.stderr)
    gpu, accelerator = compute_choice(a)
    from data_prep import build
    try:
        limits = limits_choice(a)
        if a.concurrent < 1:
            raise datasets.SourceError("--concurrent must be at least 1")
        reading = read_choice(a)
        done = {(r.backend, r.cache, r.repeat) for r in recorded_runs(a)}
        cells = plan(a.dataset, a.backend, a.cache, a.repeats)
        _check_read_flags(cells, reading)
        build.prepare_missing(a.dataset, sorted({b for b, _, _ in cells}), a.data, count=a.count,
                              log=lambda m: print(m, file=sys.stderr))
        if accelerator:
            print(f"Compute: emulated {accelerator} (models/accelerators.json) inside real Caffe; "
                  f"the data path is real.", file=sys.stderr)
        elif gpu < 0:
            print("Compute: the real CPU (this Caffe has no CUDA, or --cpu): slow for the stock solvers.",
                  file=sys.stderr)
        records = []
        for position, (backend, cache_state, repeat) in enumerate(cells):
            if (backend, cache_state, repeat) in done and not a.again:
                print(f"{a.dataset} {backend} {cache_state} (repeat {repeat}): already recorded", file=sys.stderr)
                continue
            read_options, location_options = _read_for(backend, reading)
            spec = runner.RunSpec(a.dataset, backend, cache_state, repeat, a.iters, a.test_interval,
                                  read_options=read_options, location_options=location_options,
                                  concurrent=a.concurrent, client_hosts=a.client_hosts,
                                  gpu=gpu, accelerator=accelerator, data_root=Path(a.data), results=Path(a.out),
                                  limits=limits, cold_fallback=a.cold_fallback, seed=a.seed,
                                  plan={"position": position, "cells": len(cells), "order": "interleaved"},
                                  iterations_reason=a.iters_reason, progress=not a.quiet)
            records += runner.run_group(spec, log=lambda m: print(m, file=sys.stderr))
    except (CacheError, CgroupError, runner.RunError, AcceleratorError, datasets.SourceError,
            toolchain.MissingBuild, training.Stalled, caffe_log.LogError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: the run in progress was not recorded", file=sys.stderr)
        return 130
    return _failures_said(records)


def _failures_said(records):
    """0 when every solver run here finished, else SOLVERS_FAILED, having said how many failed and where."""
    failed = [r for r in records if not r.ok]
    if not failed:
        return 0
    cells = sorted({f"{r.backend} {r.cache}" for r in failed})
    print(f"error: {len(failed)} of {len(records)} solvers failed ({', '.join(cells)}); each is recorded as "
          "failed, its log named above", file=sys.stderr)
    return SOLVERS_FAILED


if __name__ == "__main__":
    sys.exit(main())
