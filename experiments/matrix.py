#!/usr/bin/env python3
"""The make targets: a dataset's whole matrix (every backend x warm/cold x repeats), then a
summary table (mean +- sd of training time per backend and cache state).

  python experiments/matrix.py mnist-all [run.py options]     # stock solver, 3 repeats
  python experiments/matrix.py mnist-quick [run.py options]   # few iterations, 1 repeat
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.report import cell_stats  # noqa: E402
from experiments import run, runner  # noqa: E402

QUICK_ITERS = {"mnist": 200, "cifar10": 100, "imagenet": 20}


def print_table(dataset, records, out=sys.stdout):
    table = cell_stats(records)
    print(f"\n{dataset}: training wall time, seconds (mean +- sd, n)", file=out)
    print(f"{'backend':<9} {'warm':>22} {'cold':>22}", file=out)
    for backend in sorted({b for d, b, _ in table if d == dataset}):
        cols = []
        for cache in ("warm", "cold"):
            m = table.get((dataset, backend, cache))
            cols.append(f"{m['mean']:9.2f} +- {m['sd']:6.2f} ({m['n']})" if m else f"{'-':>22}")
        print(f"{backend:<9} {cols[0]:>22} {cols[1]:>22}", file=out)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    target, extra = argv[0], argv[1:]
    dataset, kind = target.rsplit("-", 1)
    backends = "lmdb,leveldb,images" if dataset == "imagenet" else "all"
    if kind == "quick":
        iters = QUICK_ITERS[dataset]
        args = [dataset, backends, "all", "--repeats", "1", "--iters", str(iters), "--test-interval", str(iters)]
    else:
        args = [dataset, backends, "all", "--repeats", "3"]
    if not run.cuda_built() and "--gpu" not in extra:
        print(f"No CUDA in this Caffe build: the {target} matrix runs on the CPU "
              f"({'minutes' if kind == 'quick' else 'many hours for the stock solvers'}).", file=sys.stderr)
    rc = run.main(args + extra)
    out = next((extra[i + 1] for i, a in enumerate(extra) if a == "--out"), str(runner.ROOT / "results"))
    iters = int(args[args.index("--iters") + 1]) if "--iters" in args else None
    records = [r for r in runner.recorded(out, dataset) if r.get("iterations_setting") == iters]
    print_table(dataset, records)
    return rc


if __name__ == "__main__":
    sys.exit(main())
