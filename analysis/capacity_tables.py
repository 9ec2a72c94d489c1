"""The capacity tables: the full table of every curve (capacity.md), the compact tables per
dataset and setup (README, docs/capacity.md) and the data path's images/s per core against a
published loader's per vCPU."""
import dataclasses

from analysis.capacity_logs import failure_causes
from analysis.capacity_stats import (bracketed, curve_of, curve_order, curves, failed_solvers, largest_n, lost,
                                     per_core_rates)
from analysis.capacity_stoppers import stopped_at
from analysis.capacity_words import (au_cell, au_median_text, cpu_allows_text, few_runs, missed_state,
                                     probe_note, verdict)
from data_prep import backends, datasets
from experiments.data_path_cpu import images_per_core_second, solvers


@dataclasses.dataclass(frozen=True)
class OutsideReference:
    """A published data-loading rate per vCPU to set ours against (another loader, another host)."""
    name: str
    images_per_second: float  # all cores together, as published
    vcpus: int
    backends: tuple  # ours that do the nearest work: set against this one
    what: str
    source: str

    @property
    def per_vcpu(self):
        return self.images_per_second / self.vcpus


# FFCV's ImageNet data-loading benchmark (docs/benchmarks.rst, "Data loading benchmark results"):
# AWS p3dn.24xlarge (96 vCPUs), each image loaded, random-resized-cropped to 224 px and flipped.
FFCV_SOURCE = "https://docs.ffcv.io/benchmarks.html (AWS p3dn.24xlarge, 96 vCPUs)"


OUTSIDE_REFERENCES = {
    "imagenet": (
        OutsideReference("FFCV, raw 256 px from RAM", 172_801, 96, ("lmdb", "leveldb", "redis"),
                         "raw pixels, as Caffe's Datum records hold them", FFCV_SOURCE),
        OutsideReference("FFCV, JPEG 90% 512 px from RAM", 31_278, 96, ("images",),
                         "decoded images; ours decode 256 px PNGs, another codec and size", FFCV_SOURCE),
    ),
}


def table(records):
    """Every curve in one table (capacity.md), and under it the figures behind each "stopped by"."""
    rows = ["| dataset | setup | backend | cache | largest N at AU >= 0.90 | its group AU (median, n) | "
            "N + 1 (median, n) | Ns measured | images/s per core | N the data path's CPU allows | failures | stopped by |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    behind = ["", "What stopped each curve, and the figures behind it (at the N that failed, and at the N that held):", "",
              "| dataset | setup | backend | cache | stopped by | the figures behind it |", "|---|---|---|---|---|---|"]
    lost_at = lost(records)
    for key, by_n in sorted(curves(records).items(), key=curve_order):
        dataset, setup, backend, cache = key
        n, at, above = largest_n(by_n, lost_at.get(key, ()))
        mine = [r for r in records if curve_of(r) == key]
        rate = images_per_core_second(mine)
        stopped = stopped_words_and_figures(mine, key, by_n, lost_at.get(key, ()))
        if stopped[1]:
            behind.append(f"| {dataset} | {' / '.join(setup)} | {backend} | {cache} | {stopped[0]} | {stopped[1]} |")
        rows.append(f"| {dataset} | {' / '.join(setup)} | {backend} | {cache}{missed_state(mine, n)} | "
                    f"{n}{'' if bracketed(by_n, lost_at.get(key, ())) else ' (not bracketed)'} | {au_cell(at)} | "
                    f"{au_cell(above)} | "
                    f"{', '.join(map(str, sorted(by_n)))} | {f'{rate:,.0f}' if rate else '-'} | {cpu_allows_text(mine)} |"
                    + (f" {failed_solvers(mine)} solvers failed" if failed_solvers(mine) else " -")
                    + f"{probe_note(mine)} | {stopped[0]} |")
    return "\n".join(rows + (behind if len(behind) > 5 else [])) + "\n"


def stopped_words_and_figures(records, curve, by_n, lost_at, results=None):
    """("stopped by" in words, the figures behind it) for a curve; ("-", None) when no N failed."""
    found = stopped_at(records, curve, by_n, lost_at, results)
    if found is None:
        return "-", None
    failed, stopper = found
    return f"{verdict(stopper)} at {failed}", stopper.figures


