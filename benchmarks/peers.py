#!/usr/bin/env python3
"""Caffe's data path beside the loaders people would pick instead (NVIDIA DALI on the CPU,
PyTorch's DataLoader), on the same bytes, the same host and Caffe's transform, warm and cold.

  make peers                      # once: .venv-peers with DALI 2.4 and PyTorch 2.13 (CPU builds)
  python benchmarks/peers.py [--datasets mnist,cifar10,imagenet] [--caches warm,cold] [--rounds 3]
                             [--loaders caffe,dali,torch] [--images N] [--json FILE] [--figure FILE]
  python benchmarks/peers.py --from FILE.json [--figure FILE]   # the tables of a recorded run

Rows, for each dataset, all reading the train split's first images in key order (the same
images for every row) and delivering float32 N x C x H x W batches of the net's batch size
with Caffe's transform (crop at a random place and random mirror where the net has them, the
per-pixel mean subtracted, scaled):
  caffe lmdb     Caffe's Data layer on the LMDB (stock memory-mapped cursor), one prefetch thread
  caffe lmdb-coalesced   the same with LMDBIO's coalesced reads (lmdb_read: coalesced, patch 0013)
  caffe images   ImageData on the PNG files, decode_threads 1..cores
  dali lmdb      DALI readers.caffe on the same LMDB, num_threads 1..cores
  dali images    DALI readers.file + decoders.image on the same PNGs, num_threads 1..cores
  torch lmdb     DataLoader over the LMDB's Datums (py-lmdb + Caffe's caffe_pb2), workers 0..cores
  torch images   DataLoader over the same PNGs (Pillow), workers 0..cores (0: the main process)
Caffe's rows are built from the backend's own data layer (Backend.data_layer) and read options.

Each cell is one process; its first batch (start-up, queues filled) is outside the clock. Two
numbers per cell: images per second delivered, and images per CPU-second (user + system of all
the process's threads and its worker processes), medians over rounds with the range. Cold: the
page cache dropped before the process starts, and the data measured < 1% resident, else the
cell is refused. Where the net's transform has no randomness (MNIST, CIFAR-10) every row's
first batch is compared with Caffe's: the same bytes and the same transform give the same
floats. Needs root for cold cells (drop_caches).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import toolchain  # noqa: E402
from data_prep import backends, build, cache, datasets  # noqa: E402
from peers import loaders  # noqa: E402

PEERS_PYTHON = ROOT / ".venv-peers" / "bin" / "python"
IMAGES = {"mnist": 60000, "cifar10": 50000, "imagenet": 3000}
FORMS = {"lmdb": "lmdb", "lmdb-coalesced": "lmdb", "images": "images"}  # form -> the backend (data folder)
PEER_FORMS = ("lmdb", "images")  # what DALI and the DataLoader read
CAFFE_READ = {"lmdb-coalesced": {"lmdb_read": "coalesced"}}  # a form's read options beyond the backend's defaults
COLORS = {"caffe": "#1b9e77", "dali": "#7570b3", "torch": "#e7298a"}


def rows(loaders_wanted, cores):
    """(loader, form, threads) of every row; torch's 0 workers is its main process alone."""
    threads = range(1, cores + 1)
    plan = {"caffe": [("caffe", "lmdb", 1), ("caffe", "lmdb-coalesced", 1)] + [("caffe", "images", t) for t in threads],
            "dali": [("dali", form, t) for form in PEER_FORMS for t in threads],
            "torch": [("torch", form, w) for form in PEER_FORMS for w in range(0, cores + 1)]}
    return [row for name in loaders_wanted for row in plan[name]]


def row_label(loader, form, threads):
    if loader == "caffe" and form == "lmdb":
        return "caffe lmdb (1 prefetch thread)"
    if loader == "caffe" and form == "lmdb-coalesced":
        return "caffe lmdb coalesced (+1 read-ahead thread)"
    unit = "worker" if loader == "torch" else "thread"
    return f"{loader} {form} ({threads} {unit}{'' if threads == 1 else 's'})"


def transform_spec(dataset, data_root, tmp):
    """The net's transform in training, as the peers' CaffeTransform and DALI take it; the
    mean.binaryproto written as .npy (the peers' environment has no pycaffe)."""
    t, mean = dataset.model.transform, None
    if t.mean_file:
        mean = tmp / f"{dataset.name}-mean.npy"
        np.save(mean, build.read_mean(data_root / dataset.name / "mean.binaryproto"))
    return {"scale": t.scale, "crop": t.crop_size, "mirror": t.mirror, "mean": str(mean) if mean else None}


