"""The capacity figures: AU against N per setup (fig_capacity_DATASET.png), images/s per core
against a published loader's (fig_per_core_DATASET.png), and N spread over client hosts
(fig_hosts_DATASET.png)."""
import collections
import statistics
import textwrap
from pathlib import Path

from analysis.capacity_stats import cache_had, client_hosts, curve_of, curve_order, curves, per_core_rates
from analysis.capacity_tables import OUTSIDE_REFERENCES
from analysis.report import pyplot, save
from data_prep import backends, datasets
from experiments.data_path_cpu import THRESHOLD


def figure_per_core(records, dataset, out):
    """Bars: images/s per core of each backend (warm, cold), with the outside references as lines.
    A bar whose runs did not have the cache asked (cache_had: "partly warm") is hatched and says
    the state they had beside it, never plain warm."""
    rates = {k: v for k, v in per_core_rates(records).items() if k[0] == dataset}
    references = OUTSIDE_REFERENCES.get(dataset, ())
    if not rates or not references:
        return None
    plt = pyplot()
    keys = sorted(rates, key=lambda k: curve_order((k + ("",), None)), reverse=True)
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(keys) + 2.4))
    for i, key in enumerate(keys):
        for j, cache in enumerate(("warm", "cold")):
            if cache in rates[key]:
                had = cache_had(records, key + (cache,))
                ax.barh(i + 0.2 * (1 - 2 * j), rates[key][cache], height=0.38, color=backends.get(key[2]).color,
                        alpha=1.0 if cache == "warm" else 0.5, edgecolor="black", linewidth=0.4,
                        hatch=None if had == cache else "///")
                if had != cache:
                    ax.text(rates[key][cache] * 1.08, i + 0.2 * (1 - 2 * j), had, fontsize=6, va="center")
    for ref, style in zip(references, ("-", "--", ":")):
        ax.axvline(ref.per_vcpu, color="black", linestyle=style, linewidth=1,
                   label=f"{ref.name}: {ref.per_vcpu:,.0f} per vCPU")
    n_runs = collections.Counter(curve_of(r)[:3] for r in records)
    ax.set_yticks(range(len(keys)), [f"{k[2]} ({n_runs[k]} solver runs)\n" + textwrap.fill(' / '.join(k[1][1:]), 42)
                                     for k in keys], fontsize=7)
    ax.set_xscale("log")
    ticks = [t for t in (100, 1_000, 10_000, 100_000, 1_000_000)
             if t <= 2 * max(max(v.values()) for v in rates.values())]
    ax.set_xticks(ticks, [f"{t:,}" for t in ticks])
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
    ax.set_xlabel("train images per CPU second of the data path (log scale)")
    from matplotlib.patches import Patch
    caches = [Patch(facecolor="grey", edgecolor="black", label="warm"),
              Patch(facecolor="grey", alpha=0.5, edgecolor="black", label="cold (lighter)"),
              Patch(facecolor="white", edgecolor="black", hatch="///",
                    label="hatched: its runs did not have the cache asked (what they had beside the bar)")]
    ax.legend(handles=caches + ax.get_legend_handles_labels()[0], fontsize=7, loc="upper center",
              bbox_to_anchor=(0.4, -0.07), ncol=1, frameon=False)
    machines = sorted({k[1][0] for k in keys})
    ax.set_title(textwrap.fill(f"{datasets.get(dataset).label}: images/s per core, ours ({'; '.join(machines)}) "
                               f"and published; reference: {references[0].source}", 70), fontsize=8)
    path = Path(out) / f"fig_per_core_{dataset}.png"
    save(fig, path)
    return path


PANELS_PER_ROW = 3


