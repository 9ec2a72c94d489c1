#!/usr/bin/env python3
"""The README's answer, from the committed records: per dataset and backend, the training time on
the emulated 2016 machine (the paper's where its text states one), the accelerator utilisation
of an emulated H100, and how many emulated H100s one host keeps at AU >= 0.90; and one figure.

  python analysis/answer.py            # print the table
  python analysis/answer.py --readme   # also write it into README.md and draw docs/img/answer.png
  python analysis/answer.py --folder results/answer/HOST   # the table of one host's measured answer
                                                           # (benchmarks/answer_run.py made it)

Which records (each folder's NOTES.md says on which machine and when):
  PAPER2016    --profile paper2016 matrices, n = 3 per cell (wall seconds, as the paper timed)
  H100         the calibrated emulated H100's matrices, n = 3 per cell (AU)
  CAPACITY     the capacity sweeps on the emulated H100 (ImageNet: 1 GiB of memory and 800 MiB
               more per solver, so that the data stays ~5x larger than the page cache's share)
"""
import argparse
import json
import math
import statistics
import sys
from collections import namedtuple
from pathlib import Path

import catalogue
from analysis import capacity, readme
from analysis.report import pyplot, save
from data_prep import backends, datasets
from experiments.record import COLD_AT_MOST, MISSED, WARM_AT_LEAST, load

ROOT = Path(__file__).resolve().parents[1]

PAPER2016 = catalogue.relative("ci-2core-paper2016-calibrated")
H100 = catalogue.relative("ci-2core-emulated-h100-calibrated")
CAPACITY = catalogue.relative("ci-2core-capacity")
# where each column's records are: the README's from three committed folders (three hosts); one
# host's measured answer (benchmarks/answer_run.py) from the three sub-folders of its one folder
Sources = namedtuple("Sources", "paper2016 h100 capacity")


def committed():
    """The README's Sources: the three committed folders (read when called, so a test may point
    one of them elsewhere)."""
    return Sources(PAPER2016, H100, CAPACITY)


SUBFOLDERS = Sources("paper2016", "h100", "capacity")
PLAN_FILE = "plan.json"  # an answer folder's cells asked: {"cells": [[dataset, backend, column, cache], ...]}
# the capacity setup the answer quotes, per dataset: the emulated H100, and for ImageNet the
# sweep that keeps each solver's share of the page cache
CAPACITY_SETUP = {"mnist": "no limits", "cifar10": "no limits", "imagenet": "1 GiB + 0.78125 GiB per further solver"}
FIGURE = "docs/img/answer.png"
README_BEGIN = "<!-- answer: written by analysis/answer.py --readme -->"
README_END = "<!-- end of answer -->"
CACHES = ("warm", "cold")
# a capacity answer: the largest N, whether N + 1 was run, the notes (n, partly warm), and the
# one-solver runs of its curve (to hold against the AU column where the two disagree)
Feeds = namedtuple("Feeds", "n bracketed notes single stopped", defaults=(None,))


def answer_sources(folder):
    """The Sources of one host's answer folder (benchmarks/answer_run.py writes them)."""
    return Sources(*(str(Path(folder) / sub) for sub in SUBFOLDERS))


def paper2016_seconds(sources=None):
    """{(dataset, backend, cache): (mean wall seconds, n)} under the paper2016 profile's disk, as the
    fidelity table takes them (analysis/fidelity.py paper_cells)."""
    sources = sources or committed()
    from analysis.fidelity import paper_cells
    return {k: (v[0], v[1]) for k, v in paper_cells(sources.paper2016).items()}


def paper_seconds():
    from experiments.calibration import REFERENCE
    return {(r["dataset"], r["backend"], r["cache"]): r["mean"] for r in REFERENCE["training_seconds"]}


def columns(sources=None):
    """The answer's columns: (row key, header label, the folder (host) it comes from)."""
    sources = sources or committed()
    return (("seconds", "s", sources.paper2016), ("au", "AU", sources.h100), ("feeds", "feeds", sources.capacity))


