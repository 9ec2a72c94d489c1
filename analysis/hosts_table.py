"""The cross-host table: every host's `make host-check` (benchmarks/host_check.py), predicted
against measured, cell by cell, from the host-check.json each check writes into its folder of
the catalogue's host-check (one folder per check: <CPU model>-<shape>-probe<images/s>).

A host is a CPU model and a shape (its cores, or a cpuset or CPU quota that simulates another
shape: shape_word); checks of one host whose pixel probes lie within one host's noise
(cpu_probe.SAME_HOST_SPREAD) count as one host, so a check run again is not a new host. The goal
(fidelity.GOAL): measured within 15% of predicted on every data-path-bound cell, a cell being
data-path-bound where its reference run was or where the prediction says its data path comes
out from under the compute on this host.

Two predictions per cell where a check has both: the cross-host one (the reference host's runs
scaled by the two hosts' CPU probes, experiments/prediction.py), which every check has and the
goal above judges, and, beside it, the one from the host's own data-path probe
(experiments/data_path_model.py; checks made since host-check ran that probe, "-" in older ones).

  python -m analysis.hosts_table            # the block, printed
  python -m analysis.hosts_table --write    # and written into docs/emulation.md between its markers
"""
import argparse
import json
import statistics
from pathlib import Path

import catalogue
from analysis import readme
from analysis.fidelity import GOAL, gpu_step_folders
from monitor import cpu_probe

BEGIN = "<!-- host checks: written by analysis/hosts_table.py --write -->"
END = "<!-- end of host checks -->"
PAGE = readme.ROOT / "docs" / "emulation.md"


def shape_word(cores, shape=None):
    """2c (a whole host of 2 cores), 1c-cpuset, 0.5c-quota: the cores a limit leaves, and which limit."""
    shape = shape or {}
    if "cpus" in shape:
        return f"{shape['cpus']}c-cpuset"
    if "cpu_quota" in shape:
        return f"{shape['cpu_quota']:g}c-quota"
    return f"{cores}c"


def shape_label(cores, shape=None):
    """The shape in words: '2 cores', 'a cpuset of 1 of its 2 cores', 'a CPU quota of 0.5 cores on its 2'."""
    shape = shape or {}
    if "cpus" in shape:
        return f"a cpuset of {shape['cpus']} of its {cores} cores"
    if "cpu_quota" in shape:
        return f"a CPU quota of {shape['cpu_quota']:g} cores on its {cores}"
    return f"{cores} cores"


def limited_cores(cores, shape=None):
    """The cores a host under `shape` has: the cpuset's, the quota's (cores' worth of CPU time), or its own."""
    shape = shape or {}
    return shape.get("cpus") or shape.get("cpu_quota") or cores


def load_checks(root=None, untracked=False):
    """Every check's host-check.json under `root`, with its folder's name, oldest name first; by
    default the catalogue's host-check, then the GPU steps' folders that hold one (a lent GPU
    machine checked as another host: device/gpu_host.py): the committed checks only (what git
    tracks), so that the docs' table and its claims never read a user's own check, unless
    `untracked` (imgstore hosts-table without --write shows this host's checks beside them)."""
    if root:
        paths = sorted(Path(root).glob("*/host-check.json"))
    elif untracked:
        paths = sorted(catalogue.folder("host-check").glob("*/host-check.json")) + gpu_host_checks()
    else:
        paths = [p for p in catalogue.tracked(catalogue.folder("host-check"), "host-check.json")
                 if p.parent.parent == catalogue.folder("host-check")] + [
                 p for p in gpu_host_checks() if p in catalogue.tracked(p.parent, "host-check.json")]
    return [dict(json.loads(path.read_text()), folder=path.parent.name) for path in paths]


def gpu_host_checks():
    """The host-check.json of the GPU steps' folders that hold one (analysis/fidelity.py's list)."""
    return [p for f in gpu_step_folders() if (p := catalogue.ROOT / f / "host-check.json").is_file()]


def host_of(check):
    """(CPU model, shape word): what must be the same for two checks to be one host."""
    cores = check.get("host_cores", check.get("cores"))
    return check.get("cpu_model") or "unknown CPU", shape_word(cores, check.get("shape"))


def pixels(check):
    return (check.get("medians") or {}).get(cpu_probe.PIXELS)


def group_hosts(checks):
    """[[checks of one host]], in the order of each host's first check: one CPU model and shape,
    pixel probes within SAME_HOST_SPREAD of that host's first check."""
    hosts = []
    for check in checks:
        same = next((h for h in hosts if host_of(h[0]) == host_of(check)
                     and (cpu_probe.spread([pixels(h[0]), pixels(check)]) or 0) <= cpu_probe.SAME_HOST_SPREAD), None)
        if same is None:
            hosts.append([check])
        else:
            same.append(check)
    return hosts


