#!/usr/bin/env python3
"""The paper's figures and tables from our run records, with the paper's numbers beside ours.

  python analysis/report.py results --out results/report
  python analysis/report.py --timeseries results/mnist/runs/RUN_ID   # one run's monitor, over time

Reads every RESULTS/*/records.jsonl (and the monitor CSVs they point to) and writes:
  fig_time_DATASET.png      Figures 4 / 7 / 11: mean training time per backend, warm and cold,
                            sd error bars, the paper's value marked where the text gives one
  fig_resources_DATASET.png Figures 5 / 8 / 12: CPU user/system/iowait, memory and page cache,
                            block reads, GPU utilisation per backend and cache state
  report.md, report.html    Table 2 (footprints), the comparison of every finding (paper ratio,
                            ours, whether the direction holds), the machines; the HTML embeds
                            the figures
"""
import argparse
import base64
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REFERENCE = json.loads((Path(__file__).parent / "paper_reference.json").read_text())
BACKENDS = ["lmdb", "leveldb", "hdf5", "images", "pymem", "cppmem"]
COLORS = {"lmdb": "#1b9e77", "leveldb": "#66a61e", "hdf5": "#7570b3", "images": "#d95f02",
          "pymem": "#e7298a", "cppmem": "#e6ab02"}
CACHES = ["warm", "cold"]


def pyplot():
    import matplotlib
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    return plt


def save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt
    plt.close(fig)
    return path


def default_results(root):
    """The folder a notebook reads: this machine's results/ once it has records, else the
    committed runs of the H100 machine (results/h100/), so a fresh checkout has figures."""
    local = Path(root) / "results"
    if any(local.glob("*/records.jsonl")):
        return local
    return local / "h100"


def load_records(paths):
    records = []
    for p in map(Path, paths):
        files = [p] if p.is_file() else sorted(p.glob("*/records.jsonl"))
        for f in files:
            for line in f.read_text().splitlines():
                if line.strip():
                    r = json.loads(line)
                    r["_results"] = str(f.parent.parent)
                    records.append(r)
    return records


def cell_stats(records):
    """(dataset, backend, cache) -> dict(mean, sd, n) of wall seconds over ok runs."""
    cells = {}
    for r in records:
        if r["status"] == "ok":
            cells.setdefault((r["dataset"], r["backend"], r["cache"]), []).append(r["wall_seconds"])
    return {k: {"mean": statistics.mean(v), "sd": statistics.stdev(v) if len(v) > 1 else 0.0, "n": len(v)}
            for k, v in cells.items()}


def is_stock(records, dataset):
    """Every run of `dataset` used the stock solver's iterations, so seconds compare with the paper's."""
    return all(r.get("iterations_setting") is None for r in records if r["dataset"] == dataset)


def paper_value(dataset, backend, cache):
    for row in REFERENCE["training_seconds"]:
        if (row["dataset"], row["backend"], row["cache"]) == (dataset, backend, cache):
            return row["mean"]
    return None


def fig_time(dataset, stats, out, stock=True):
    """stock: the runs used the stock solver, so the paper's seconds are comparable and shown."""
    plt = pyplot()
    present = [b for b in BACKENDS if any((dataset, b, c) in stats for c in CACHES)]
    fig, ax = plt.subplots(figsize=(7.5, 4))
    width = 0.38
    for i, b in enumerate(present):
        for j, c in enumerate(CACHES):
            s = stats.get((dataset, b, c))
            x = i + (j - 0.5) * width
            if s:
                ax.bar(x, s["mean"], width, yerr=s["sd"], capsize=3, color=COLORS[b],
                       alpha=1.0 if c == "warm" else 0.55, hatch=None if c == "warm" else "//",
                       edgecolor="black", linewidth=0.5)
                ax.annotate(f"{s['mean']:.1f}", (x, s["mean"] + s["sd"]), ha="center", va="bottom", fontsize=7)
            pv = paper_value(dataset, b, c)
            if pv is not None and stock:
                ax.plot(x, pv, "kx", markersize=8)
    ax.set_xticks(range(len(present)), present)
    ax.set_ylabel("training time (s)")
    ax.set_title(f"{dataset}: mean training time, warm (solid) and cold (hatched)"
                 + ("; x = paper's value" if stock else "\n(shortened runs: the paper's seconds are not shown)"),
                 fontsize=10)
    return save(fig, out / f"fig_time_{dataset}.png")


def monitor_means(records, dataset):
    """(backend, cache) -> mean of each monitor summary field over ok runs."""
    cells = {}
    for r in records:
        if r["dataset"] == dataset and r["status"] == "ok":
            cells.setdefault((r["backend"], r["cache"]), []).append(r["monitor"])
    out = {}
    for k, mons in cells.items():
        keys = {key for m in mons for key in m}
        out[k] = {key: statistics.mean(m[key] for m in mons if key in m) for key in keys}
    return out