def capacity_answers(sources=None, stopped=False):
    """{(dataset, backend, cache): Feeds} for the quoted setups: the largest N at AU >= 0.90, with
    its n where fewer runs than confirm one stood at N or N + 1 (capacity.few_runs); stopped: also
    what ran out at the N that failed (capacity.stopped_words: reads the runs' files)."""
    sources = sources or committed()
    found = {}
    folder = ROOT / sources.capacity
    records = [r for r in load([folder]) if not r.superseded] if folder.exists() else []
    lost_at = capacity.lost(records)
    for key, by_n in capacity.curves(records).items():
        dataset, setup, backend, cache = key
        if "emulated h100" in setup and CAPACITY_SETUP.get(dataset) == setup[2]:
            n = capacity.largest_n(by_n, lost_at.get(key, ()))[0]
            mine = [r for r in records if capacity.curve_of(r) == key]
            found[(dataset, backend, cache)] = Feeds(n, capacity.bracketed(by_n, lost_at.get(key, ())),
                                                     capacity.few_runs(by_n.get(n), by_n.get(n + 1))
                                                     + capacity.missed_state(mine, n),
                                                     [r for r in mine if r.ok and capacity.solvers(r) == 1],
                                                     capacity.stopped_words(mine, key, by_n, lost_at.get(key, ()),
                                                                            folder) if stopped else None)
    return found


def iterations(dataset, folder=PAPER2016):
    """The iterations the emulated 2016 machine's runs of a dataset trained where not the stock
    solver's (ImageNet: a few passes over its stand-in), else None."""
    found = {r.iterations_setting for r in load([ROOT / folder]) if r.dataset == dataset and r.ok}
    return found.pop() if len(found) == 1 and None not in found else None


def rows(sources=None, asked=None, stopped=False):
    """One row per dataset and backend that any of the three sources has (asked: also every
    (dataset, backend) in it, in its order, whatever the sources hold)."""
    sources = sources or committed()
    from analysis.fidelity import cell_means
    au = {k: v[:2] for k, v in cell_means(sources.h100, "au").items()}
    seconds, feeds, paper = (paper2016_seconds(sources),
                             capacity_answers(sources, stopped), paper_seconds())
    au_runs = _runs_by_cell(sources.h100)
    out = []
    for dataset in datasets.REGISTRY:
        for backend in backends.REGISTRY:
            keys = [(dataset, backend, c) for c in CACHES]
            missed = [(dataset, backend, MISSED[c]) for c in CACHES]
            if not any(k in seconds or k in au or k in feeds for k in keys + missed) and \
                    (dataset, backend) not in (asked or ()):
                continue
            out.append({"dataset": dataset, "backend": backend,
                        "seconds": [_as_had(seconds, k) for k in keys], "paper": [paper.get(k) for k in keys],
                        "au": [_as_had(au, k) for k in keys], "feeds": [feeds.get(k) for k in keys],
                        "au_runs": [au_runs.get(k, []) + au_runs.get((dataset, backend, MISSED[k[2]]), [])
                                    for k in keys]})
    return out


def _runs_by_cell(folder):
    """{(dataset, backend, cache as the run had it): ok single runs} of a folder."""
    found = {}
    for r in load([ROOT / folder]) if (ROOT / folder).exists() else []:
        if r.ok and not r.concurrent and not r.read_options:
            found.setdefault((r.dataset, r.backend, r.cache_state), []).append(r)
    return found


def hosts():
    """{folder: (letter, words)}: each column's host, named by its results folder, its CPU model
    and its CPU probe (monitor/cpu_probe.py; 'not measured' where its runs predate the probe)."""
    from analysis.fidelity import host_probe, probe_words
    found = {}
    for _, _, folder in columns():
        if folder not in found:
            rs = [r for r in load([ROOT / folder]) if r.ok] if (ROOT / folder).exists() else []
            cpus = sorted({f"{(r.environment or {}).get('cpu_cores')}-core {(r.environment or {}).get('cpu_model')}"
                           for r in rs}) or ["no runs"]
            found[folder] = (chr(ord("A") + len(found)),
                             f"`{folder}` ({', '.join(cpus)}; CPU probe {probe_words(host_probe(folder))})")
    return found


