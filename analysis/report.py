#!/usr/bin/env python3
"""The paper's figures and tables from our run records, with the paper's numbers beside ours.

  python analysis/report.py results --out results/report
  python analysis/report.py --timeseries results/mnist/runs/RUN_ID   # one run's monitor, over time

Reads every RESULTS/*/records.jsonl (experiments/record.py) and writes, for each dataset and
each machine setup (machine, compute: real GPU / real CPU / emulated accelerator, limits):
  fig_time_DATASET[_N].png       Figures 4 / 7 / 11: training time per backend, warm and cold,
                                 start-up apart from the solver, AU, the paper's seconds marked
  fig_resources_DATASET[_N].png  Figures 5 / 8 / 12: CPU (the training process's threads, and
                                 the machine's), reads (the process's own and the device's), GPU
  report.md, report.html         the times, every finding of the paper with our ratio and a
                                 verdict with its magnitude, Table 2 (footprints), the machines
"""
import argparse
import base64
import html
import json
import statistics
import sys
from pathlib import Path

import catalogue
from data_prep import backends, datasets
from experiments import proctrack, record
from experiments.cells import cell_stats
from experiments.record import COLD_AT_MOST, MISSED, WARM_AT_LEAST

REFERENCE = json.loads((Path(__file__).parent / "paper_reference.json").read_text())
CACHES = ["warm", "cold"]
load_records = record.load


def pyplot():
    import matplotlib
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    return plt


def save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    return path


def default_results(root):
    """The folder a notebook reads: this machine's results/ once it has records, else the
    committed runs of the H100 machine (the catalogue's h100), so a fresh checkout has figures."""
    local = Path(root) / "results"
    if any(local.glob("*/" + record.RECORD_FILES)):
        return local
    return local / catalogue.entry("h100").path


def setups(records):
    """The machine setups among the records, most records first: [(setup, its records)]."""
    groups = {}
    for r in records:
        groups.setdefault(r.setup(), []).append(r)
    return sorted(groups.items(), key=lambda kv: -len(kv[1]))


def is_stock(records, dataset):
    """Every run of `dataset` used the stock solver's iterations, so seconds compare with the paper's."""
    return all(r.iterations_setting is None for r in records if r.dataset == dataset)


def paper_value(dataset, backend, cache):
    for row in REFERENCE["training_seconds"]:
        if (row["dataset"], row["backend"], row["cache"]) == (dataset, backend, cache):
            return row["mean"]
    return None


def describe_setup(setup, records, dataset):
    machine, compute, limits = setup
    rs = [r for r in records if r.dataset == dataset]
    source = datasets.get(dataset).source_label(rs[0].source if rs else None)
    compute = rs[0].compute_label() if rs else compute
    return f"{source}; {compute}; {limits}\n{machine}"


def tick_label(text, width=11):
    """A backend's label broken into short lines, so that neighbouring tick labels never meet."""
    import textwrap
    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False)) or text


def on_paper_machine(records, dataset):
    """Whether these runs emulate the paper's own machine (its Titan X): only then do the paper's
    seconds belong on their figure."""
    accelerators = {(r.compute or {}).get("accelerator") for r in records if r.dataset == dataset}
    return accelerators == {"titanx2016"}


def present_backends(stats, dataset):
    return [b for b in backends.REGISTRY if any((dataset, b, c) in stats for c in CACHES)]