def fig_resources(dataset, records, out):
    plt = pyplot()
    means = monitor_means(records, dataset)
    keys = [(b, c) for b in BACKENDS for c in CACHES if (b, c) in means]
    labels = [f"{b}\n{c}" for b, c in keys]
    fig, axes = plt.subplots(2, 2, figsize=(11, 6.5))
    x = range(len(keys))
    bottom = [0.0] * len(keys)
    for field, color in [("cpu_user_mean", "#4477aa"), ("cpu_system_mean", "#ee6677"), ("cpu_iowait_mean", "#ccbb44")]:
        vals = [means[k].get(field, 0.0) for k in keys]
        axes[0, 0].bar(x, vals, bottom=bottom, color=color, label=field.replace("cpu_", "").replace("_mean", ""))
        bottom = [a + b for a, b in zip(bottom, vals)]
    axes[0, 0].set_ylabel("CPU (% of all cores)")
    axes[0, 0].legend(fontsize=7)
    axes[0, 1].bar(x, [means[k].get("mem_used_bytes_mean", 0) / 2**30 for k in keys],
                   color=[COLORS[b] for b, _ in keys], label="used")
    axes[0, 1].plot(x, [means[k].get("mem_cached_bytes_mean", 0) / 2**30 for k in keys], "ko", label="page cache")
    axes[0, 1].set_ylabel("memory (GiB)")
    axes[0, 1].legend(fontsize=7)
    axes[1, 0].bar(x, [means[k].get("read_bytes_total", 0) / 2**20 for k in keys], color=[COLORS[b] for b, _ in keys])
    axes[1, 0].set_ylabel("block reads during training (MiB)")
    gpu = [means[k].get("gpu_util_mean") for k in keys]
    if any(g is not None for g in gpu):
        axes[1, 1].bar(x, [g or 0 for g in gpu], color=[COLORS[b] for b, _ in keys])
        axes[1, 1].set_ylabel("GPU utilisation (%)")
    else:
        axes[1, 1].text(0.5, 0.5, "no GPU in these runs", ha="center", va="center", transform=axes[1, 1].transAxes)
    for ax in axes.flat:
        ax.set_xticks(list(x), labels, fontsize=7)
    fig.suptitle(f"{dataset}: resource utilisation during training (means over runs)")
    return save(fig, out / f"fig_resources_{dataset}.png")


def fig_timeseries(run_dir, out):
    """One run's monitor samples over time: CPU, memory, block reads, GPU."""
    import csv
    plt = pyplot()
    with open(Path(run_dir) / "monitor.csv") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ValueError(f"{run_dir}/monitor.csv has no samples")
    t = [float(r["t"]) for r in rows]

    def col(name, scale=1.0):
        return [float(r[name]) / scale if r[name] not in ("", None) else float("nan") for r in rows]
    fig, axes = plt.subplots(4, 1, figsize=(8, 8), sharex=True)
    for name in ["cpu_user", "cpu_system", "cpu_iowait"]:
        axes[0].plot(t, col(name), label=name[4:])
    axes[0].set_ylabel("CPU (%)")
    axes[0].legend(fontsize=7)
    axes[1].plot(t, col("mem_used_bytes", 2**30), label="used")
    axes[1].plot(t, col("mem_cached_bytes", 2**30), label="page cache")
    axes[1].set_ylabel("memory (GiB)")
    axes[1].legend(fontsize=7)
    axes[2].plot(t, col("read_bytes", 2**20))
    axes[2].set_ylabel("reads (MiB/sample)")
    axes[3].plot(t, col("gpu_util"))
    axes[3].set_ylabel("GPU (%)")
    axes[3].set_xlabel("seconds since training started")
    fig.suptitle(f"monitor of run {Path(run_dir).name}")
    out.mkdir(parents=True, exist_ok=True)
    return save(fig, out / f"timeseries_{Path(run_dir).name}.png")


def comparison(stats):
    rows = []
    for f in REFERENCE["findings"]:
        num, den = stats.get((f["dataset"], *f["num"])), stats.get((f["dataset"], *f["den"]))
        ours = num["mean"] / den["mean"] if num and den else None
        if ours is None:
            holds = "no data"
        elif f["direction"] == ">":
            holds = "yes" if ours > 1.05 else "no"
        else:
            holds = "yes" if abs(ours - 1) < 0.15 else "no"
        rows.append({**f, "ours": ours, "holds": holds})
    return rows


def footprints(records):
    """Table 2 rows: the paper's size beside our train split's apparent and allocated bytes
    (the paper's 238 MB for 60,000 MNIST PNGs matches allocated size: 60,000 x 4 KiB blocks)."""
    seen = {}
    for r in records:
        seen[(r["dataset"], r["backend"])] = r.get("train_footprint") or r["artifact_footprint"]
    paper = {(row["dataset"], row["backend"]): row["size"] for row in REFERENCE["footprint"]["rows"]}
    rows = []
    for (d, b) in sorted(set(seen) | set(paper)):
        fp = seen.get((d, b))
        rows.append((d, b, paper.get((d, b), "-"),
                     f"{fp['apparent_bytes'] / 1e6:.1f} MB" if fp else "-",
                     f"{fp['allocated_bytes'] / 1e6:.1f} MB" if fp else "-", str(fp["files"]) if fp else "-"))
    return rows


