"""The fidelity tables: every real cell and paper finding held against the emulated machines'
runs (the calibration itself, each parameter and the cell it was fitted on, is
experiments/calibration.py): rows, verdicts with their power, known differences, markdown.
benchmarks/calibration.py table writes them.
"""
import json
import statistics
from pathlib import Path

from data_prep import backends, datasets
from experiments import accelerators, machines, prediction, proctrack, record
from experiments.calibration import (DISK_CELL, EARLIER_DISK_STEPS, FOLDERS, H100_COPY_CELL, H100_FIT_CELLS,
                                     H100_NET_CELLS, NET_OF, REFERENCE, STOCK, STOCK_OF, UNFITTED_COMPUTE,
                                     disk_reads, fits_titanx_train_ms, images_read)
from experiments.prediction import COMPUTE_BOUND_AU, bound, scaled_to_host
from monitor import cpu_probe

ROOT = Path(__file__).resolve().parents[1]
REAL_H100 = FOLDERS["real_h100"]
PRE_CALIBRATION = FOLDERS["pre_calibration"]
DECODER = FOLDERS["decoder"]


def cell_means(folder, field="solver_seconds", riops=None):
    """(dataset, backend, cache) -> (mean of a record field over ok runs, n, spread (max-min)/mean);
    field "device_mib": MiB the monitor saw read from the data's device; riops: only runs under that
    read IOPS limit."""
    cells = {}
    for r in record.load([ROOT / folder]) if folder and (ROOT / folder).exists() else []:
        value = (r.monitor or {}).get("read_bytes_total", 0) / 2**20 if field == "device_mib" else getattr(r, field)
        if r.ok and value is not None and not r.concurrent and not r.read_options and \
                (riops is None or (r.limits or {}).get("riops") == riops):
            cells.setdefault((r.dataset, r.backend, r.cache_state), []).append(value)  # partly warm is not warm
    return {k: (statistics.mean(v), len(v), (max(v) - min(v)) / statistics.mean(v) if statistics.mean(v) else 0.0)
            for k, v in cells.items()}


GOAL = 0.15                 # emulated within 15% of real: the goal of the GPU tables
EFFECT_GOAL = (0.67, 1.5)   # (ours - 1) / (paper - 1): the effect's size, as a share of the paper's
NOISE_FLOOR = 0.02          # the least noise a ratio of two cells' means is credited with


WITHIN_SPREAD, BEYOND_SPREAD, UNDECIDED = "within spread", "beyond spread", "spread > goal: undecided"
NO_SPREAD = "an arm of n = 1: spread unknown"


def against_spread(ratio, arms, goal=GOAL):
    """(the difference |emulated / real - 1|, the arms' spread, what it says) where `arms` is
    [(n, spread (max - min) / mean)] of the real and the emulated runs: 'beyond spread' where the
    difference is larger than the larger spread of an arm of two runs or more, else 'within
    spread', unless that spread is larger than the goal, so that a difference within it cannot tell
    within the goal from outside ('spread > goal: undecided'). An arm of one run has no spread to
    hold the difference against, so nothing is decided. None where there is no ratio."""
    if ratio is None:
        return None
    difference = abs(ratio - 1)
    if any(n < 2 or spread is None for n, spread in arms):
        return difference, None, NO_SPREAD
    spread = max(spread for _, spread in arms)
    return difference, spread, BEYOND_SPREAD if difference > spread else UNDECIDED if spread > goal else WITHIN_SPREAD


def spread_words(row):
    """The "difference vs spread" cell of a row with row["power"] (against_spread)."""
    if not row.get("power"):
        return "-"
    difference, spread, words = row["power"]
    return f"{difference:.1%} vs {spread:.1%}: {words}" if spread is not None else f"{difference:.1%}: {words}"


SPREAD_RULE = ("Difference vs spread: the difference |emulated / real - 1| against the larger spread (max - min) / "
               "mean of the two arms (n per arm in the row): *within spread* where the difference is no larger and "
               f"that spread is within the {GOAL:.0%} goal (the emulation is as close as the runs repeat), *beyond "
               "spread* where the difference is larger (a difference the runs resolve, whether or not within the "
               "goal), *spread > goal: undecided* where the difference is within a spread larger than the goal (the "
               "arms' own noise cannot tell within the goal from outside: more runs needed); an arm of one run has "
               "no spread, so nothing is decided. A fitted row repeats the cell a parameter was fitted on and is no "
               "evidence.")


