#!/usr/bin/env python3
"""The make targets: a dataset's whole matrix (every backend it supports x warm/cold x
repeats), then a summary table (training time mean +- sd, accelerator utilisation).

  python experiments/matrix.py mnist-all [run.py options]     # stock solver, 3 repeats
  python experiments/matrix.py mnist-quick [run.py options]   # few iterations, 1 repeat

Without a CUDA build the matrix runs on an emulated H100 (run.py --help); pass
--accelerator none to train on the CPU for real.
"""
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from data_prep import backends, datasets  # noqa: E402
from experiments import run, runner  # noqa: E402
from experiments.record import recorded  # noqa: E402

# ImageNet's 15,000 CaffeNet iterations take 13 minutes on an H100 and far longer wherever the data
# path is slower; the matrix scales them so that one run takes a few minutes, and records why.
SCALED_ITERS = {"imagenet": (300, "scaled from the stock 15,000 so that one run of the matrix takes "
                                  "about 3 minutes on a 2-core machine (the data path, not compute, "
                                  "sets the pace there)")}


def summary(records, dataset):
    """{(backend, cache): (seconds mean, sd, n, AU mean or None)} over ok runs."""
    cells = {}
    for r in records:
        if r.ok and r.dataset == dataset:
            cells.setdefault((r.backend, r.cache), []).append(r)
    out = {}
    for key, rs in cells.items():
        secs = [r.wall_seconds for r in rs]
        aus = [r.au for r in rs if r.au is not None]
        out[key] = (statistics.mean(secs), statistics.stdev(secs) if len(secs) > 1 else None, len(secs),
                    statistics.mean(aus) if aus else None)
    return out


def print_table(dataset, records, out=sys.stdout):
    table = summary(records, dataset)
    setups = sorted({" / ".join(r.setup()) for r in records if r.dataset == dataset})
    print(f"\n{dataset}: training wall time in seconds, mean +- sd (n), and AU", file=out)
    for s in setups:
        print(f"  on: {s}", file=out)
    print(f"{'backend':<9} {'warm':>30} {'cold':>30}", file=out)
    for backend in backends.REGISTRY:
        cols = []
        for cache in ("warm", "cold"):
            cell = table.get((backend, cache))
            if not cell:
                cols.append(f"{'-':>30}")
                continue
            mean, sd, n, au = cell
            sd_text = f"+- {sd:6.2f}" if sd is not None else "        "
            au_text = f"AU {au:4.0%}" if au is not None else "       "
            cols.append(f"{mean:8.2f} {sd_text} ({n}) {au_text}")
        if any(c.strip() != "-" for c in cols):
            print(f"{backend:<9} {cols[0]:>30} {cols[1]:>30}", file=out)


def arguments(dataset, kind, extra):
    ds = datasets.get(dataset)
    if kind == "quick":
        iters = ds.quick_iters
        return [dataset, "all", "all", "--repeats", "1", "--iters", str(iters), "--test-interval", str(iters)], iters
    args = [dataset, "all", "all", "--repeats", "3"]
    if dataset in SCALED_ITERS and "--iters" not in extra:
        iters, why = SCALED_ITERS[dataset]
        return args + ["--iters", str(iters), "--iters-reason", why], iters
    return args, None


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or "-" not in argv[0]:
        print(__doc__, file=sys.stderr)
        return 2
    target, extra = argv[0], argv[1:]
    dataset, kind = target.rsplit("-", 1)
    args, iters = arguments(dataset, kind, extra)
    gpu, accelerator = run.compute_choice(run.parser().parse_args(args + extra))
    what = (f"an emulated {accelerator} (real Caffe data path; --accelerator none for real CPU training)"
            if accelerator else "the real GPU" if gpu >= 0 else "the real CPU (hours for the stock solvers)")
    print(f"{target}: the {dataset} matrix on {what}.", file=sys.stderr)
    rc = run.main(args + extra)
    out = next((extra[i + 1] for i, a in enumerate(extra) if a == "--out"), str(runner.ROOT / "results"))
    iters = next((int(extra[i + 1]) for i, a in enumerate(extra) if a == "--iters"), iters)
    print_table(dataset, [r for r in recorded(out, dataset) if r.iterations_setting == iters])
    return rc


if __name__ == "__main__":
    sys.exit(main())