def _hosts_cell(r, letters):
    """'A / B / C': the host of each column of a row ('-' where the column is empty; one letter
    where every column came from one host)."""
    used = [letters[folder] if any(r[column]) else "-" for column, _, folder in columns()]
    named = set(used) - {"-"}
    return named.pop() if len(named) == 1 else " / ".join(used)


def _disagreement(r, letters):
    """Where a row's AU (one solver, on the H100 matrix's host) and its feeds (the capacity sweep's
    host) disagree, one fed at AU >= 0.90 and the other not: the one-solver AU on both hosts per
    cache that disagrees, and what else differs between those runs; '' where they agree."""
    said, differ = [], []
    for j, cache in enumerate(CACHES):
        au, feeds = r["au"][j], r["feeds"][j]
        if not au or not feeds or (au[0] >= capacity.THRESHOLD) == (feeds.n >= 1):
            continue
        single = [x.au for x in feeds.single if x.au is not None]
        there = f"{capacity.au_percent(statistics.median(single))} (n = {len(single)})" if single else "not run"
        said.append(f"{cache} {capacity.au_percent(au[0])} / {there}")
        differ += [d for d in _differences(r["au_runs"][j], feeds.single) if d not in differ]
    if not said:
        return ""
    return (f"one solver on {letters[H100]} / {letters[CAPACITY]}: {', '.join(said)}"
            + (f"; also differ: {', '.join(differ)}" if differ else ""))


def _differences(ours, theirs):
    """What differs between two sets of runs of one cell besides the host: iterations, Caffe build."""
    def differ(get):
        a, b = ({str(get(x)) for x in rs} for rs in (ours, theirs))
        return (sorted(a), sorted(b)) if a and b and a != b else None
    iterations = differ(lambda x: x.iterations_setting or "stock")
    build = differ(lambda x: (x.environment or {}).get("caffe_build_key"))
    return ([f"iterations {'/'.join(iterations[0])} vs {'/'.join(iterations[1])}"] if iterations else []) + \
        (["Caffe build"] if build else [])


def _as_had(cells, key):
    """The cell of the runs whose cache was as `key` asks; else, labelled, of the runs that asked
    for it and missed (record.cache_state: a partly warm run is shown as such, never as warm)."""
    dataset, backend, cache = key
    if key in cells:
        return cells[key] + (None,)
    missed = cells.get((dataset, backend, MISSED[cache]))
    return missed + (MISSED[cache],) if missed else None


def _seconds(cell, paper):
    if not cell:
        return "-"
    text = f"{cell[0]:,.0f}" if cell[0] >= 100 else f"{cell[0]:.1f}"
    return text + _missed(cell) + (f" ({paper:g})" if paper else "")


def _au(cell):
    return f"{capacity.au_percent(cell[0])}{_missed(cell)}" if cell else "-"


def _missed(cell):
    return f" ({cell[-1]})" if cell[-1] else ""


def _feeds(cell):
    if not cell:
        return "-"
    return (str(cell.n) if cell.bracketed else f">= {cell.n}") + cell.notes