def fig_time(dataset, records, out, setup=None, suffix=""):
    """Wall time per backend: start-up (grey) under the rest, warm solid, cold hatched."""
    plt = pyplot()
    stats = cell_stats(records)
    present = present_backends(stats, dataset)
    stock = is_stock(records, dataset)
    paper_machine = on_paper_machine(records, dataset)
    fig, ax = plt.subplots(figsize=(8.5, 4.6))
    width, tops, marks = 0.38, [], []
    for i, b in enumerate(present):
        backend = backends.get(b)
        for j, c in enumerate(CACHES):
            x = i + (j - 0.5) * width
            s = stats.get((dataset, b, c))
            if s:
                startup = min(s["startup"] or 0.0, s["mean"])
                ax.bar(x, startup, width, color="#bbbbbb", edgecolor="black", linewidth=0.5)
                ax.bar(x, s["mean"] - startup, width, bottom=startup, color=backend.color,
                       alpha=1.0 if c == "warm" else 0.6, hatch=None if c == "warm" else "//",
                       edgecolor="black", linewidth=0.5)
                if s["sd"] is not None:
                    ax.errorbar(x, s["mean"], yerr=s["sd"], color="black", capsize=3, linewidth=0.8)
                top = s["mean"] + (s["sd"] or 0)
                au = f"\nAU {s['au']:.0%}" if s["au"] is not None else ""
                ax.annotate(f"{s['mean']:.1f}{au}", (x, top), ha="center", va="bottom", fontsize=7)
                tops.append(top)
            pv = paper_value(dataset, b, c)
            if pv is not None and stock and paper_machine:
                marks.append((x, pv))
    ymax = max(tops + [1.0]) * (1.7 if any(pv > max(tops + [1.0]) * 1.35 for _, pv in marks) else 1.35)
    for x, pv in marks:
        if pv <= ymax:
            ax.plot(x, pv, "kx", markersize=8)
        else:  # off the scale: an arrow at the top instead of flattening our bars
            ax.annotate(f"paper\n{pv:.0f} s", (x, ymax * 0.97), ha="center", va="top", fontsize=7,
                        arrowprops=dict(arrowstyle="->"), xytext=(x, ymax * 0.86))
    ax.set_ylim(0, ymax)
    ax.set_xticks(range(len(present)), [tick_label(backends.get(b).label) for b in present], fontsize=8)
    ax.set_ylabel("training time, wall (s)")
    n = sorted({s["n"] for k, s in stats.items() if k[0] == dataset})
    n_text = f"n = {n[0]}" if len(n) == 1 else f"n = {n[0]}..{n[-1]}"
    sd_text = " (one run per bar: no spread shown)" if n == [1] else ", bars: +- sd"
    ax.set_title(f"{datasets.get(dataset).label}: training time, warm (solid) / cold (hatched), grey: start-up (before the\n"
                 "test pass at iteration 0, which reads the data and is coloured); "
                 f"{n_text}{sd_text}" + ("; x = paper (Titan X, 2016)" if marks else
                                          "; not the paper's machine: its seconds not shown" if stock else
                                          "; shortened runs, the paper's seconds not shown")
                 + ("\n" + describe_setup(setup, records, dataset) if setup else ""), fontsize=8)
    return save(fig, out / f"fig_time_{dataset}{suffix}.png")


def _means(records, dataset, key):
    """(backend, cache) -> mean of key(record) over ok runs where it is known."""
    cells = {}
    for r in records:
        if r.ok and r.dataset == dataset:
            v = key(r)
            if v is not None:
                cells.setdefault((r.backend, r.cache_state), []).append(v)
    return {k: statistics.mean(v) for k, v in cells.items()}


def _grouped_bars(ax, present, series, ylabel):
    """series: [(label, {(backend, cache): value}, colour)]: one group per backend, warm/cold side by side."""
    width = 0.8 / (2 * len(series))
    for s_i, (label, values, colour) in enumerate(series):
        for c_i, cache in enumerate(CACHES):
            xs = [i - 0.4 + width * (2 * s_i + c_i + 0.5) for i in range(len(present))]
            ax.bar(xs, [values.get((b, cache), 0) for b in present], width, color=colour,
                   alpha=1.0 if cache == "warm" else 0.6, hatch=None if cache == "warm" else "//",
                   edgecolor="black", linewidth=0.4, label=f"{label}, {cache}")
    ax.set_xticks(range(len(present)), [tick_label(backends.get(b).label, 10) for b in present], fontsize=7)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.legend(fontsize=6)


def data_reads(r):
    """MiB the training process read for its data: the initial test pass and training (all it
    read, for records from before the split)."""
    p = r.process or {}
    if "read_bytes_training" in p:
        return (p["read_bytes_initial_test"] + p["read_bytes_training"]) / 2**20
    return p["read_bytes"] / 2**20 if p.get("read_bytes") is not None else None


def startup_reads(r):
    p = r.process or {}
    return p["read_bytes_before_test"] / 2**20 if "read_bytes_before_test" in p else None