def has_probe_prediction(row):
    """Whether a host-check.json row was written with the data-path probe's prediction (its
    cross-host one then under cross_host_*)."""
    return "cross_host_predicted_s" in row


def cross_host(row, key):
    """A row's field of the cross-host prediction (predicted_s, bound, predicted_cpu_allows), in
    a check of either format."""
    return row.get(f"cross_host_{key}") if has_probe_prediction(row) else row.get(key)


def probe_predicted(row, key):
    """A row's field of the data-path probe's prediction, None in a check made before it."""
    return row.get(key) if has_probe_prediction(row) else None


def data_path_bound(row):
    """Whether a cell is judged by the goal: its reference run waited on the data path, or the
    prediction has the data path come out from under the compute here (a compute-bound cell's
    prediction is its reference's seconds exactly until it does)."""
    predicted, reference = cross_host(row, "predicted_s"), row.get("reference_s")
    return cross_host(row, "bound") == "data path" or bool(
        predicted and reference and predicted > reference * (1 + 1e-9))


def within(ratio):
    return ratio is not None and abs(ratio - 1) <= GOAL


def host_label(letter, check):
    cores = check.get("host_cores", check.get("cores"))
    probe = pixels(check)
    return (f"{letter}: {check.get('cpu_model') or 'unknown CPU'}, {shape_label(cores, check.get('shape'))}, "
            f"probe {probe:.0f}" if probe else f"{letter}: {check.get('cpu_model')}, probe unknown")


def rows(checks):
    """One row per check and measured cell: host letter, label, cell, bound here, predicted and
    measured seconds, n, their ratio, within the goal."""
    found = []
    for i, host in enumerate(group_hosts(checks)):
        letter = chr(ord("A") + i)
        for check in host:
            for r in check.get("rows", []):
                predicted, probed = cross_host(r, "predicted_s"), probe_predicted(r, "predicted_s")
                if r.get("measured_s") is None or predicted is None:
                    continue
                ratio = r["measured_s"] / predicted
                probe_ratio = r["measured_s"] / probed if probed else None
                found.append({"host": letter, "label": host_label(letter, check), "folder": check["folder"],
                              "cell": r["cell"], "data_path": data_path_bound(r), "predicted_s": predicted,
                              "measured_s": r["measured_s"], "n": r.get("measured_n"), "ratio": ratio,
                              "within": within(ratio), "probe_predicted_s": probed, "probe_ratio": probe_ratio,
                              "probe_within": within(probe_ratio) if probed else None})
    return found


def capacity_rows(checks):
    """One row per check with a capacity cell: the N the data path's CPU allows, predicted and measured."""
    found = []
    for i, host in enumerate(group_hosts(checks)):
        for check in host:
            for r in check.get("rows", []):
                predicted, measured = cross_host(r, "predicted_cpu_allows"), r.get("measured_cpu_allows")
                probed = probe_predicted(r, "predicted_cpu_allows")
                if predicted is not None and measured is not None:
                    ratio = measured / predicted if predicted else None
                    probe_ratio = measured / probed if probed else None
                    found.append({"label": host_label(chr(ord("A") + i), check), "cell": r["cell"],
                                  "predicted": predicted, "measured": measured, "ratio": ratio,
                                  "within": within(ratio), "probe_predicted": probed, "probe_ratio": probe_ratio,
                                  "probe_within": within(probe_ratio) if probed else None})
    return found


def yes_no(ok):
    return "yes" if ok else "**no**"


def holds_words(found):
    """Where the model holds (every data-path-bound cell of a host within the goal) and where it
    misses (the cells outside, with their ratios), per host."""
    words = []
    for letter in sorted({r["host"] for r in found}):
        judged = [r for r in found if r["host"] == letter and r["data_path"]]
        missed = [r for r in judged if not r["within"]]
        if not judged:
            continue
        words.append(f"host {letter}: holds on all {len(judged)}" if not missed else
                     f"host {letter}: misses " + ", ".join(f"{r['cell']} ({r['ratio']:.2f})" for r in missed))
    return "; ".join(words)