# What is known to differ between a real H100 cell and its emulation beyond the model; where a
# factor was measured apart (the decoder), the note says what it showed.
H100_CAVEATS = {
    "leveldb": "the real run read an unsettled LevelDB (48 MB in 5 files, its log not yet compacted)",
    "images": "decode: the real run used the GPU bundle's minimal OpenCV 4.6 on a 16-core Xeon host, ours "
              "Debian's OpenCV on this 2-core machine",
    "pymem": "the Python driver's start-up and per-iteration set_input_arrays run on the host's CPU (not measured apart)",
}


def data_path_us_per_image(r):
    """µs of CPU the data path (prefetch thread and its decode pool) spent per image in one run."""
    threads = (r.process or {}).get("thread_cpu_seconds", {})
    cpu = threads.get(proctrack.PREFETCH, 0) + threads.get(proctrack.DECODE, 0) + threads.get(proctrack.TRANSFORM, 0)
    return 1e6 * cpu / images_read(r.dataset, r.iterations_setting) if cpu else None


def prefetch_us_per_image(folder, dataset, backend, cache):
    """(µs of data-prefetch thread CPU per image a stock run reads, the CPU model) over ok runs."""
    rs = [r for r in record.load([ROOT / folder]) if r.ok and (r.dataset, r.backend, r.cache) == (dataset, backend, cache)
          and not r.read_options and not r.iterations_setting and data_path_us_per_image(r)]
    if not rs:
        return None
    return statistics.mean(data_path_us_per_image(r) for r in rs), (rs[0].environment or {}).get("cpu_model")


def decoder_note(dataset):
    """What benchmarks/decoder.py measured of the two decoders on this dataset's files, or None."""
    path = ROOT / DECODER
    measured = json.loads(path.read_text()) if path.exists() else {"cells": {}}
    cell = measured["cells"].get(dataset)
    if not cell:
        return None
    n = len(cell["rates"]["debian"])
    return (f"decoder measured apart ({DECODER}, {n} rounds, {measured['machine']['cpu_model']}): "
            f"the bundle's build delivers {cell['ratio']:.3f}x Debian's images/s on the same files, so the decoder "
            "is not the difference")


def decode_note(dataset, cache, ours_folder):
    here, before = (prefetch_us_per_image(f, dataset, "images", cache) for f in (ours_folder, PRE_CALIBRATION))
    notes = [decoder_note(dataset)]
    if here and before:
        notes.append(f"host CPU: the prefetch thread spent {here[0]:.1f} µs per image here ({here[1]}), {before[0]:.1f} "
                     f"on the {before[1]} CI machine of {PRE_CALIBRATION} (same Caffe but without the emulated host-device copies): the emulation "
                     "has no host-CPU term")
    return "; ".join(n for n in notes if n) or None


def h100_caveat(backend, cache, device_mib, decode=None):
    """device_mib: (real, ours) MiB read from the data's device during the runs (monitor);
    decode: what is known of the image decoding's host CPU."""
    notes = [H100_CAVEATS[backend]] + ([decode] if decode else []) if backend in H100_CAVEATS else []
    if cache == "cold":
        real, ours = device_mib
        notes.append(f"cold: the real run read {real:,.0f} MiB from its VM's disk, ours {ours:,.0f} MiB from this "
                     "machine's (different disks and host caches)" if real is not None and ours is not None
                     else "cold: different disks and host caches")
    return "; ".join(notes)


def host_probe(folder, work=cpu_probe.PIXELS):
    """Median images/s of one work of the CPU probe in a folder's ok records (monitor/cpu_probe.py),
    or None where its runs predate the probe (or that work): how fast that host's cores run
    Caffe's image path."""
    return prediction.probe(record.load([ROOT / folder]), work) if (ROOT / folder).exists() else None


def gpu_step_folders():
    """The results folders of GPU steps (device/gpu_calibrate.py, and calls after it on the same
    loan) the catalogue lists: results/<gpu>-calibrate and results/<gpu>-calibrate-<what>, oldest first."""
    found = [ROOT / f for f in FOLDERS["gpu_steps"] if any((ROOT / f).glob("*/records.jsonl"))]
    return [str(p.relative_to(ROOT)) for p in sorted(found, key=lambda p: p.name)]


def cell_key(r):
    """(dataset, backend, cache, iterations asked, read options) of a cut-iterations run."""
    return r.dataset, r.backend, r.cache, r.iterations_setting, tuple(sorted((r.read_options or {}).items()))


