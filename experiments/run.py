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
import signal
import subprocess
import sys
from pathlib import Path

import toolchain
from data_prep import backends, datasets, locations, options
from data_prep.cache import CacheError
from experiments import caffe_log, exit_codes, record, resolved, runner, training
from experiments import config as config_module
from experiments.accelerators import AcceleratorError
from experiments.cgroup import CgroupError


SOLVERS_FAILED = exit_codes.SOLVERS_FAILED  # kept for callers that named it here

SHORT_HELP_END = """Each run prints what it made the cache, its compute, then: wall seconds, start-up, the solver's
seconds, AU (accelerator utilisation: compute time over the solver's time; >= 90%: the accelerator
was fed). Exit status: 0 every solver finished; 1 some solver failed (recorded as failed, its log
named); 2 refused (bad input, missing privilege, a damaged records file); 3 training stalled or a
step timed out; 4 internal error (a line names the log holding it; a record not written);
130 interrupted. Over several cells the worst wins (130 > 4 > 2 > 3 > 1), the others said too.
Backends' read options (LMDB read paths, Redis prefetching, a network delay) and the
long description: --help-all. In depth: docs/running.md."""

# what refuses a run (exit 2), a damaged records file among them
REFUSALS = (CacheError, CgroupError, runner.RunError, AcceleratorError, datasets.SourceError,
            toolchain.MissingBuild, caffe_log.LogError, record.RecordsDamaged)
# exit 3: training stalled, a step timed out, or the records' lock was held past its wait
STALLS = (training.Stalled, subprocess.TimeoutExpired, record.RecordsLocked)


def parser(full=True):
    """The command line, made from RunConfig's flags; full=False: the short help -h prints (no
    backend read options, no rare flags)."""
    examples = "\n".join(__doc__.split("\n\n")[1].splitlines()[:5])
    p = argparse.ArgumentParser(description=__doc__ if full else __doc__.split("\n\n")[0] + "\n\n" + examples,
                                epilog=None if full else SHORT_HELP_END,
                                formatter_class=lambda prog: argparse.RawDescriptionHelpFormatter(
                                    prog, width=100, max_help_position=28))
    return config_module.add_flags(p, full)


def parse(argv, base=None):
    """The RunConfig a command line asks (argparse's exit on bad input). base: a RunConfig
    whose values stand where argv gives no flag; argv then holds flags only."""
    if base is None:
        return config_module.from_args(parser().parse_args(argv))
    p = parser()
    p.set_defaults(**config_module.flag_values(base), **base.options)
    return config_module.from_args(p.parse_args([base.dataset, base.backend, base.cache, *argv]))


def plan(dataset, backend_text, cache, repeats, location_options=None):
    """[(backend, cache, repeat)] interleaved: repeat by repeat, the backends rotated by one
    each repeat, warm and cold alternating in which comes first. location_options: where the
    data is (a cluster the user runs needs no redis-server here)."""
    ds = datasets.get(dataset)
    names = [n for n in backends.names(backend_text)
             if not backends.get(n).unsupported(ds, **resolved.location_part(n, location_options or {}))]
    caches = ["warm", "cold"] if cache == "all" else [cache]
    cells = []
    for r in range(repeats):
        rotated = names[r % len(names):] + names[:r % len(names)] if names else []
        for i, b in enumerate(rotated):
            order = caches if (r + i) % 2 == 0 else caches[::-1]
            cells += [(b, c, r) for c in order]
    return cells


compute_choice = resolved.compute_choice  # kept for callers that named it here


def _same_setup(r, resolution, config):
    """Whether record r ran the setup `config` asks (resolution: its experiments.resolved.Resolved):
    every field RunConfig declares part of the setup (experiments.resolved.same_setup)."""
    return resolved.same_setup(r, resolution, config)


def _check_read_flags(cells, reading):
    """An option that applies to none of the chosen backends is an error, not silently ignored."""
    chosen = [backends.get(b) for b in {b for b, _, _ in cells}]
    options.check_applies(reading[0], list(backends.REGISTRY.values()), chosen)
    remote = ", ".join(n for n, b in backends.REGISTRY.items() if locations.get(b.location).options)
    options.check_applies(reading[1], list(locations.REGISTRY.values()), [locations.get(b.location) for b in chosen],
                          words="data on a {names} (backends: " + remote + ")")


def recorded_runs(config, ok_only=True, resolution=None):
    """The records of config.dataset that ran the setup `config` asks: the same compute, limits,
    iterations, read and location options, number of solvers and every other setup field.
    Successful ones only, unless ok_only is False; superseded ones never. resolution: config's
    experiments.resolved.Resolved, if already made."""
    resolution = resolution or resolved.resolve(config)
    return [r for r in record.recorded(config.out, config.dataset)
            if not r.superseded and (r.ok or not ok_only) and _same_setup(r, resolution, config)]


