#!/usr/bin/env python3
"""The make targets: a dataset's whole matrix (every backend it supports x warm/cold x
repeats), then a summary table (training time mean +- sd, accelerator utilisation).

  python experiments/matrix.py mnist-all [run.py options]     # stock solver, 3 repeats
  python experiments/matrix.py mnist-quick [run.py options]   # few iterations, 1 repeat

Without a CUDA build the matrix runs on an emulated H100 (run.py --help); pass
--accelerator none to train on the CPU for real.

Exit status (experiments/exit_codes.py): run.py's over all the cells, the worst winning
(130 > 4 > 2 > 3 > 1 > 0), every lesser outcome said as well: 0 every solver finished, 1 some
solver failed, 2 refused or bad input, 3 stalled or timed out, 4 an internal error (a line names
the log holding its traceback), 130 interrupted.
"""
import sys
from pathlib import Path

from data_prep import backends, datasets
from experiments import exit_codes, resolved, run
from experiments.config import RunConfig
from experiments.record import recorded

KINDS = ("all", "quick")


def print_table(dataset, records, out=sys.stdout):
    from experiments.cells import cell_stats
    table = cell_stats(records)
    print(f"\n{dataset}: training wall time in seconds, mean +- sd (n), and AU", file=out)
    for s in sorted({" / ".join(r.setup()) for r in records if r.dataset == dataset}):
        print(f"  on: {s}", file=out)
    print(f"{'backend':<9} {'warm':>30} {'cold':>30}", file=out)
    for backend in backends.REGISTRY:
        cols = []
        for cache in ("warm", "cold"):
            cell = table.get((dataset, backend, cache))
            if not cell:
                cols.append(f"{'-':>30}")
                continue
            sd = f"+- {cell['sd']:6.2f}" if cell["sd"] is not None else " " * 9
            au = f"AU {cell['au']:4.0%}" if cell["au"] is not None else " " * 7
            cols.append(f"{cell['mean']:8.2f} {sd} ({cell['n']}) {au}")
        if any(c.strip() != "-" for c in cols):
            print(f"{backend:<9} {cols[0]:>30} {cols[1]:>30}", file=out)


def configuration(dataset, kind, extra):
    """The RunConfig of a make target, the run.py flags in `extra` applied over it: every backend,
    warm and cold, 3 repeats at the dataset's matrix sizing (quick: 1 repeat of its quick iterations)."""
    ds = datasets.get(dataset)
    target = RunConfig(dataset, "all", "all", repeats=3)
    if kind == "quick":
        target = target.replace(repeats=1, iters=ds.quick_iters, test_interval=ds.quick_iters)
    elif ds.matrix_config:
        target = target.replace(**ds.matrix_config)
    return run.parse(extra, base=target)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["-h"], ["--help"]):
        print(f"usage: {Path(sys.argv[0]).name} DATASET-all|DATASET-quick [run.py options]\n\n{__doc__.strip()}")
        return 0
    if not argv or "-" not in argv[0]:
        print(__doc__, file=sys.stderr)
        return exit_codes.REFUSED
    target, extra = argv[0], argv[1:]
    dataset, kind = target.rsplit("-", 1)
    if dataset not in datasets.REGISTRY or kind not in KINDS:
        print(f"error: no make target {target}: DATASET-all or DATASET-quick, DATASET one of "
              f"{', '.join(datasets.REGISTRY)}", file=sys.stderr)
        return exit_codes.REFUSED
    config = configuration(dataset, kind, extra)
    try:
        return _matrix(target, dataset, config)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return exit_codes.INTERRUPTED
    except Exception as e:  # noqa: BLE001 -- a fault of this code: one line naming the traceback's log
        return exit_codes.internal_error(e, Path(config.out) / dataset)


def _matrix(target, dataset, config):
    """The matrix's cells run (run.run), then its table; the worst of their outcomes."""
    gpu, accelerator = resolved.compute_choice(config)
    what = (f"an emulated {accelerator} (real Caffe data path; --accelerator none for real CPU training)"
            if accelerator else "the real GPU" if gpu >= 0 else "the real CPU (hours for the stock solvers)")
    print(f"{target}: the {dataset} matrix on {what}.", file=sys.stderr)
    rc = run.run(config)
    try:
        print_table(dataset, [r for r in recorded(config.out, dataset) if r.iterations_setting == config.iters])
    except run.REFUSALS as e:  # a damaged records file, say
        print(f"error: no table: {e}", file=sys.stderr)
        return exit_codes.worst(rc, exit_codes.REFUSED)
    return rc


if __name__ == "__main__":
    sys.exit(main())