def cell_order(key):
    """Cells as listed: by dataset, backend, cache, iterations; without read options first."""
    return str(key[:4]), key[4]


def cell_label(key):
    dataset, backend, cache, iterations, options = key
    return (f"{dataset} {backend} {cache}, {iterations or 'stock'} iterations"
            + "".join(f", {k} {v}" for k, v in options))


def by_side(folder):
    """{cell_key: runs} of a folder's ok runs: (real GPU, emulated)."""
    real, emulated = {}, {}
    for r in record.load([ROOT / folder]) if (ROOT / folder).exists() else []:
        if r.ok and not r.concurrent:
            side = emulated if (r.compute or {}).get("mode") == "emulated" else real
            side.setdefault(cell_key(r), []).append(r)
    return real, emulated


def seconds(runs):
    """(mean solver seconds, spread (max - min) / mean) of runs."""
    values = [x.solver_seconds for x in runs]
    mean = statistics.mean(values)
    return mean, (max(values) - min(values)) / mean


def gpu_step_use(key, gpu, ours):
    """What a GPU-step row is: 'fitted (...)' where it repeats a cell an emulated parameter was fitted
    on (the same dataset, backend and cache, no read options, on the GPU model of the fitting run),
    a prediction on an unfitted compute where the profile's net time is not fitted on training
    (CaffeNet: `caffe time`), else a prediction."""
    dataset, backend, cache, _, options = key
    for cell, fitted in H100_FIT_CELLS:
        if (cell.dataset, cell.backend, cell.cache) == (dataset, backend, cache) and not options and \
                gpu == (cell.load()[0].environment or {}).get("gpu_model"):
            return fitted
    names = {(x.compute or {}).get("accelerator") for x in ours} - {None}
    net = NET_OF.get(dataset)
    for name in sorted(names):
        if accelerators.profiles().get(name, {}).get(net, {}).get("fitted_on", "").startswith("none"):
            return f"prediction on an unfitted compute ({name} {net}: {UNFITTED_COMPUTE.get(name, 'not fitted')})"
    return "prediction"


def paired_row(key, real, ours):
    (real_s, real_spread), (ours_s, ours_spread) = seconds(real), seconds(ours)
    aus = [x.au for x in ours if x.au is not None]
    gpu = (real[0].environment or {}).get("gpu_model")
    ratio = round(ours_s / real_s, 3)
    return {"cell": cell_label(key), "reference": round(real_s, 2), "reference_n": len(real),
            "reference_spread": round(real_spread, 3), "ours": round(ours_s, 2), "ours_n": len(ours),
            "ours_spread": round(ours_spread, 3), "ratio": ratio,
            "bound": bound(statistics.mean(aus) if aus else None), "use": gpu_step_use(key, gpu, ours),
            "gpu": gpu, "power": against_spread(ratio, [(len(real), real_spread), (len(ours), ours_spread)])}


def same_host_rows(folders):
    """The GPU steps: real GPU against the emulated H100 on one host, per cell: both sides share
    the host's cores, disk and page cache, so a difference is the emulation's."""
    rows = []
    for folder in folders:
        real_runs, emulated_runs = by_side(folder)
        for key in sorted(real_runs, key=cell_order):
            if emulated_runs.get(key):
                rows.append(dict(paired_row(key, real_runs[key], emulated_runs[key]),
                                 folder=folder, probe=host_probe(folder)))
    return rows