def figure(records, dataset, out):
    """AU against N, one panel per setup, at most three panels a row; one colour per backend (its
    registry colour, as in every figure), warm solid, partly warm dash-dotted and cold dashed; the
    legend below the panels, each curve named by the cache its runs had (cache_had), never warm where
    they were partly warm."""
    found = {k: v for k, v in curves(records).items() if k[0] == dataset}
    if not found:
        return None
    setups = sorted({k[1] for k in found})
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter
    cols = min(PANELS_PER_ROW, len(setups))
    rows = -(-len(setups) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.8 * rows + 0.9), squeeze=False)
    shown = {}
    for ax, setup in zip(axes.flat, setups):
        for (ds, s, backend, cache), by_n in sorted(found.items(), key=curve_order):
            if s != setup:
                continue
            ns = sorted(by_n)
            had = cache_had(records, (ds, s, backend, cache))
            line, = ax.plot(ns, [100 * statistics.median(by_n[n]) for n in ns], marker="o", markersize=3,
                            color=backends.get(backend).color,
                            linestyle="--" if cache == "cold" else "-" if had == "warm" else "-.")
            shown.setdefault(f"{backends.get(backend).label}, {had}", line)
        ax.axhline(100 * THRESHOLD, color="grey", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("solvers at once (N)", fontsize=8)
        ax.set_ylabel("group AU, % (median)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_ylim(0, 105)
        n_runs = sorted({len(v) for k, by_n in found.items() if k[1] == setup for v in by_n.values()})
        title = textwrap.fill(' / '.join(setup[1:]), 48)  # the machine is in the figure's title
        ax.set_title(f"{title}\nn = {n_runs[0]}..{n_runs[-1]} runs per point", fontsize=7)
    for ax in list(axes.flat)[len(setups):]:
        ax.axis("off")
    ncol = min(4, 2 * cols)  # a one-panel figure is too narrow for four of the longer names ("warm (partly warm at N = 1)")
    fig.legend(shown.values(), shown.keys(), loc="lower center", ncol=ncol, fontsize=7, frameon=False)
    machines = sorted({s[0] for s in setups})
    title = textwrap.fill(f"{datasets.get(dataset).label}: how many accelerators one host feeds "
                          f"(grey line: AU 90%); {'; '.join(machines)}", 38 * cols + 20)  # the figure's width
    fig.suptitle(title, fontsize=9)
    legend_rows = -(-len(shown) // ncol)
    top = 1 - 0.15 * (title.count("\n") + 1) / (3.8 * rows + 0.9)  # room for the title's lines
    fig.tight_layout(rect=(0, 0.03 * legend_rows + 0.02, 1, top))
    path = Path(out) / f"fig_capacity_{dataset}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def figure_hosts(records, dataset, out):
    """Where some runs spread their solvers over client hosts (benchmarks/multihost.py): AU against
    N in one panel, a line per number of client hosts (and one for the runs on this host alone)."""
    mine = [r for r in records if r.dataset == dataset]
    if not any(client_hosts(r) for r in mine):
        return None
    lines = {}
    for r in mine:
        seeds = (r.location or {}).get("seeds") if not client_hosts(r) else None
        lines.setdefault((client_hosts(r) or 0, seeds or "", r.backend, r.cache), []).append(r)
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    shades = plt.get_cmap("viridis")
    most = max(key[0] for key in lines)
    for (h, seeds, backend, cache), rs in sorted(lines.items()):
        by_n = next(iter(curves(rs).values()), {})
        if not by_n:
            continue
        ns = sorted(by_n)
        n_runs = sorted({len(v) for v in by_n.values()})
        where = (f"{h} client host{'s' * (h > 1)}" if h else
                 f"this host alone, the cluster at {seeds}" if seeds else "this host alone, the project's cluster")
        ax.plot(ns, [100 * statistics.median(by_n[n]) for n in ns], marker="o", markersize=3,
                color=shades(0.85 * h / most) if h else "black" if not seeds else "grey", linestyle="-" if h else "--",
                label=f"{where}: {backends.get(backend).label}, {cache} (n = {n_runs[0]}..{n_runs[-1]})")
    ax.axhline(100 * THRESHOLD, color="grey", linewidth=0.8)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("solvers at once, all client hosts together (N)", fontsize=8)
    ax.set_ylabel("group AU, % (median)", fontsize=8)
    ax.set_ylim(0, 105)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=7, loc="lower left", frameon=False)
    machine = sorted({r.machine_label() for r in mine})
    ax.set_title(textwrap.fill(f"{datasets.get(dataset).label}: solvers spread over client hosts (network "
                               f"namespaces sharing one machine's cores: {'; '.join(machine)}); grey: AU 90%",
                               80), fontsize=8)
    path = Path(out) / f"fig_hosts_{dataset}.png"
    save(fig, path)
    return path