def fig_resources(dataset, records, out, setup=None, suffix=""):
    plt = pyplot()
    present = present_backends(cell_stats(records), dataset)
    fig, axes = plt.subplots(2, 2, figsize=(11, 6.8))

    def per_second(r, seconds):
        return seconds / r.wall_seconds if seconds is not None and r.wall_seconds else None

    def thread(role):
        return lambda r: per_second(r, ((r.process or {}).get("thread_cpu_seconds") or {}).get(role))
    reading = _means(records, dataset, lambda r: per_second(
        r, proctrack.readers_cpu((r.process or {}).get("thread_cpu_seconds") or {})))
    threads = [("data prefetch", _means(records, dataset, thread(proctrack.PREFETCH)), "#4477aa")]
    threads += [("its readers (LMDB read-ahead, Redis I/O)", reading, "#66ccee")] if any(reading.values()) else []
    threads += [("solver", _means(records, dataset, thread(proctrack.SOLVER)), "#ee6677")]
    if any(v for _, v, _ in threads):
        _grouped_bars(axes[0, 0], present, threads, "cores busy (thread CPU-s per wall s)")
        axes[0, 0].set_title("the training process's threads (1.0 = one core all the time)", fontsize=8)
    else:
        cores = next((r.environment or {}).get("cpu_cores") for r in records)
        _grouped_bars(axes[0, 0], present, [
            ("user", _means(records, dataset, lambda r: r.monitor.get("cpu_user_mean")), "#4477aa"),
            ("iowait", _means(records, dataset, lambda r: r.monitor.get("cpu_iowait_mean")), "#ccbb44")],
            f"% of all {cores} cores (machine-wide)")
        axes[0, 0].set_title("machine-wide CPU (these records predate per-thread CPU)", fontsize=8)
    _grouped_bars(axes[0, 1], present, [
        ("iowait", _means(records, dataset, lambda r: r.monitor.get("cpu_iowait_mean")), "#ccbb44")],
        "iowait, % of all cores")
    _grouped_bars(axes[1, 0], present, [
        ("the process, its data (test at 0 + training)", _means(records, dataset, data_reads), "#228833"),
        ("the process, start-up (libraries, nets)", _means(records, dataset, startup_reads), "#bbbbbb"),
        ("the whole device", _means(records, dataset, lambda r: r.monitor.get("read_bytes_total", 0) / 2**20), "#999999")],
        "read from the block device (MiB)")
    gpu = _means(records, dataset, lambda r: r.monitor.get("gpu_util_mean"))
    au = _means(records, dataset, lambda r: 100 * r.au if r.au is not None else None)
    if gpu:
        _grouped_bars(axes[1, 1], present, [("GPU utilisation", gpu, "#66ccee")], "GPU utilisation (%)")
    elif au:
        _grouped_bars(axes[1, 1], present, [("AU", au, "#66ccee")], "accelerator utilisation (%)")
        axes[1, 1].axhline(90, color="black", linestyle=":", linewidth=0.8)
    else:
        axes[1, 1].text(0.5, 0.5, "no GPU and no emulated accelerator in these runs", ha="center", va="center",
                        transform=axes[1, 1].transAxes)
    title = f"{datasets.get(dataset).label}: resources during training (means over runs)"
    fig.suptitle(title + ("\n" + describe_setup(setup, records, dataset) if setup else ""), fontsize=9)
    return save(fig, out / f"fig_resources_{dataset}{suffix}.png")


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
    axes[0].set_ylabel("CPU (% of all cores)")
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


def verdict(finding, ours):
    """Whether a finding of the paper holds here, and how strongly."""
    if ours is None:
        return "no data"
    paper = finding["paper_ratio"]
    if finding["direction"] == "~":
        return "holds" if abs(ours - 1) < 0.15 else f"does not hold: {ours:.2f}x, not ~1"
    if ours <= 0.95:
        return f"reversed ({ours:.2f}x)"
    if ours < 1.05:
        return "no effect here"
    if ours >= paper / 1.5:
        return "holds" if ours <= paper * 1.5 else f"holds, {ours / paper:.1f}x stronger"
    return f"holds, {paper / ours:.1f}x weaker"


def comparison(stats):
    rows = []
    for f in REFERENCE["findings"]:
        num, den = stats.get((f["dataset"], *f["num"])), stats.get((f["dataset"], *f["den"]))
        ours = num["mean"] / den["mean"] if num and den else None
        rows.append({**f, "ours": ours, "holds": verdict(f, ours)})
    return rows