def cross_host_rows(real_folders, ours_folder):
    """The emulated H100 on this machine against the real GPU of a GPU step, cell by cell (the same
    cut iterations): the data path's host differs, so a data-path-bound cell is scaled by the two
    hosts' CPU probes of the work its images are like (cpu_probe.WORK_OF; judged only where both
    hosts have it), the pixel work's scaling and the data path's own CPU per image on each host
    shown beside."""
    _, ours_runs = by_side(ours_folder)
    rows = []
    for folder in real_folders:
        real_runs, there_emulated = by_side(folder)
        for key in sorted(real_runs, key=cell_order):
            ours = ours_runs.get(key)
            if not ours:
                continue
            work = cpu_probe.WORK_OF[key[0]]
            probes = {w: (host_probe(ours_folder, w), host_probe(folder, w)) for w in (cpu_probe.PIXELS, work)}
            row = dict(paired_row(key, real_runs[key], ours), folder=folder, work=work,
                       probes={w: list(v) for w, v in probes.items()})
            here = statistics.mean(filter(None, map(data_path_us_per_image, ours)))
            there = statistics.mean(filter(None, map(data_path_us_per_image, real_runs[key] + there_emulated.get(key, []))))
            row.update(us_here=round(here, 1), us_there=round(there, 1), raw_ratio=row["ratio"], scaled={})
            if row["bound"] == "data path":
                compute = ours_runs.get((key[0], "lmdb", "warm", key[3], ()))  # the compute-bound time, if run
                floor = seconds(compute)[0] if compute else None
                row["scaled"] = {w: round(scaled_to_host(row["ours"], floor, h, t) / row["reference"], 3)
                                 for w, (h, t) in probes.items() if h and t}
                row["ratio"] = row["scaled"].get(work, row["raw_ratio"])
                row["host"] = None if work in row["scaled"] else "unknown"
                row["power"] = against_spread(row["ratio"], [(row["reference_n"], row["reference_spread"]),
                                                             (row["ours_n"], row["ours_spread"])]) \
                    if row["host"] is None else None  # an unscaled difference across hosts says nothing
            rows.append(row)
    return rows


def h100_rows(emulated_folder):
    """Every real H100 cell: real solver seconds, ours (emulated h100 on this machine), ratio. A
    data-path-bound cell is judged only where both hosts' CPU probes are known (scaled to the real
    host's); else it says the host's CPU is unknown."""
    real, ours = cell_means(REAL_H100), cell_means(emulated_folder)
    ours_au = cell_means(emulated_folder, "au")
    real_probe, ours_probe = host_probe(REAL_H100), host_probe(emulated_folder)
    real_mib, ours_mib = cell_means(REAL_H100, "device_mib"), cell_means(emulated_folder, "device_mib")
    fitted_cells = {(c.dataset, c.backend, c.cache): "fitted (train_ms, test_ms)" for c in H100_NET_CELLS.values()}
    fitted_cells[(H100_COPY_CELL.dataset, H100_COPY_CELL.backend, H100_COPY_CELL.cache)] = "fitted (copy latency)"
    lmdb = {k[:1]: v[0] for k, v in ours.items() if k[1:] == ("lmdb", "warm")}  # the compute-bound time per dataset
    rows = []
    # rows as the registries order datasets and backends (the figures' order), warm before cold
    order = {name: i for i, name in enumerate([*datasets.REGISTRY, *backends.REGISTRY, "warm", "cold"])}
    for key in sorted(real, key=lambda k: [order.get(part, 99) for part in k]):
        (mean, n, _), o = real[key], ours.get(key)
        cell_bound = bound((ours_au.get(key) or (None,))[0])
        ratio, host = (o[0] / mean if o else None), None
        if o and cell_bound == "data path" and key[1] == "images":
            if real_probe and ours_probe:
                ratio = scaled_to_host(o[0], lmdb.get(key[:1]), ours_probe, real_probe) / mean
                host = f"scaled by the probes: {ours_probe:.0f} here, {real_probe:.0f} there"
            else:
                host = "unknown"
        rows.append({"cell": " ".join(key), "reference": round(mean, 2), "reference_n": n,
                     "power": against_spread(ratio, [(n, real[key][2]), (o[1], o[2])])
                     if o and ratio and host != "unknown" else None,
                     "ours": round(o[0], 2) if o else None, "ours_n": o[1] if o else 0,
                     "ours_spread": round(o[2], 3) if o else None,
                     "ratio": round(ratio, 3) if ratio else None, "bound": cell_bound, "host": host,
                     "use": fitted_cells.get(key, "prediction"), "caveat": h100_caveat(key[1], key[2], ((real_mib.get(key) or [None])[0],
                                                                               (ours_mib.get(key) or [None])[0]),
                                                         decode_note(key[0], key[2], emulated_folder)
                                                         if key[1] == "images" else None)})
    return rows


OUTSIDE_GOAL = "outside the goal"  # a finding the emulated machine cannot carry (docs/emulation.md says why)
FINDING_USE = {"mnist-cold-images": "the cold cell fitted (disk IOPS); the ratio also needs the warm cell: prediction",
               "mnist-hdf5": "fitted (titanx2016 copy latency)",
               "cifar-hdf5": f"{OUTSIDE_GOAL}: the 2016 host's copies of HDF5 rows, slower per byte than the profile's",
               "cifar-warm-images": f"{OUTSIDE_GOAL}: the paper's own CIFAR-10 files, not the stand-in's"}