def table(found):
    n_sec = sorted({c[1] for r in found for c in r["seconds"] if c})
    n_au = sorted({c[1] for r in found for c in r["au"] if c})
    named = hosts()
    letters = {folder: letter for folder, (letter, _) in named.items()}
    lines = ["| dataset | backend | 2016 machine, emulated: s warm / cold (paper) | emulated H100: AU warm / cold "
             "| H100s one host feeds at AU >= 90%: warm / cold | hosts: " +
             " / ".join(label for _, label, _ in columns()) + " |", "|---|---|---|---|---|---|"]
    last, notes = None, []
    for r in found:
        name = datasets.get(r["dataset"]).label if r["dataset"] != last else ""
        last = r["dataset"]
        why = _disagreement(r, letters)  # under the table, so that the hosts column stays narrow
        if why:
            notes.append(f"({len(notes) + 1}) {datasets.get(r['dataset']).label}, {backends.get(r['backend']).label}: "
                         f"{why}")
        lines.append(f"| {name} | {backends.get(r['backend']).label} | "
                     f"{_seconds(r['seconds'][0], r['paper'][0])} / {_seconds(r['seconds'][1], r['paper'][1])} | "
                     f"{_au(r['au'][0])} / {_au(r['au'][1])} | {_feeds(r['feeds'][0])} / {_feeds(r['feeds'][1])} | "
                     f"{_hosts_cell(r, letters)}{f' ({len(notes)})' if why else ''} |")
    if notes:
        lines += ["", "Where a row's AU and feeds columns disagree: " + "; ".join(notes) + "."]
    lines += ["", "Hosts: " + "; ".join(f"{letter} = {words}" for letter, words in named.values()) + ".", "",
              "Every accelerator emulated, on VMs of this project's CI kind (24 GiB, no GPU); each column from its "
              "own folder, recorded on its own day, and machines of this kind differ up to 2x in per-core speed "
              "(docs/capacity.md), so a row's columns may disagree: where AU >= 90% stands beside no H100 fed, or "
              "below it beside some fed, the row's numbered note gives the one-solver AU on each host (AU column's / "
              "feeds column's) and what else differs between those runs.", "",
              f"n = {'/'.join(map(str, n_sec))} runs per time, "
              f"{'/'.join(map(str, n_au))} per AU (`{PAPER2016}`, `{H100}`); feeds: the largest N at which every "
              f"solver finished and the median group AU >= 0.90, with N + 1 run and failed, \">=\" where N + 1 was not reached (`{CAPACITY}`; "
              "ImageNet with 1 GiB of memory + 800 MiB per further solver).", "",
              "Stock solvers, except ImageNet: "
              f"{iterations('imagenet') or 'stock'} iterations, a few passes over a 12,800-image stand-in in "
              f"{_imagenet_memory()}. The "
              "paper's own seconds in parentheses where its text states them (Titan X, 2016)."
              + _missed_note(found)]
    return "\n".join(lines) + "\n"


def _imagenet_memory():
    """The memory limit the 2016 machine's ImageNet runs had, and their data over the page cache's room."""
    rs = [r for r in load([ROOT / PAPER2016]) if r.ok and r.dataset == "imagenet"]
    limits = {(r.limits or {}).get("mem_bytes") for r in rs}
    over = [r.data_over_cache_room() for r in rs if r.data_over_cache_room()]
    if len(limits) != 1 or None in limits or not over:
        return "the memory limits its records name"
    return (f"{limits.pop() / 2**30:g} GiB of memory (not the 2016 profile's 16 GiB: the paper's condition, the data "
            f"{min(over):.1f}-{max(over):.1f}x what that leaves to the page cache)")


def _missed_note(found):
    """What "(partly warm)" in a cell means, where one is."""
    if not any(c and c[-1] for r in found for c in r["seconds"] + r["au"]) and \
            not any(c and c[-1] and "partly warm" in c[-1] for r in found for c in r["feeds"]):
        return ""
    return (f" \"(partly warm)\": asked warm, but less than the {WARM_AT_LEAST:.0%} of the data a warm run needs was in "
            "the page cache before the clock (ImageNet at the paper's condition: its data is larger than the memory "
            f"left to cache it; cold needs at most {COLD_AT_MOST:.0%}); in feeds: some run at N or N + 1 was.")


FIGURE_TITLE = "The paper's 2016 machine, emulated on a 2-core VM (n = 3 per bar)"