def summary(checks, found, capacity):
    hosts = group_hosts(checks)
    judged = [r for r in found if r["data_path"]]
    compute = [r for r in found if not r["data_path"]]
    text = (f"{len(hosts)} host{'s' if len(hosts) != 1 else ''} "
            f"({len(checks)} check{'s' if len(checks) != 1 else ''}): "
            f"data-path-bound cells within {GOAL:.0%}: {sum(r['within'] for r in judged)} of {len(judged)}"
            + (f" ({holds_words(found)})" if judged else "")
            + f"; compute-bound cells (not judged): {sum(r['within'] for r in compute)} of {len(compute)} within")
    if capacity:
        text += f"; the N the data path's CPU allows: {sum(r['within'] for r in capacity)} of {len(capacity)} within"
    probed = [r for r in judged if r["probe_predicted_s"] is not None]
    if any(r["probe_predicted_s"] is not None for r in found):
        text += (f". From the host's own data-path probe: data-path-bound cells within {GOAL:.0%}: "
                 f"{sum(r['probe_within'] for r in probed)} of {len(probed)}")
        allowed = [r for r in capacity if r["probe_predicted"] is not None]
        if allowed:
            text += f"; the N allowed: {sum(r['probe_within'] for r in allowed)} of {len(allowed)} within"
    return text + "."


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def block(checks):
    """The markdown between the markers: the cells table, the capacity table, then the checks made
    with a data-path probe again, each cell predicted from that probe, and the summary."""
    found, capacity = rows(checks), capacity_rows(checks)
    gpu_hosts = [f for f in gpu_step_folders() if Path(f).name in {c["folder"] for c in checks}]
    lines = [f"**Predicted against measured on every host checked** (`{catalogue.relative('host-check')}/`, "
             "`make host-check`" + "".join(f"; `{f}`" for f in gpu_hosts)
             + (": a lent GPU machine's cores, device/gpu_host.py" if gpu_hosts else "")
             + "). Each cell is predicted from its reference host's committed runs scaled by the "
             "two hosts' CPU probes (`experiments/prediction.py`) and measured on the host, n runs interleaved. "
             "A host is a CPU model and shape (a cpuset or a CPU quota simulates another), checks whose pixel "
             f"probes lie within {cpu_probe.SAME_HOST_SPREAD:.0%} counted as one; probe: images/s per core. "
             f"Solver seconds; goal: within {GOAL:.0%} on every data-path-bound cell.", "",
             "| host | cell | predicted s | measured s (n) | measured / predicted | within 15% |",
             "|---|---|---|---|---|---|"]
    lines += [cell_line(r, r["predicted_s"], r["ratio"], r["within"]) for r in found]
    if capacity:
        lines += ["", "| host | cell: N the data path's CPU allows | predicted | measured | measured / predicted |",
                  "|---|---|---|---|---|"]
        lines += [capacity_line(r, r["predicted"], r["ratio"]) for r in capacity]
    probed = [r for r in found if r["probe_predicted_s"] is not None]
    if probed:
        lines += ["", "The checks made with a data-path probe, each cell predicted from the host's own data path "
                  "instead (`experiments/data_path_model.py`):", "",
                  "| host | cell | predicted s | measured s (n) | measured / predicted | within 15% |",
                  "|---|---|---|---|---|---|"]
        lines += [cell_line(r, r["probe_predicted_s"], r["probe_ratio"], r["probe_within"]) for r in probed]
        probed_capacity = [r for r in capacity if r["probe_predicted"] is not None]
        if probed_capacity:
            lines += ["", "| host | cell: N the data path's CPU allows | predicted | measured | measured / predicted |",
                      "|---|---|---|---|---|"]
            lines += [capacity_line(r, r["probe_predicted"], r["probe_ratio"]) for r in probed_capacity]
    return "\n".join(lines + ["", summary(checks, found, capacity)]) + "\n"


def cell_line(r, predicted, ratio, within):
    return (f"| {r['label']} | {r['cell']}{'' if r['data_path'] else ' (compute-bound)'} | {fmt(predicted, '.2f')} | "
            f"{r['measured_s']:.2f} ({r['n']}) | {fmt(ratio, '.3f')} | "
            f"{yes_no(within) if r['data_path'] else 'not judged'} |")


def capacity_line(r, predicted, ratio):
    return f"| {r['label']} | {r['cell']} | {fmt(predicted, '.1f')} | {r['measured']:.1f} | {fmt(ratio, '.3f')} |"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--write", action="store_true", help=f"write the block into {PAGE.relative_to(readme.ROOT)}")
    a = p.parse_args(argv)
    checks = load_checks(untracked=not a.write)  # the docs' block: the committed checks alone
    if not checks:
        raise SystemExit(f"no host-check.json under {catalogue.folder('host-check')}: run make host-check first")
    text = block(checks)
    print(text, end="")
    if a.write:
        readme.replace_block(BEGIN, END, text, PAGE)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