def requests_per_file(runs):
    """(read requests per file of these cold image-files runs, their read IOPS limit, CPU model)."""
    if not runs:
        return None
    files = (runs[0].artifact_footprint or {}).get("files") or 1
    return (statistics.mean(disk_reads(r)[0] for r in runs) / files, runs[0].limits.get("riops"),
            (runs[0].environment or {}).get("cpu_model"))


def cold_image_runs(folder, dataset, riops):
    return [r for r in record.load([ROOT / folder]) if r.ok and (r.dataset, r.backend, r.cache) == (dataset, "images", "cold")
            and (r.limits or {}).get("riops") == riops]


def paper_caveat(folder, dataset, cells):
    """What is measured to differ, for rows whose cells (backend, cache) decode PNGs or read them cold."""
    notes = []
    if any(b == "images" for b, _ in cells) and dataset in STOCK_OF:
        here = prefetch_us_per_image(folder, dataset, "images", "warm")
        if here:
            need = 1000 * STOCK[NET_OF[dataset]]["batch"] / fits_titanx_train_ms(NET_OF[dataset])
            notes.append(f"PNG decode on this host ({here[1]}): {here[0]:.1f} µs of prefetch CPU per image, "
                         f"{1e6 / here[0]:,.0f} images/s against the {need:,.0f}/s the Titan X consumes")
    if dataset == DISK_CELL.dataset and (DISK_CELL.backend, DISK_CELL.cache) in cells:
        now = requests_per_file(cold_image_runs(folder, dataset, machines.get("paper2016").limits["riops"]))
        fit = requests_per_file([DISK_CELL.load()[0]])
        if now and fit:
            same = abs(now[0] / fit[0] - 1) <= 0.1
            notes.append(f"disk: {fit[0]:.2f} read requests per file in the fitting run ({fit[1]} IOPS, {fit[2]}), "
                         f"{now[0]:.2f} in these ({now[1]} IOPS, {now[2]})" +
                         ("" if same else ": the reads per file changed, so IOPS alone does not carry over"))
    return "; ".join(notes)


def paper_cells(folder):
    """(dataset, backend, cache) -> (mean wall seconds, n, spread, read IOPS, mean AU) of the runs
    under the profile's IOPS; a dataset not yet run under them keeps its cells under the newest
    earlier step of the disk fit (its rows say so)."""
    def at(riops):
        au = cell_means(folder, "au", riops=riops)
        return {k: v + (riops, (au.get(k) or (None,))[0]) for k, v in cell_means(folder, "wall_seconds", riops=riops).items()}
    now = machines.get("paper2016").limits["riops"]
    cells = at(now)
    for riops in EARLIER_DISK_STEPS:
        done = {dataset for dataset, _, _ in cells}
        cells.update({k: v for k, v in at(riops).items() if k[0] not in done})
    return cells


def finding_check(paper, ours, noise):
    """How a ratio finding is judged: ('effect', (ours-1)/(paper-1)) where the paper's effect
    stands above our noise, else ('no effect', |ours-1|): the paper's effect is too small for our
    runs to tell apart from none."""
    if ours is None:
        return None, None
    if abs(paper - 1) <= noise:
        return "no effect", abs(ours - 1)
    return "effect", (ours - 1) / (paper - 1)


def cells_bound(*cells):
    """The bound of a comparison of cells: 'data path' if any of them is, else 'compute'."""
    bounds = [bound(c[4]) if c else None for c in cells]
    if "data path" in bounds:
        return "data path"
    return "compute" if bounds and all(b == "compute" for b in bounds) else None


def older_disk(use, *cells):
    """`use`, and the IOPS of cells run under an earlier step of the disk fit."""
    now = machines.get("paper2016").limits["riops"]
    old = sorted({c[3] for c in cells if c and c[3] != now})
    return use + "".join(f"; run under {r} IOPS (an earlier disk fit step), not yet at {now}" for r in old)