def cache_room_line(records):
    """How many times each backend's training data exceeds what the memory limit left to cache
    it (MLPerf Storage asks >= 5x); None when none does (no limit, data that fits, older records)."""
    ratios = {}
    for r in records:
        over = r.data_over_cache_room() or 0
        if over >= 1:
            ratios.setdefault((r.dataset, r.backend), []).append(over)
    if not ratios:
        return None
    return ("training data / page cache the memory limit leaves (median of runs): " +
            ", ".join(f"{d} {b} {statistics.median(v):.1f}x" for (d, b), v in sorted(ratios.items())))


def mib(nbytes):
    return f"{nbytes / 2**20:.1f} MiB"


def footprints(records):
    """Table 2 rows: the paper's size beside our train split's apparent and allocated bytes
    (the paper's 238 MB for 60,000 MNIST PNGs matches allocated size: 60,000 x 4 KiB blocks)."""
    seen = {(r.dataset, r.backend): r.train_footprint or r.artifact_footprint for r in records}
    paper = {(row["dataset"], row["backend"]): row["size"] for row in REFERENCE["footprint"]["rows"]}
    rows, present = [], {d for d, _ in seen}
    for (d, b) in sorted(k for k in set(seen) | set(paper) if k[0] in present):
        fp = seen.get((d, b))
        rows.append([d, b, paper.get((d, b), "-"), mib(fp["apparent_bytes"]) if fp else "-",
                     mib(fp["allocated_bytes"]) if fp else "-", str(fp["files"]) if fp else "-"])
    return rows


# --- the report as blocks, written as Markdown and as HTML ---------------------------