def default_sizing(config):
    """A dataset whose stock run is not the paper's condition here (ImageNet: 15,000 iterations
    are ~1,900 passes over a stand-in that fits in memory) runs as its matrix sizes it, unless the
    configuration chose count, mem_limit, iters or profile, or several solvers. Returns
    (the configuration to run, the sizing's flags as run.py words, or None)."""
    ds = datasets.get(config.dataset)
    if (not ds.matrix_config or config.concurrent != 1
            or any(v is not None for v in (config.count, config.mem_limit, config.iters, config.profile))):
        return config, None
    applied = config_module.flag_words({k: v for k, v in ds.matrix_config.items() if k != "iters_reason"})
    return config.replace(**ds.matrix_config), applied


def _stop(signum, frame):
    raise KeyboardInterrupt  # the runner stops the training, its monitor and its cgroup


def main(argv=None):
    """The command line: parsed into a RunConfig and run."""
    argv = sys.argv[1:] if argv is None else argv
    if "-h" in argv or "--help" in argv:
        parser(full=False).print_help()
        return 0
    if "--help-all" in argv:
        parser().print_help()
        return 0
    return run(parse(argv))


def run(config):
    """Runs the cells `config` asks that are not yet recorded; the exit status main returns."""
    signal.signal(signal.SIGTERM, _stop)  # `kill`: the same clean stop as Ctrl-C
    # a shell starts background jobs with SIGINT ignored, and Python then leaves it ignored;
    # Caffe never does, so a `kill -INT` would stop the training and not this process
    signal.signal(signal.SIGINT, signal.default_int_handler)
    config, sized = default_sizing(config)
    if sized:
        print(f"{datasets.get(config.dataset).label}: sized for the paper's condition by default ({' '.join(sized)}): "
              "the data several times what memory leaves to the page cache, a few passes over it; "
              "--count, --mem-limit or --iters choose otherwise", file=sys.stderr)
    records, log = [], lambda m: print(m, file=sys.stderr)
    try:
        asked = _checked(config)  # bad input refused at once, not after another run.py is done
        with runner.run_lock(log):  # what is recorded, preparing and training: one run.py at a time
            _run_cells(config, asked, records)
    except REFUSALS as e:
        return _ended(records, exit_codes.REFUSED, f"error: {e}")
    except STALLS as e:
        return _ended(records, exit_codes.STALLED, f"error: {e}")
    except runner.RecordNotWritten as e:
        return _ended(records, exit_codes.INTERNAL, f"error: {e}")
    except KeyboardInterrupt:
        return _ended(records, exit_codes.INTERRUPTED, "interrupted: the run in progress was not recorded")
    except Exception as e:  # noqa: BLE001 -- a fault of this code: one line naming the traceback's log
        _failures_said(records)
        return exit_codes.internal_error(e, Path(config.out) / config.dataset)
    return _failures_said(records)


def _checked(config):
    """(resolution, cells) the configuration asks, each checked."""
    resolution = resolved.resolve(config)
    if config.concurrent < 1:
        raise datasets.SourceError("--concurrent must be at least 1")
    cells = plan(config.dataset, config.backend, config.cache, config.repeats, resolution.reading[1])
    _check_read_flags(cells, resolution.reading)
    return resolution, cells


def _run_cells(config, asked, records):
    """Prepares missing data and runs the planned cells not yet recorded, appending their Records
    to `records`; under the run lock, so that what is recorded is read after any other run.py of
    this user has ended."""
    from data_prep import build
    resolution, cells = asked
    done = {(r.backend, r.cache, r.repeat) for r in recorded_runs(config, resolution=resolution)}
    build.prepare_missing(config.dataset, sorted({b for b, _, _ in cells}), config.data, count=config.count,
                          log=lambda m: print(m, file=sys.stderr), location_options=resolution.reading[1])
    if resolution.accelerator:
        print(f"Compute: emulated {resolution.accelerator} (models/accelerators.json) inside real Caffe; "
              f"the data path is real.", file=sys.stderr)
    elif resolution.gpu < 0:
        print("Compute: the real CPU (this Caffe has no CUDA, or --cpu): slow for the stock solvers.",
              file=sys.stderr)
    for position, (backend, cache_state, repeat) in enumerate(cells):
        if (backend, cache_state, repeat) in done and not config.again:
            print(f"{config.dataset} {backend} {cache_state} (repeat {repeat}): already recorded", file=sys.stderr)
            continue
        cell = runner.Cell(backend, cache_state, repeat,
                           plan={"position": position, "cells": len(cells), "order": "interleaved"})
        records += runner.run_group(config, cell, log=lambda m: print(m, file=sys.stderr), resolution=resolution)


def _ended(records, code, line):
    """The status of a run stopped by an error: the worst of it and the failed solvers before
    it, both said (the failures first)."""
    failed = _failures_said(records)
    print(line, file=sys.stderr)
    return exit_codes.worst(code, failed)


def _failures_said(records):
    """OK when every solver run here finished, else SOLVERS_FAILED, having said how many failed and where."""
    failed = [r for r in records if not r.ok]
    if not failed:
        return exit_codes.OK
    cells = sorted({f"{r.backend} {r.cache}" for r in failed})
    print(f"error: {len(failed)} of {len(records)} solvers failed ({', '.join(cells)}); each is recorded as "
          "failed, its log named above", file=sys.stderr)
    return exit_codes.SOLVERS_FAILED


if __name__ == "__main__":
    sys.exit(main())