def paper_rows(folder):
    ours = paper_cells(folder)
    rows = []
    for f in REFERENCE["findings"]:
        num, den = ours.get((f["dataset"], *f["num"])), ours.get((f["dataset"], *f["den"]))
        ratio = num[0] / den[0] if num and den else None
        noise = max(NOISE_FLOOR, num[2] if num else 0, den[2] if den else 0)
        check, value = finding_check(f["paper_ratio"], ratio, noise)
        rows.append({"finding": f["id"], "text": f["text"], "reference": f["paper_ratio"],
                     "ours": round(ratio, 3) if ratio else None,
                     "n": f"{num[1]} / {den[1]}" if num and den else "not run",
                     "ratio": round(ratio / f["paper_ratio"], 3) if ratio else None,
                     "check": check, "effect": round(value, 3) if value is not None else None,
                     "noise": round(noise, 3), "bound": cells_bound(num, den),
                     "use": older_disk(FINDING_USE.get(f["id"], "prediction"), num, den),
                     "caveat": paper_caveat(folder, f["dataset"], [tuple(f["num"]), tuple(f["den"])])})
    warm, cold = ours.get(("cifar10", "cppmem", "warm")), ours.get(("cifar10", "cppmem", "cold"))
    gap = cold[0] - warm[0] if warm and cold else None
    rows.append({"finding": "cifar-cppmem-cold", "text": "cppmem cold - warm, seconds (Section 3.2)", "reference": 4.5,
                 "ours": round(gap, 2) if gap is not None else None,
                 "n": f"{cold[1]} / {warm[1]}" if gap is not None else "not run",
                 "ratio": round(gap / 4.5, 3) if gap is not None else None, "use": older_disk("prediction", warm, cold),
                 "check": "seconds", "bound": cells_bound(warm, cold), "caveat": ""})
    for row in REFERENCE["training_seconds"]:
        o = ours.get((row["dataset"], row["backend"], row["cache"]))
        fit = (row["dataset"], row["backend"], row["cache"]) == (DISK_CELL.dataset, DISK_CELL.backend, DISK_CELL.cache)
        rows.append({"finding": f"{row['dataset']} {row['backend']} {row['cache']} (s)", "text": row["source"],
                     "reference": row["mean"], "ours": round(o[0], 2) if o else None, "n": str(o[1]) if o else "not run",
                     "ratio": round(o[0] / row["mean"], 3) if o else None, "check": "seconds",
                     "bound": cells_bound(o),
                     "use": older_disk("fitted (disk IOPS)" if fit else
                                       "fitted (titanx2016 cifar10_quick)"
                                       if row["backend"] == "leveldb" and row["cache"] == "warm" else "prediction", o),
                     "caveat": paper_caveat(folder, row["dataset"], [(row["backend"], row["cache"])])})
    return rows


def verdict(row, tolerance):
    """within / outside for a prediction: a finding by its effect (or as no effect, within our
    noise), seconds and H100 cells by their ratio within `tolerance`; a fitted row is no evidence."""
    if row["ratio"] is None:
        return "not run"
    if row["use"].startswith("fitted"):
        return ("fitted: no evidence" if 0.95 <= row["ratio"] <= 1.05 else
                f"fitted, but its cell is not reproduced ({row['ratio']:.2f}x)" +
                (": see known differences" if "caveat" in row else ""))
    if row["use"].startswith(OUTSIDE_GOAL):
        return "not judged"
    if row.get("host") == "unknown":
        return "host CPU unknown"
    if row.get("check") == "effect":
        return "within" if EFFECT_GOAL[0] <= row["effect"] <= EFFECT_GOAL[1] else "outside"
    if row.get("check") == "no effect":
        return "within (no effect)" if row["effect"] <= row["noise"] else "outside (an effect where the paper has none)"
    return "within" if 1 / tolerance <= row["ratio"] <= tolerance else "outside"


def summary(rows, tolerance):
    """'data-path-bound: 5 within of 7 (...); compute-bound: ...': predictions counted apart by what
    bounds them, and, where the rows have arms with spreads, how many of them the spread decides."""
    counts = {}
    for r in rows:
        v = verdict(r, tolerance)
        if r["ratio"] is None or r["use"].startswith(("fitted", OUTSIDE_GOAL)):
            continue
        c = counts.setdefault(r.get("bound") or "bound unknown", [0, 0, 0, {}])
        c[0] += v.startswith("within")
        c[1] += v == "host CPU unknown"
        c[2] += 1
        if r.get("power") and v != "host CPU unknown":
            c[3][r["power"][2]] = c[3].get(r["power"][2], 0) + 1
    parts = [f"{b.replace(' ', '-')}-bound: {w} within of {n - u}"
             + (f" ({u} not judged: one of the two hosts has no CPU probe of the work their images are like)"
                if u else "")
             + _spread_counts(power) for b, (w, u, n, power) in sorted(counts.items())]
    outside = [r for r in rows if r["ratio"] is not None and r["use"].startswith(OUTSIDE_GOAL)]
    if outside:  # a miss taken out of the goal is still counted where the goal is read
        parts.append(f"{len(outside)} outside the goal (not counted above; their rows say why)")
    return "Predictions: " + "; ".join(parts) + "." if parts else "No predictions."