class Doc:
    def __init__(self):
        self.blocks = []

    def heading(self, text, level=2):
        self.blocks.append(("h", level, text))

    def para(self, text):
        self.blocks.append(("p", text))

    def items(self, lines):
        self.blocks.append(("ul", lines))

    def table(self, header, rows):
        self.blocks.append(("table", header, rows))

    def figure(self, path):
        self.blocks.append(("img", path))

    def markdown(self):
        out = []
        for b in self.blocks:
            if b[0] == "h":
                out += ["#" * b[1] + " " + b[2], ""]
            elif b[0] == "p":
                out += [b[1], ""]
            elif b[0] == "ul":
                out += [f"- {line}" for line in b[1]] + [""]
            elif b[0] == "table":
                out += ["| " + " | ".join(b[1]) + " |", "|" + "---|" * len(b[1])]
                out += ["| " + " | ".join(map(str, row)) + " |" for row in b[2]] + [""]
            else:
                out += [f"![{b[1].stem}]({b[1].name})", ""]
        return "\n".join(out)

    def html(self, title):
        e = html.escape
        out = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(title)}</title><style>"
               "body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse}"
               "td,th{border:1px solid #ccc;padding:3px 8px;font-size:90%}th{background:#eee}img{max-width:100%}"
               "</style></head><body>"]
        for b in self.blocks:
            if b[0] == "h":
                out.append(f"<h{b[1]}>{e(b[2])}</h{b[1]}>")
            elif b[0] == "p":
                out.append(f"<p>{e(b[1])}</p>")
            elif b[0] == "ul":
                out.append("<ul>" + "".join(f"<li>{e(line)}</li>" for line in b[1]) + "</ul>")
            elif b[0] == "table":
                out.append("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in b[1]) + "</tr>" +
                           "".join("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in row) + "</tr>" for row in b[2])
                           + "</table>")
            else:
                data = base64.b64encode(b[1].read_bytes()).decode()
                out.append(f'<p><img src="data:image/png;base64,{data}" alt="{e(b[1].stem)}"></p>')
        return "\n".join(out + ["</body></html>"])


def _cache_cell(stats, dataset, backend, cache):
    """A table cell of the runs that had `cache`, else of those that asked for it and missed,
    labelled so ("partly warm: ..."): never shown as plain warm or cold."""
    if (dataset, backend, cache) in stats or (dataset, backend, MISSED[cache]) not in stats:
        return _fmt_cell(stats.get((dataset, backend, cache)))
    return f"{MISSED[cache]}: {_fmt_cell(stats[(dataset, backend, MISSED[cache])])}"


def not_as_labelled_line(records):
    """Which cells ran asked warm (cold) but held less (more) of their data than that needs, and
    how much they held: labelled in the tables, left out of the figures and findings."""
    missed = {}
    for r in records:
        if r.ok and r.cache_state != r.cache:
            missed.setdefault((r.dataset, r.backend, r.cache_state), []).append(r.cache_resident_fraction)
    if not missed:
        return None
    return (f"not as labelled (warm needs >= {WARM_AT_LEAST:.0%} of the data resident before the clock, cold <= "
            f"{COLD_AT_MOST:.0%}): " + ", ".join(f"{d} {b} {state} ({min(v):.0%}-{max(v):.0%} resident, n = {len(v)})"
                                                 for (d, b, state), v in sorted(missed.items()))
            + "; labelled in the table, left out of the figures and the findings")


def _fmt_cell(s):
    if not s:
        return "-"
    sd = f" +- {s['sd']:.2f}" if s["sd"] is not None else ""
    au = f", AU {s['au']:.0%}" if s["au"] is not None else ""
    return f"{s['mean']:.2f}{sd} (n={s['n']}{au})"


def write_report(records, out):
    out.mkdir(parents=True, exist_ok=True)
    doc, figures = Doc(), []
    doc.heading("Image storage for training: our runs beside Lim, Young & Patton (2016)", 1)
    m = REFERENCE["machine"]
    doc.para(f"The paper's machine (Table 1): {m['gpu']}, {m['cpu_cores']} cores, {m['memory']}, {m['storage']}, "
             f"CUDA {m['cuda']}, cuDNN {m['cudnn']}. Times are wall seconds of the training process; start-up "
             "(process start to the test pass at iteration 0: libraries, nets, opening the data) is part of them "
             "and shown grey in the figures; that test pass reads the data and is the backend's time. AU: the "
             "accelerator's compute time over the solver's time (MLPerf Storage), over every iteration and test "
             "pass in that window; emulated runs know it exactly, real GPU runs against the fitted ceiling.")
    for index, (setup, rs) in enumerate(setups(records)):
        machine, compute, limits = setup
        doc.heading(f"Setup {index + 1}: {compute}; {limits}")
        sources = sorted({r.source for r in rs if r.source})
        room = cache_room_line(rs)
        missed = not_as_labelled_line(rs)
        doc.items([f"machine: {machine}", f"compute: {compute}", f"limits: {limits}",
                   f"{len(rs)} runs ({sum(1 for r in rs if r.status == 'failed')} failed, "
                   f"{sum(1 for r in rs if r.status == 'superseded')} superseded: kept, not counted)",
                   "data: " + "; ".join(sources)]
                  + ([room] if room else []) + ([missed] if missed else []))
        stats = cell_stats(rs)
        present = [d for d in datasets.REGISTRY if any(k[0] == d for k in stats)]
        rows = []
        for d in present:
            for b in present_backends(stats, d):
                pv = [paper_value(d, b, c) for c in CACHES]
                rows.append([d, b] + [_cache_cell(stats, d, b, c) for c in CACHES] + [v or "-" for v in pv])
        doc.table(["dataset", "backend", "warm (s)", "cold (s)", "paper warm", "paper cold"], rows)
        doc.heading("The paper's findings, ratio by ratio (this setup)", 3)
        doc.table(["dataset", "finding", "paper", "ours", "verdict"],
                  [[f["dataset"], f"{f['text']} ({f['num'][0]} {f['num'][1]} / {f['den'][0]} {f['den'][1]})",
                    f["paper_ratio"], f"{f['ours']:.2f}" if f["ours"] is not None else "-", f["holds"]]
                   for f in comparison(stats) if f["dataset"] in present])
        suffix = f"_{index + 1}" if index else ""
        for d in present:
            for fig in (fig_time(d, rs, out, setup, suffix), fig_resources(d, rs, out, setup, suffix)):
                figures.append(fig)
                doc.figure(fig)
    doc.heading("Table 2: storage footprint of the training split")
    doc.table(["dataset", "backend", "paper", "ours, apparent", "ours, allocated", "our files"], footprints(records))
    (out / "report.md").write_text(doc.markdown())
    (out / "report.html").write_text(doc.html("Image storage for training: report"))
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
    if not any(r.ok for r in records):
        print(f"no successful run records under {', '.join(a.results)}: run `make mnist-quick` "
              "or experiments/run.py first", file=sys.stderr)
        return 1
    path, figures = write_report(records, Path(a.out))
    print(f"wrote {path} and {len(figures)} figures from {len(records)} records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