def cell_files(data_root, dataset, form, count):
    """The files a cell reads: what cold drops and warm reads."""
    folder = data_root / dataset.name / FORMS[form]
    if FORMS[form] == "lmdb":
        return [folder / "train_lmdb" / "data.mdb"]
    return [folder / "train.txt"] + [path for path, _ in loaders.image_list(folder, count)]


def caffe_cell(cell):
    """Caffe's side of a cell, in this (the project's) environment."""
    import caffe
    caffe.set_mode_cpu()
    dataset, backend = datasets.get(cell["dataset"]), backends.get(FORMS[cell["form"]])
    options = {"decode_threads": cell["threads"]} if cell["form"] == "images" else CAFFE_READ.get(cell["form"])
    mean = Path(cell["data"]) / dataset.name / "mean.binaryproto"
    net_file = backend.write_data_net(Path(cell["tmp"]) / f"{os.getpid()}.prototxt",
                                      Path(cell["data"]) / dataset.name / FORMS[cell["form"]], dataset,
                                      cell["batch"], caffe.TRAIN, options, mean)
    net = caffe.Net(str(net_file), caffe.TRAIN)

    def next_batch():
        net.forward()
        return net.blobs["data"].data.copy()
    first, result = loaders.timed(next_batch, cell["count"] // cell["batch"], cell["batch"], cell["min_seconds"])
    if cell.get("first_batch"):
        np.save(cell["first_batch"], first)
    return dict(result, versions={"caffe": toolchain.build_key()})


def run_cell(cell, timeout=900):
    """One cell in its own process: the result dict, or {'error': ...}."""
    if cell["loader"] == "caffe":
        cmd = [str(toolchain.PYTHON), __file__, "--caffe-cell", json.dumps(cell)]
    else:
        cmd = [str(PEERS_PYTHON), str(ROOT / "peers" / "loaders.py"), json.dumps(cell)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"no result in {timeout} s"}
    if p.returncode != 0:
        return {"error": f"exit {p.returncode}: {p.stderr.strip()[-1500:]}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def measure(a, dataset, row, cache_state, round_no, tmp):
    loader, form, threads = row
    data_root = Path(a.data)
    batch = dataset.model.batch
    count = (min(a.images or IMAGES[dataset.name], _train_split(data_root, dataset).count) // batch) * batch
    # warm cells read on past `count` for at least --min-seconds, into the rest of the split (all
    # of it warm); a cold cell reads its `count` images once
    records = _train_split(data_root, dataset).count if cache_state == "warm" else count
    files = cell_files(data_root, dataset, form, records)
    how, resident = cache.set_and_measure(cache_state, files)
    cell = dict(dataset=dataset.name, loader=loader, form=form, threads=threads, cache=cache_state,
                round=round_no, batch=batch, count=count, records=records, cache_how=how, resident_before=resident,
                min_seconds=a.min_seconds if cache_state == "warm" else 0.0)
    if cache_state == "cold" and resident > 0.01:
        return dict(cell, error=f"not cold: {resident:.1%} of the data resident after {how}")
    first = tmp / f"first-{dataset.name}-{loader}-{form}-{threads}-{cache_state}.npy"
    spec = dict(cell, data=str(data_root), tmp=str(tmp), first_batch=str(first) if round_no == 0 else None,
                source=str(data_root / dataset.name / FORMS[form] / ("train_lmdb" if FORMS[form] == "lmdb" else "")),
                transform=a.transforms[dataset.name], shape=a.shapes[dataset.name],
                caffe_pb2=str(toolchain.CAFFE / "python" / "caffe" / "proto" / "caffe_pb2.py"))
    result = run_cell(spec)
    cell.update(result)
    cell["resident_after"] = cache.residency(files)
    return cell


def _train_split(data_root, dataset):
    """The train split as the LMDB's manifest describes it (count, C x H x W as stored)."""
    return build.load_manifest(data_root / dataset.name, "lmdb").splits["train"]


def median_range(values):
    values = sorted(v for v in values if v)
    if not values:
        return None, "failed"
    med = statistics.median(values)
    return med, f"{med:9,.0f} ({values[0]:,.0f}-{values[-1]:,.0f})" if len(values) > 1 else f"{med:9,.0f}"


def summarise(cells, dataset, plan, caches):
    """Medians by (row, cache) and the markdown table of one dataset."""
    ok = [c for c in cells if c["dataset"] == dataset.name and "error" not in c]
    table = {}
    lines = ["| loader, form (parallelism) | " + " | ".join(f"{c} images/s | {c} images per CPU-s" for c in caches) + " |",
             "|---|" + "---|---|" * len(caches)]
    for row in plan:
        text = f"| {row_label(*row)} |"
        for state in caches:
            mine = [c for c in ok if (c["loader"], c["form"], c["threads"], c["cache"]) == (*row, state)]
            rate, rate_text = median_range([c["images"] / c["seconds"] for c in mine])
            per_cpu, cpu_text = median_range([c["images"] / c["cpu_seconds"] for c in mine if c["cpu_seconds"]])
            table[(row, state)] = {"images_per_s": rate, "images_per_cpu_s": per_cpu, "n": len(mine)}
            text += f" {rate_text.strip()} | {cpu_text.strip()} |"
        lines.append(text)
    return table, lines


def same_first_batch(dataset, plan, caches, tmp):
    """Max |difference| of each row's first batch from Caffe LMDB's (deterministic transforms only)."""
    t = dataset.model.transform
    if t.crop_size or t.mirror:
        return None
    diffs = {}
    for state in caches:
        ref = tmp / f"first-{dataset.name}-caffe-lmdb-1-{state}.npy"
        for row in plan:
            path = tmp / f"first-{dataset.name}-{row[0]}-{row[1]}-{row[2]}-{state}.npy"
            if ref.exists() and path.exists():
                diffs[row_label(*row)] = max(diffs.get(row_label(*row), 0.0),
                                             float(np.abs(np.load(path) - np.load(ref)).max()))
    return diffs


def figure(summary, plans, caches, path, title=""):
    """Per dataset: images per second and per CPU-second of each row, warm and cold bars."""
    import matplotlib
    import matplotlib.ticker
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(summary)
    fig, axes = plt.subplots(2, len(names), figsize=(4.2 * len(names), 8.5), squeeze=False)
    for col, name in enumerate(names):
        plan = plans[name]
        labels = [row_label(*row) for row in plan]
        for r, (metric, measure_name) in enumerate((("images_per_s", "images/s"),
                                                    ("images_per_cpu_s", "images per CPU-s"))):
            ax = axes[r][col]
            height = 0.8 / len(caches)
            for k, state in enumerate(caches):
                values = [summary[name].get((row, state), {}).get(metric) or 0 for row in plan]
                ax.barh([i + k * height for i in range(len(plan))], values, height=height,
                        color=[COLORS[row[0]] for row in plan], alpha=1.0 if state == "warm" else 0.45,
                        label=state)
            ax.set_yticks([i + height * (len(caches) - 1) / 2 for i in range(len(plan))])
            ax.set_yticklabels(labels if col == 0 else [""] * len(plan), fontsize=8)
            ax.invert_yaxis()
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # 2x10^3 beside 3x10^3 overlap
            ax.set_title(f"{datasets.get(name).label}: {measure_name}", fontsize=10)
            ax.tick_params(axis="x", labelsize=8)
    handles = [plt.Rectangle((0, 0), 1, 1, color="#555555", alpha=1.0 if s == "warm" else 0.45) for s in caches]
    fig.legend(handles, [f"{s} (solid)" if s == "warm" else f"{s} (light)" for s in caches],
               loc="lower center", ncol=len(caches), fontsize=9)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default="mnist,cifar10,imagenet")
    p.add_argument("--caches", default="warm,cold", help="warm, cold or both (cold needs root)")
    p.add_argument("--loaders", default="caffe,dali,torch",
                   help="caffe needs nothing more; dali and torch need `make peers`")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--images", type=int, help="images a cell reads (default: mnist 60000, cifar10 50000, "
                   "imagenet 3000; rounded down to whole batches)")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="most threads / workers a row uses")
    p.add_argument("--min-seconds", type=float, default=3.0,
                   help="a warm cell reads on past its images, into the rest of the split, until its clock shows this")
    p.add_argument("--data", default=str(ROOT / "data"))
    p.add_argument("--json", type=Path, help="every cell (failed ones too), the machine and the versions")
    p.add_argument("--figure", type=Path)
    p.add_argument("--from", dest="recorded", type=Path, metavar="JSON",
                   help="print the tables (and --figure) of a run's --json instead of running")
    p.add_argument("--caffe-cell", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.recorded:
        return report(json.loads(a.recorded.read_text()), a.figure)
    if a.caffe_cell:
        print(json.dumps(caffe_cell(json.loads(a.caffe_cell))))
        return 0
    wanted = a.loaders.split(",")
    unknown = set(wanted) - set(COLORS)
    if unknown:
        p.error(f"unknown loader {', '.join(sorted(unknown))}; choose from {', '.join(COLORS)}")
    if set(wanted) - {"caffe"} and not PEERS_PYTHON.exists():
        p.error(f"{PEERS_PYTHON} is missing: `make peers` installs DALI and PyTorch there "
                "(or --loaders caffe)")
    caches = a.caches.split(",")
    return run_all(a, wanted, caches)


def run_all(a, wanted, caches):
    with tempfile.TemporaryDirectory(prefix="peers-") as scratch:
        return measure_cells(a, wanted, caches, Path(scratch))


def measure_cells(a, wanted, caches, tmp):
    """Every cell of the plan, a.rounds times; tmp holds the per-run files (mean files, first batches)."""
    from experiments import runner
    names = a.datasets.split(",")
    for name in names:
        build.prepare_missing(name, sorted(set(FORMS.values())), a.data, log=lambda m: print(m, file=sys.stderr))
    a.transforms = {n: transform_spec(datasets.get(n), Path(a.data), tmp) for n in names}
    a.shapes = {n: list(_train_split(Path(a.data), datasets.get(n)).shape) for n in names}
    plan = rows(wanted, a.threads)
    total, done, started, cells = len(names) * len(plan) * len(caches) * a.rounds, 0, time.time(), []
    for round_no in range(a.rounds):
        for name in names:
            for state in caches:
                for row in plan:
                    cell = measure(a, datasets.get(name), row, state, round_no, tmp)
                    cells.append(cell)
                    done += 1
                    left = (time.time() - started) / done * (total - done)
                    status = f"error: {cell['error'][:200]}" if "error" in cell else \
                        f"{cell['images'] / cell['seconds']:,.0f} images/s"
                    print(f"[{done}/{total}, ~{left / 60:.0f} min left] round {round_no + 1} {name} {state} "
                          f"{row_label(*row)}: {status}", file=sys.stderr, flush=True)
    found = {"cells": cells, "machine": runner.environment(), "rounds": a.rounds, "caches": caches,
             "first_batch_max_difference": {n: same_first_batch(datasets.get(n), plan, caches, tmp) for n in names}}
    if a.json:
        a.json.write_text(json.dumps(found, indent=1))
    return report(found, a.figure)


def report(found, figure_path=None):
    """Prints the tables of a run (or of its --json, with --from) and draws its figure; 1 when
    a cell failed."""
    from monitor import cpu_probe
    cells, machine = found["cells"], found["machine"]
    caches = found.get("caches") or list(dict.fromkeys(c["cache"] for c in cells))
    names = list(dict.fromkeys(c["dataset"] for c in cells))
    plan = list(dict.fromkeys((c["loader"], c["form"], c["threads"]) for c in cells))
    where = (f"{machine['cpu_model']}, {machine['cpu_cores']} cores, CPU probe {cpu_probe.rate(machine) or '?'} "
             f"images/s per core; {found['rounds']} round(s): medians")
    print(f"\nmachine: {where} (range)")
    summary = {}
    for name in names:
        ds = datasets.get(name)
        summary[name], lines = summarise(cells, ds, plan, caches)
        count = next((c["count"] for c in cells if c["dataset"] == name), 0)
        print(f"\n{ds.label}: {count:,} images a cell (warm: on for at least "
              f"{max((c.get('min_seconds') or 0) for c in cells):g} s), batch {ds.model.batch}\n")
        print("\n".join(lines))
        diffs = found["first_batch_max_difference"].get(name)
        if diffs is not None:
            worst = max(diffs.values(), default=0.0)
            print(f"\nfirst batch against caffe lmdb's: max |difference| {worst:.3g} over {len(diffs)} rows" +
                  ("" if worst < 1e-5 else "; differ: " + ", ".join(k for k, v in diffs.items() if v >= 1e-5)))
    failed = [c for c in cells if "error" in c]
    for c in failed:
        print(f"failed: {c['dataset']} {c['cache']} {row_label(c['loader'], c['form'], c['threads'])}: "
              f"{c['error'][:300]}")
    if figure_path:
        figure(summary, {n: plan for n in names}, caches, figure_path,
               f"The same LMDB and PNG files through Caffe, DALI (CPU) and PyTorch's DataLoader\n{where}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