def _spread_counts(power):
    """', against their spread: 1 within spread, 2 beyond spread, 6 undecided (spread > goal)' (or '')."""
    order = [WITHIN_SPREAD, BEYOND_SPREAD, UNDECIDED, NO_SPREAD]
    found = sorted(power.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order))
    shown = {UNDECIDED: "undecided (spread > goal)", NO_SPREAD: "with an arm of n = 1 (spread unknown)"}
    return ", against their spread: " + ", ".join(f"{n} {shown.get(words, words)}" for words, n in found) if found else ""


def judged(r):
    """How a paper row is held: the effect as a share of the paper's, or 'no effect' within our noise."""
    if r.get("check") == "effect":
        return f"effect {r['effect']:.2f} of the paper's"
    if r.get("check") == "no effect":
        return f"no effect: \\|ours - 1\\| {r['effect']:.3f} vs noise {r['noise']:.3f}"
    return f"ratio {r['ratio']}" if r["ratio"] else "-"


def probe_words(probe):
    return f"{probe:.0f}" if probe else "not measured"


def probes(row, work):
    """The two hosts' CPU probes of one kind of work, here / there."""
    here, there = row["probes"].get(work, [None, None])
    return f"{probe_words(here)} / {probe_words(there)}"


def split_table(rows, first, parts):
    """One markdown table per part of the columns, each with the `first` column that names the row,
    so that none is wider than the page (6 columns at most). `first` and each column: (header, cell of a row)."""
    out = []
    for part in parts:
        columns = [first, *part]
        out += ["", "| " + " | ".join(h for h, _ in columns) + " |", "|" + "---|" * len(columns)]
        out += ["| " + " | ".join(cell(r) for _, cell in columns) + " |" for r in rows]
    return out[1:]


# a fidelity table's measured columns: seconds with their n and spread
REAL_SECONDS = ("real s (n, spread)", lambda r: f"{r['reference']} ({r['reference_n']}, {r['reference_spread']:.1%})")


def ours_seconds(label):
    return label, lambda r: f"{r['ours']} ({r['ours_n']}, {r['ours_spread']:.1%})"


def same_host_table(rows):
    lines = ["**Real GPU against the emulated H100 on the same host** (the GPU steps: `" +
             "`, `".join(sorted({r['folder'] for r in rows})) + "`; host CPU probe: images/s per core, the median of "
             "the folder's records). The host's cores, disk and page cache are shared, so what differs is the "
             "emulation; a compute-bound row also holds the H100's fitted compute against this GPU. Solver seconds, "
             "iterations cut to fit a loan; goal within 15%.", ""]
    lines += split_table(rows, ("cell", lambda r: r["cell"]), [
        [REAL_SECONDS,
         ours_seconds("emulated s (n, spread)"),
         ("emulated / real", lambda r: f"{r['ratio']}")],
        [("GPU (host probe)", lambda r: f"{r['gpu']} ({probe_words(r['probe'])})"),
         ("difference vs spread", spread_words), ("bound", lambda r: r["bound"] or "-")],
        [("use", lambda r: r["use"]), ("verdict", lambda r: verdict(r, 1.15))]])
    return lines + ["", summary(rows, 1.15)]