def figure(found, out, folder=PAPER2016, title=FIGURE_TITLE, column="seconds"):
    """Per dataset, the emulated 2016 machine's seconds per backend, warm and cold (log scale), with
    the paper's stated seconds marked: the paper's machine, so its numbers belong on it; folder:
    the 2016 machine's records (their iterations), title: the figure's; column "au": the emulated
    H100's AU instead (a linear scale, the 90% goal drawn), where no 2016 cell was measured."""
    au = column == "au"
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter
    present = [d for d in datasets.REGISTRY if any(r["dataset"] == d for r in found)]
    fig, axes = plt.subplots(1, len(present), figsize=(max(5.0, 3.4 * len(present)), 3.6), squeeze=False)
    for ax, dataset in zip(axes[0], present):
        mine = [r for r in found if r["dataset"] == dataset and any(r[column])]
        for i, r in enumerate(mine):
            colour = backends.get(r["backend"]).color
            for j, cache in enumerate(CACHES):
                cell = r[column][j]
                if cell:
                    ax.bar(i + (j - 0.5) * 0.4, cell[0] * (100 if au else 1), 0.4, color=colour,
                           alpha=1.0 if cache == "warm" else 0.5,
                           edgecolor="black", linewidth=0.4, hatch="xx" if cell[-1] else None)
                if r["paper"][j] and not au:
                    ax.plot(i + (j - 0.5) * 0.4, r["paper"][j], marker="_", markersize=14, color="black", mew=2)
        if au:
            ax.axhline(capacity.THRESHOLD * 100, color="black", linestyle=":", linewidth=1)
            ax.set_ylim(0, 105)
        else:
            ax.set_yscale("log")
            plain = FuncFormatter(lambda v, _: f"{v:g}" if f"{v:g}"[0] in "125" else "")
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(plain)
        ax.tick_params(axis="y", which="both", labelsize=7)
        ax.set_xticks(range(len(mine)))
        ax.set_xticklabels([backends.get(r["backend"]).name for r in mine], rotation=45, ha="right", fontsize=8)
        iters = iterations(dataset, folder)
        ax.set_title(datasets.get(dataset).label + (f", {iters:,} iterations" if iters else ""), fontsize=9)
    axes[0][0].set_ylabel("AU, emulated H100 (%)" if au else "training seconds (log)")
    from matplotlib.patches import Patch
    from matplotlib.lines import Line2D
    fig.legend(handles=[Patch(facecolor="#999999", edgecolor="black", label="warm"),
                        Patch(facecolor="#999999", alpha=0.5, edgecolor="black", label="cold"),
                        Patch(facecolor="#999999", hatch="xx", edgecolor="black", label="partly warm"),
                        Line2D([], [], color="black", marker="_", linestyle="", markersize=12, mew=2,
                               label="paper (Titan X, 2016)")][:3 if au else 4],
               loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


# One host's measured answer (benchmarks/answer_run.py): every column from one folder, each cell
# marked measured, predicted or left for the full run.
MEASURED, PREDICTED, LEFT = "measured", "predicted", "left"
COLUMNS = ("seconds", "au", "feeds")


def asked_cells(folder):
    """{(dataset, backend, column, cache)} the answer run of `folder` asked (its plan file); empty
    where it has none."""
    plan = Path(folder) / PLAN_FILE
    return {tuple(c) for c in json.loads(plan.read_text())["cells"]} if plan.is_file() else set()


def predicted_feeds(runs):
    """(N, what would stop it) one host feeds, predicted from one solver's runs' own CPU per image
    (experiments/data_path_cpu.py cpu_allows), or None where those runs cannot tell (no runs, a
    backend read on the solver thread)."""
    from experiments.data_path_cpu import cpu_allows
    allows = cpu_allows(runs) if runs else None
    if not allows:
        return None
    n, share = allows
    return (math.floor(n), "the data path's CPU, all cores" if share >= 1 else
            f"one solver's data threads ({share:.2f} of what AU 0.90 needs)")


def marked(found, asked):
    """Each row's cells with their marks: {(dataset, backend, column, cache): (mark, text)}; a cell
    not asked and not recorded is ("-", "-")."""
    out = {}
    for r in found:
        for column in COLUMNS:
            for j, cache in enumerate(CACHES):
                key = (r["dataset"], r["backend"], column, cache)
                cell = r[column][j]
                if cell:
                    text = {"seconds": lambda: _seconds(cell, r["paper"][j]), "au": lambda: _au(cell),
                            "feeds": lambda: _feeds(cell)}[column]()
                    out[key] = (MEASURED, text)
                    continue
                guess = predicted_feeds(r["au_runs"][j]) if column == "feeds" else None
                out[key] = ((PREDICTED, f"{guess[0]} (predicted)") if guess else
                            (LEFT, LEFT) if key in asked else ("-", "-"))
    return out


def stopped_cell(r, j, marks):
    """What stopped the host's feeding of a row's cache j: the sweep's finding, or the prediction's."""
    mark = marks[(r["dataset"], r["backend"], "feeds", CACHES[j])][0]
    if mark == MEASURED:
        words = r["feeds"][j].stopped
        return "not reached" if words in (None, "-") else words
    if mark == PREDICTED:
        return predicted_feeds(r["au_runs"][j])[1] + " (predicted)"
    return mark


def host_line(folder):
    """The host an answer folder's runs ran on: CPU model, cores, CPU probe, dates, Caffe build."""
    from experiments.prediction import probe
    rs = [r for r in load([Path(folder) / sub for sub in SUBFOLDERS if (Path(folder) / sub).exists()])
          if r.ok and not r.superseded]
    env = [r.environment or {} for r in rs]

    def said(name):
        return ", ".join(sorted({str(e.get(name)) for e in env if e.get(name) is not None})) or "unknown"
    days = sorted({r.finished[:10] for r in rs if r.finished})
    pixels = probe(rs)
    return (f"Host: {said('cpu_model')}, {said('cpu_cores')} cores, CPU probe "
            f"{f'{pixels:.0f} images/s' if pixels else 'not measured'} (monitor/cpu_probe.py), "
            f"{' to '.join(dict.fromkeys([days[0], days[-1]])) if days else 'no runs yet'}, "
            f"Caffe build {said('caffe_build_key')}.")


def host_rows(folder):
    """The rows of one answer folder: every (dataset, backend) its plan asked, and any it recorded."""
    asked = asked_cells(folder)
    return rows(answer_sources(folder), asked=[(d, b) for d, b, _, _ in sorted(asked)], stopped=True), asked


def host_table(folder):
    """The table of one host's answer, from its folder alone: (markdown text, {cell: mark})."""
    found, asked = host_rows(folder)
    marks = marked(found, asked)
    n_of = {column: sorted({c[1] for r in found for c in r[column] if c}) for column in ("seconds", "au")}
    lines = [host_line(folder), "",
             "| dataset | backend | 2016 machine, emulated: s warm / cold (paper) | emulated H100: AU warm / cold "
             "| H100s one host feeds at AU >= 90%: warm / cold | what stopped it: warm / cold |",
             "|---|---|---|---|---|---|"]
    last = None
    for r in found:
        name = datasets.get(r["dataset"]).label if r["dataset"] != last else ""
        last = r["dataset"]
        cells = [" / ".join(marks[(r["dataset"], r["backend"], column, cache)][1] for cache in CACHES)
                 for column in COLUMNS]
        lines.append(f"| {name} | {backends.get(r['backend']).label} | " + " | ".join(cells) + " | "
                     + " / ".join(stopped_cell(r, j, marks) for j in range(len(CACHES))) + " |")
    counts = {m: sum(1 for v, _ in marks.values() if v == m) for m in (MEASURED, PREDICTED, LEFT)}
    lines += ["", f"Cells: {counts[MEASURED]} measured, {counts[PREDICTED]} predicted, {counts[LEFT]} left (not run "
              "here: `imgstore answer` without --quick or --no-2016 runs them). n = "
              f"{'/'.join(map(str, n_of['seconds'])) or '-'} runs per time, {'/'.join(map(str, n_of['au'])) or '-'} "
              "per AU. Feeds: the largest N at which every solver finished and the median group AU >= 0.90 "
              "(benchmarks/capacity.py's sweep; \">=\" where N + 1 was not reached); \"(predicted)\": from one "
              "solver's runs, the N the data path's CPU allows (experiments/data_path_cpu.py cpu_allows), no sweep "
              "run. The paper's own seconds in parentheses where its text states them (Titan X, 2016)."
              + _missed_note(found)]
    return "\n".join(lines) + "\n", {"|".join(k): v[0] for k, v in marks.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--readme", action="store_true", help="write the table into README.md and draw " + FIGURE)
    p.add_argument("--folder", type=Path, help="one host's answer folder (benchmarks/answer_run.py): its table")
    a = p.parse_args(argv)
    if a.folder:
        if a.readme or not a.folder.is_dir():
            p.error(f"--folder: {a.folder}: no such folder" if not a.folder.is_dir() else "--folder or --readme")
        print(host_table(a.folder)[0])
        return 0
    found = rows()
    text = table(found)
    print(text)
    if a.readme:
        readme.replace_block(README_BEGIN, README_END, text)
        figure(found, ROOT / FIGURE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