def machines(records):
    seen = {}
    for r in records:
        e = r["environment"]
        key = (e.get("gpu_model"), e.get("cpu_model"), e.get("memory_bytes"), r["device"])
        seen.setdefault(key, {"records": 0, "sources": set(), "limits": set(), "fs": e.get("artifact_fs")})
        seen[key]["records"] += 1
        seen[key]["sources"].add(r["source"])
        seen[key]["limits"].add(json.dumps({k: v for k, v in r["limits"].items() if v}))
    return seen


def write_report(records, out):
    out.mkdir(parents=True, exist_ok=True)
    stats = cell_stats(records)
    datasets = [d for d in ["mnist", "cifar10", "imagenet"] if any(k[0] == d for k in stats)]
    figures = []
    for d in datasets:
        figures += [fig_time(d, stats, out, is_stock(records, d)), fig_resources(d, records, out)]
    md = ["# Image storage for training: our runs beside Lim, Young & Patton (2016)", ""]
    md += ["## Machines", ""]
    for (gpu, cpu, mem, dev), info in machines(records).items():
        md.append(f"- {info['records']} runs on **{gpu or 'no GPU'}** ({dev}), CPU {cpu}, "
                  f"{mem / 2**30:.0f} GiB, data on {info['fs']}; limits: {', '.join(sorted(info['limits']))}; "
                  f"data: {'; '.join(sorted(info['sources']))}")
    md += ["", f"The paper's machine (Table 1): {REFERENCE['machine']['gpu']}, {REFERENCE['machine']['cpu_cores']} cores, "
           f"{REFERENCE['machine']['memory']}, {REFERENCE['machine']['storage']}, CUDA {REFERENCE['machine']['cuda']}, "
           f"cuDNN {REFERENCE['machine']['cudnn']}.", ""]
    md += ["## Training time (s), mean +- sd (n)", "", "| dataset | backend | warm | cold | paper warm | paper cold |",
           "|---|---|---|---|---|---|"]
    for d in datasets:
        for b in BACKENDS:
            cells = [stats.get((d, b, c)) for c in CACHES]
            if not any(cells):
                continue
            fmt = [f"{s['mean']:.2f} +- {s['sd']:.2f} ({s['n']})" if s else "-" for s in cells]
            pv = [paper_value(d, b, c) for c in CACHES]
            md.append(f"| {d} | {b} | {fmt[0]} | {fmt[1]} | {pv[0] or '-'} | {pv[1] or '-'} |")
    md += ["", "## The paper's findings, ratio by ratio", "",
           "| dataset | finding | paper | ours | direction holds |", "|---|---|---|---|---|"]
    for row in comparison(stats):
        ours = f"{row['ours']:.2f}" if row["ours"] is not None else "-"
        md.append(f"| {row['dataset']} | {row['text']} ({row['num'][0]} {row['num'][1]} / {row['den'][0]} {row['den'][1]}) "
                  f"| {row['paper_ratio']} | {ours} | {row['holds']} |")
    md += ["", "## Table 2: storage footprint of the training split", "",
           "| dataset | backend | paper | ours, apparent | ours, allocated | our files |", "|---|---|---|---|---|---|"]
    md += [f"| {' | '.join(row)} |" for row in footprints(records)]
    md += ["", "## Figures", ""] + [f"![{p.stem}]({p.name})" for p in figures]
    (out / "report.md").write_text("\n".join(md) + "\n")
    html = "\n".join(md)
    for p in figures:
        data = base64.b64encode(p.read_bytes()).decode()
        html = html.replace(f"![{p.stem}]({p.name})", f'<img src="data:image/png;base64,{data}" alt="{p.stem}">')
    (out / "report.html").write_text("<!doctype html><meta charset='utf-8'><title>report</title><pre>\n"
                                     + html.replace("<pre>", "") + "\n</pre>\n")
    return out / "report.md", figures


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="*", help="results folders (holding DATASET/records.jsonl) or .jsonl files")
    p.add_argument("--out", default="results/report")
    p.add_argument("--timeseries", metavar="RUN_DIR", help="plot one run's monitor samples over time")
    a = p.parse_args(argv)
    if a.timeseries:
        try:
            print(f"wrote {fig_timeseries(a.timeseries, Path(a.out))}")
        except (OSError, ValueError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        return 0
    if not a.results:
        p.error("give results folders, or --timeseries RUN_DIR")
    records = load_records(a.results)
    if not any(r["status"] == "ok" for r in records):
        print(f"no successful run records under {', '.join(a.results)}: run `make mnist-quick` "
              "or experiments/run.py first", file=sys.stderr)
        return 1
    path, figures = write_report(records, Path(a.out))
    print(f"wrote {path} and {len(figures)} figures from {len(records)} records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