def compact(records, results=None):
    """Per dataset and setup, one row per backend: the largest N warm and cold with the median
    group AU at N and at N + 1 (runs), and images/s per core (README)."""
    found, lost_at = curves(records), lost(records)
    out = []
    for dataset, setup in sorted({(k[0], k[1]) for k in found}):
        n_runs = sorted({len(v) for k, by_n in found.items() if k[:2] == (dataset, setup) for v in by_n.values()})
        out += [f"{datasets.get(dataset).label} on {' / '.join(setup)}; n = {n_runs[0]}..{n_runs[-1]} runs per N:", "",
                "| backend | warm: largest N | AU at N / N + 1 | cold: largest N | AU at N / N + 1 |",
                "|---|---|---|---|---|"]
        why = ["", "| backend | images/s per core (warm, cold) | N the data path's CPU allows (warm, cold) "
                   "| stopped by (warm; cold) |", "|---|---|---|---|"]  # a second table: each fits the page
        behind = ["", "| backend | cache | stopped by | the figures behind it (at the N that failed, at the N that held) |",
                  "|---|---|---|---|"]
        for backend in backends.REGISTRY:
            cells, rates, allows, stops = [], [], [], []
            for cache in ("warm", "cold"):
                by_n = found.get((dataset, setup, backend, cache))
                mine = [r for r in records if curve_of(r) == (dataset, setup, backend, cache)]
                rate = images_per_core_second(mine)
                rates.append(f"{rate:,.0f}" if rate else "-")
                allows.append(cpu_allows_text(mine))
                if not by_n:
                    cells += ["-", "-"]
                    continue
                lost_here = lost_at.get((dataset, setup, backend, cache), set())
                stop, figures = stopped_words_and_figures(mine, (dataset, setup, backend, cache), by_n, lost_here,
                                                          results)
                stops.append(stop)
                if figures:
                    behind.append(f"| {backend} | {cache} | {stop} | {figures} |")
                n, at, above = largest_n(by_n, lost_here)
                cells += [(f"**{n}**" if bracketed(by_n, lost_here) else
                           f">= {n} (the largest N run)" if n == max(by_n) else f">= {n} ({n + 1} not run)")
                          + _lost_words(n + 1, lost_here, [r for r in mine if solvers(r) == n + 1], results)
                          + probe_note(mine) + missed_state(mine, n),
                          f"{au_median_text(at)} / {au_median_text(above)}" + few_runs(at, above)]
            if any(c != "-" for c in cells):
                out.append(f"| {backend} | {' | '.join(cells)} |")
                why.append(f"| {backend} | {', '.join(rates)} | {', '.join(allows)} | {'; '.join(stops) or '-'} |")
        out += why + (behind if len(behind) > 3 else []) + [""]
        if (dataset, setup) == max(k[:2] for k in found if k[0] == dataset):  # under its last table
            out += _cannot_hold(dataset, {k[2] for k in found if k[0] == dataset})
    return "\n".join(out)


def _lost_words(n, lost_here, records, results):
    """Why N did not hold when a run lost solvers there: how many, and the causes."""
    if n not in lost_here:
        return ""
    why = "; ".join(failure_causes(records, results)) if results else f"{failed_solvers(records)} failed"
    return f" (at {n}: {why})"


def _cannot_hold(dataset, swept):
    """A line per reason that a backend with no sweep of the dataset cannot hold it at all
    (the registry's own reason), so that the tables read as complete without it."""
    ds = datasets.get(dataset)
    reasons = {}
    for name, backend in backends.REGISTRY.items():
        why = None if name in swept else backend.unsupported(ds)
        if why:
            reasons.setdefault(why, []).append(name)
    return [f"Not in the {ds.label} tables: {', '.join(names)}: {why}." for why, names in reasons.items()] + \
        ([""] if reasons else [])


def against_outside(records):
    """Per dataset with a published reference: each backend's images/s per core next to the
    reference that does the nearest work."""
    out = []
    rates = per_core_rates(records)
    for dataset, references in OUTSIDE_REFERENCES.items():
        mine = sorted((k for k in rates if k[0] == dataset), key=lambda k: curve_order((k + ("",), None)))
        by_backend = {b: ref for ref in references for b in ref.backends}
        if not mine:
            continue
        out += ["", f"{datasets.get(dataset).label}: the data path's images/s per core against a published loader's "
                f"per vCPU ({references[0].source}; its pipeline: load, random-resized crop to 224 px, flip; "
                "ours: read, parse or decode, crop to 227 px, mirror, subtract the mean):", "",
                "| setup | backend | warm | cold | reference, per vCPU | ours / reference (the better cache) |",
                "|---|---|---|---|---|---|"]
        for key in mine:
            by_cache, ref = rates[key], by_backend.get(key[2])
            out.append(f"| {' / '.join(key[1])} | {key[2]} | "
                       + " | ".join(f"{by_cache[c]:,.0f}" if c in by_cache else "-" for c in ("warm", "cold"))
                       + (f" | {ref.name}: {ref.per_vcpu:,.0f} ({ref.images_per_second:,} on {ref.vcpus}) | "
                          f"{max(by_cache.values()) / ref.per_vcpu:.2f}x |" if ref else " | - | - |"))
        out += [""] + [f"- {ref.name}: {ref.what}." for ref in references] + [""]
    return "\n".join(out)