def cross_host_table(rows, here_folder):
    lines = [f"**The emulated H100 on this machine** (`{here_folder}`) **against the real GPU of a GPU step** "
             "(the same cells, the same cut iterations). The data path runs on different hosts: a data-path-bound "
             "row is held after scaling ours by the two hosts' CPU probes (ours x probe here / probe there) of the "
             "work its images are like (`monitor/cpu_probe.py`: the per-file work for MNIST and CIFAR-10, the pixel "
             "work for ImageNet), and judged only where both hosts have that probe. Beside it: the same scaling by "
             "the pixel work, and the measured factor, the data path's own CPU per image (prefetch thread and "
             "decode pool, µs) on each host. Probes: images/s per core, here / there. Goal within 15%.", ""]
    lines += split_table(rows, ("cell", lambda r: r["cell"]), [
        [REAL_SECONDS,
         ours_seconds("emulated here s (n, spread)"),
         ("here / there", lambda r: f"{r['raw_ratio']}")],
        [("real GPU there", lambda r: r["gpu"]), ("difference vs spread", spread_words)],
        [("pixel probes", lambda r: probes(r, cpu_probe.PIXELS)),
         ("scaled by them", lambda r: f"{r['scaled'].get(cpu_probe.PIXELS, '-')}"),
         ("per-file probes", lambda r: probes(r, cpu_probe.FILES)),
         ("scaled by them", lambda r: f"{r['scaled'].get(cpu_probe.FILES, '-')}"),
         ("data path µs per image here / there",
          lambda r: f"{r['us_here']} / {r['us_there']} = {r['us_here'] / r['us_there']:.2f}")],
        [("use", lambda r: r["use"]), ("verdict", lambda r: verdict(r, 1.15))]])
    return lines + ["", summary(rows, 1.15)]


def tables(h100, paper, h100_folder, paper_folder, caveats=True, same_host=None, cross_host=None, here_folder=None):
    """The fidelity tables in markdown; without the caveat column for the README."""
    known = [("known differences", lambda r: r["caveat"] or "-")] if caveats else []
    lines = [f"**Emulated H100** (`{h100_folder}`, this machine) **against the real H100** (`{REAL_H100}`, one run "
             "per cell). Solver seconds (Caffe's first logged iteration to Optimization Done). Goal: predictions "
             f"within 15%. Bound: compute where our run's AU >= {COMPUTE_BOUND_AU} (the row tests the compute fit), "
             "else the data path (it tests the emulated data path); image-file cells bound by the data path are "
             "judged only where both hosts' CPU probes are known.", ""]
    lines += split_table(h100, ("cell", lambda r: r["cell"]), [
        [("real H100 s (n)", lambda r: f"{r['reference']} ({r['reference_n']})"),
         ("emulated s (n, spread)", lambda r: f"{r['ours']} ({r['ours_n']}, {r['ours_spread']:.1%})"
          if r["ours"] is not None else "not run"),
         ("emulated / real", lambda r: f"{r['ratio'] or '-'}")],
        [("difference vs spread", spread_words), ("bound", lambda r: r.get("bound") or "-")],
        [("use", lambda r: r["use"]), ("verdict", lambda r: verdict(r, 1.15))] + known])
    lines += ["", summary(h100, 1.15), "", SPREAD_RULE]
    if same_host:
        lines += [""] + same_host_table(same_host)
    if cross_host:
        lines += [""] + cross_host_table(cross_host, here_folder)
    lines += ["", f"**Emulated 2016 machine** (`{paper_folder}`, this machine) **against the paper**. Ratios of "
              "wall seconds (the paper's figures), and the paper's stated seconds. A finding 'X is N times / N% "
              "slower' is held as an effect: (ours - 1) / (paper - 1), goal "
              f"[{EFFECT_GOAL[0]}, {EFFECT_GOAL[1]}]; where the paper's effect is within our runs' noise (the larger "
              f"spread (max - min) / mean of the two cells, at least {NOISE_FLOOR:.0%}) it is held as no effect: "
              "|ours - 1| within that noise. Stated seconds: within 1.5x.", ""]
    lines += split_table(paper, ("finding", lambda r: r["finding"]), [
        [("the paper says", lambda r: r["text"])],
        [("paper", lambda r: f"{r['reference']}"), ("ours", lambda r: f"{r['ours'] or '-'}"),
         ("n", lambda r: f"{r['n']}"), ("held as", judged)],
        [("bound", lambda r: r.get("bound") or "-"), ("use", lambda r: r["use"]),
         ("verdict", lambda r: verdict(r, 1.5))] + known])
    lines += ["", summary(paper, 1.5)]
    return "\n".join(lines) + "\n"


def markdown(h100, paper, h100_folder, paper_folder, same_host=None, cross_host=None, here_folder=None):
    return ("# Fidelity of the emulated machines\n\n"
            "Written by `benchmarks/calibration.py table`. A fitted cell agrees by construction and is no "
            "evidence; every other row is a prediction held against a measurement it was not fitted on.\n\n"
            + tables(h100, paper, h100_folder, paper_folder, same_host=same_host, cross_host=cross_host,
                     here_folder=here_folder))


README_BEGIN = "<!-- fidelity tables: written by benchmarks/calibration.py table --readme -->"
README_END = "<!-- end of fidelity tables -->"

