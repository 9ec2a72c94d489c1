#!/usr/bin/env python3
"""Caffe's data path beside the loaders people would pick instead (NVIDIA DALI on the CPU,
PyTorch's DataLoader), on the same bytes, the same host and Caffe's transform, warm and cold.

  make peers                      # once: .venv-peers with DALI 2.4 and PyTorch 2.13 (CPU builds)
  python benchmarks/peers.py [--datasets mnist,cifar10,imagenet] [--caches warm,cold] [--rounds 3]
                             [--loaders caffe,dali,torch] [--forms lmdb,lmdb-coalesced,images] [--images N]
                             [--json FILE] [--figure FILE]
  python benchmarks/peers.py --from FILE.json [--figure FILE]   # the tables of a recorded run

Rows, for each dataset, all reading the train split's first images in key order (the same
images for every row) and delivering float32 N x C x H x W batches of the net's batch size
with Caffe's transform (crop at a random place and random mirror where the net has them, the
per-pixel mean subtracted, scaled):
  caffe lmdb     Caffe's Data layer on the LMDB (stock memory-mapped cursor), one prefetch thread,
                 then transform_threads 2..cores (patch 0016: the same batches on more threads)
  caffe lmdb-coalesced   the same with LMDBIO's coalesced reads (lmdb_read: coalesced, patch 0012)
  caffe images   ImageData on the PNG files, decode_threads 1..cores
  dali lmdb      DALI readers.caffe on the same LMDB, num_threads 1..cores
  dali images    DALI readers.file + decoders.image on the same PNGs, num_threads 1..cores
  torch lmdb     DataLoader over the LMDB's Datums (py-lmdb + Caffe's caffe_pb2), workers 0..cores
  torch images   DataLoader over the same PNGs (Pillow), workers 0..cores (0: the main process)
Caffe's rows are built from the backend's own data layer (Backend.data_layer) and read options.

Each cell is one process; its first batch (start-up, queues filled) is outside the clock. Two
numbers per cell: images per second delivered, and images per CPU-second (user + system of all
the process's threads and its worker processes), medians over rounds with the range. Cold: the
page cache dropped before the process starts, and again when its clock starts (what set-up and
the first batch read, and the kernel's read-ahead around it, are not left for the clock). The
data's residency (mincore) is measured after the cache is set and again the moment each cell's
clock starts (the cell waits for it): a warm cell needs >= 95% resident, a cold one <= 5%
(cache_condition), else the cell is kept with the miss as its error and left out of the tables.
Before the timed cells, each row makes one batch with the test phase's transform (centre crop,
no mirror: the same floats whatever the seed), compared with Caffe LMDB's float for float; a
row whose batch differs, or that has nothing to compare, is not measured (its cells are kept
with that error). Needs root for cold cells (drop_caches).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if __name__ == "__main__":  # as a script its folder leads sys.path, and this file would hide the peers package
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import processes  # noqa: E402
import toolchain  # noqa: E402
from analysis.peers import left_out, median_range, row_label, summarise  # noqa: E402
from data_prep import backends, build, cache, datasets  # noqa: E402
from experiments.record import COLD_AT_MOST, WARM_AT_LEAST, cache_state  # noqa: E402
from peers import loaders  # noqa: E402

# the peers' environment (make peers); IMGSTORE_PEERS_VENV names another
PEERS_PYTHON = Path(os.environ.get("IMGSTORE_PEERS_VENV") or ROOT / ".venv-peers") / "bin" / "python"
IMAGES = {"mnist": 60000, "cifar10": 50000, "imagenet": 3000}
FORMS = {"lmdb": "lmdb", "lmdb-coalesced": "lmdb", "images": "images"}  # form -> the backend (data folder)
PEER_FORMS = ("lmdb", "images")  # what DALI and the DataLoader read
CAFFE_READ = {"lmdb-coalesced": {"lmdb_read": "coalesced"}}  # a form's read options beyond the backend's defaults
COLORS = {"caffe": "#1b9e77", "dali": "#7570b3", "torch": "#e7298a"}
REFERENCE = ("caffe", "lmdb", 1)  # the row whose first batch every row's must equal
CHECK_IMAGES = 64  # the most images of the first-batch check (ImageNet's batch of 256 would be 158 MB)
SAME = 1e-5  # the largest |difference| of a float that counts as the same


def cache_condition(state, fraction, when="at the clock"):
    """None where `fraction` of the data resident `when` fits the cell's cache state, else why not."""
    if fraction is None:
        return f"not checked {state}: no residency {when}"
    if cache_state(state, fraction) == state:  # the runner's thresholds (experiments/record.py)
        return None
    needs = f">= {WARM_AT_LEAST:.0%}" if state == "warm" else f"<= {COLD_AT_MOST:.0%}"
    return f"not {state}: {fraction:.0%} resident {when} (needs {needs})"


def rows(loaders_wanted, cores, forms=tuple(FORMS)):
    """(loader, form, threads) of every row of these forms; torch's 0 workers is its main process alone."""
    threads = range(1, cores + 1)
    plan = {"caffe": [("caffe", "lmdb", t) for t in threads] + [("caffe", "lmdb-coalesced", 1)] +
                     [("caffe", "images", t) for t in threads],
            "dali": [("dali", form, t) for form in PEER_FORMS for t in threads],
            "torch": [("torch", form, w) for form in PEER_FORMS for w in range(0, cores + 1)]}
    return [row for name in loaders_wanted for row in plan[name] if row[1] in forms]




def transform_spec(dataset, data_root, tmp):
    """The net's transform in training, as the peers' CaffeTransform and DALI take it; the
    mean.binaryproto written as .npy (the peers' environment has no pycaffe)."""
    t, mean = dataset.model.transform, None
    if t.mean_file:
        mean = tmp / f"{dataset.name}-mean.npy"
        np.save(mean, build.read_mean(data_root / dataset.name / "mean.binaryproto"))
    return {"scale": t.scale, "crop": t.crop_size, "mirror": t.mirror, "mean": str(mean) if mean else None}


def source(data_root, dataset, form):
    """The LMDB or the images folder a cell of this form reads."""
    folder = data_root / dataset.name / FORMS[form]
    return folder / "train_lmdb" if FORMS[form] == "lmdb" else folder


def cell_files(data_root, dataset, form, count):
    """The files a cell reads: what cold drops and warm reads."""
    return loaders.cell_files(form, source(data_root, dataset, form), count)


def caffe_read_options(form, threads):
    """The Caffe row's read options: its threads (ImageData's decode threads, the Data layer's
    transform threads on the stock LMDB cursor; patches 0015, 0016), and the form's own."""
    if form == "images":
        return {"decode_threads": threads}
    if form == "lmdb" and threads > 1:
        return {"transform_threads": threads}
    return CAFFE_READ.get(form)


def caffe_cell(cell):
    """Caffe's side of a cell, in this (the project's) environment."""
    import caffe
    caffe.set_mode_cpu()
    dataset, backend = datasets.get(cell["dataset"]), backends.get(FORMS[cell["form"]])
    options = caffe_read_options(cell["form"], cell["threads"])
    mean = Path(cell["data"]) / dataset.name / "mean.binaryproto"
    net_file = backend.write_data_net(Path(cell["tmp"]) / f"{os.getpid()}.prototxt",
                                      Path(cell["data"]) / dataset.name / FORMS[cell["form"]], dataset,
                                      cell["batch"], caffe.TRAIN, options, mean)
    phase = caffe.TRAIN
    if cell.get("phase") == "test":  # the train split read with the test phase's transform
        without_mirror(net_file)
        phase = caffe.TEST
    net = caffe.Net(str(net_file), phase)

    def next_batch():
        net.forward()
        return net.blobs["data"].data.copy()
    first, result = loaders.timed(next_batch, cell["count"] // cell["batch"], cell["batch"], cell["min_seconds"],
                                  loaders.clock_probe(cell))
    if cell.get("first_batch"):
        np.save(cell["first_batch"], first)
    return dict(result, versions={"caffe": toolchain.build_key()})


def without_mirror(net_file):
    """Takes `mirror` out of a data net's transform: Caffe mirrors in every phase where it is set
    (the test phase's centre crop is the phase's own)."""
    from google.protobuf import text_format
    from caffe.proto import caffe_pb2
    net = text_format.Parse(Path(net_file).read_text(), caffe_pb2.NetParameter())
    for layer in net.layer:
        if layer.HasField("transform_param"):
            layer.transform_param.ClearField("mirror")
    Path(net_file).write_text(text_format.MessageToString(net))


def run_cell(cell, files=None, timeout=900):
    """One cell in its own process: the result dict, or {'error': ...}. files: the cell's data,
    whose residency the process is told when its clock starts (a cold cell's cache dropped
    first: what set-up and the first batch read, and the kernel's read-ahead beside it)."""
    if cell["loader"] == "caffe":
        cmd = [str(toolchain.PYTHON), __file__, "--caffe-cell", json.dumps(cell)]
    else:
        cmd = [str(PEERS_PYTHON), str(ROOT / "peers" / "loaders.py"), json.dumps(cell)]
    with tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                             preexec_fn=processes.child_setup())
        try:
            lines = answer_clock(p, cell.get("cache"), files, time.monotonic() + timeout)
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            return {"error": f"no result in {timeout} s"}
        finally:
            p.stdin.close()
            p.stdout.close()
        err.seek(0)
        if p.returncode != 0:
            return {"error": f"exit {p.returncode}: {err.read().strip()[-1500:]}"}
    return json.loads(lines[-1])


def answer_clock(p, state, files, deadline):
    """The lines a cell prints; when one is loaders.CLOCK, makes a cold cell's data cold again
    (set-up and the first batch are over) and answers with the residency (mincore)."""
    import selectors
    lines, pending = [], b""
    with selectors.DefaultSelector() as sel:
        sel.register(p.stdout, selectors.EVENT_READ)
        while True:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                raise subprocess.TimeoutExpired(p.args, deadline)
            chunk = os.read(p.stdout.fileno(), 1 << 16)
            if not chunk:
                return lines + ([pending.decode()] if pending.strip() else [])
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                if line.decode().strip() != loaders.CLOCK:
                    lines.append(line.decode())
                    continue
                if state == "cold":
                    cache.drop_caches()
                try:
                    p.stdin.write(f"{json.dumps(cache.residency(files) if files else None)}\n".encode())
                    p.stdin.flush()
                except BrokenPipeError:  # the cell died: its exit status says why
                    pass


def image_count(a, dataset):
    """The images a cell reads (--images or the dataset's default, whole batches)."""
    batch = dataset.model.batch
    return (min(a.images or IMAGES[dataset.name], _train_split(Path(a.data), dataset).count) // batch) * batch


def cell_spec(a, cell, tmp):
    """A cell as its process takes it: where to read, the transform, the LMDB's key list."""
    data_root, dataset = Path(a.data), datasets.get(cell["dataset"])
    spec = dict(cell, data=str(data_root), tmp=str(tmp), source=str(source(data_root, dataset, cell["form"])),
                transform=a.transforms[dataset.name], shape=a.shapes[dataset.name],
                caffe_pb2=str(toolchain.CAFFE / "python" / "caffe" / "proto" / "caffe_pb2.py"))
    if cell["loader"] == "torch" and cell["form"] == "lmdb":
        spec["keys"] = str(key_list(spec["source"], tmp / f"keys-{dataset.name}.txt"))
    return spec


def key_list(lmdb_path, path):
    """The LMDB's keys for the DataLoader's map-style dataset, listed once a run, before any
    cell sets its cache state (listing them reads the file's leaf pages)."""
    import lmdb
    if not path.exists():
        try:
            loaders.write_keys(lmdb_path, path)
        except lmdb.Error as e:
            raise CellError(f"cannot list the keys of {lmdb_path}: {e}") from e
    return path


class CellError(RuntimeError):
    """A cell that cannot be set up: kept with this as its error."""


def measure(a, dataset, row, cache_state, round_no, tmp, refused=None):
    """One timed cell; refused: why its row is not measured (its first-batch check failed)."""
    loader, form, threads = row
    data_root = Path(a.data)
    count = image_count(a, dataset)
    # warm cells read on past `count` for at least --min-seconds, into the rest of the split (all
    # of it warm); a cold cell reads its `count` images once
    records = _train_split(data_root, dataset).count if cache_state == "warm" else count
    cell = dict(dataset=dataset.name, loader=loader, form=form, threads=threads, cache=cache_state,
                round=round_no, batch=dataset.model.batch, count=count, records=records,
                min_seconds=a.min_seconds if cache_state == "warm" else 0.0)
    if refused:
        return dict(cell, error=refused)
    try:
        spec = cell_spec(a, cell, tmp)  # the key list is made here, before the cache is set
    except CellError as e:
        return dict(cell, error=str(e))
    files = cell_files(data_root, dataset, form, records)
    how, resident = cache.set_and_measure(cache_state, files)
    cell.update(cache_how=how + (", again at the clock" if cache_state == "cold" else ""), resident_before=resident)
    missed = cache_condition(cache_state, resident, f"after {how}")
    if missed:
        return dict(cell, error=missed)
    cell.update(run_cell(dict(spec, cache_how=how, resident_before=resident), files))
    cell["resident_after"] = cache.residency(files)
    missed = "error" not in cell and cache_condition(cache_state, cell.get("resident_at_clock"))
    return dict(cell, error=missed) if missed else cell


def check_first_batches(a, dataset, plan, tmp):
    """Every row's first batch with the test phase's transform against Caffe LMDB's (made
    whatever --loaders says). Returns the check cells, {row label: max |difference|} and
    {row: why it is refused} for the rows that differ or have nothing to compare."""
    batch = min(dataset.model.batch, CHECK_IMAGES)
    checks, batches = [], {}
    for row in dict.fromkeys([REFERENCE] + plan):
        loader, form, threads = row
        first = tmp / f"check-{dataset.name}-{loader}-{form}-{threads}.npy"
        cell = dict(dataset=dataset.name, loader=loader, form=form, threads=threads, phase="test", batch=batch,
                    count=batch, records=batch, min_seconds=0.0)
        try:
            cell.update(run_cell(dict(cell_spec(a, cell, tmp), first_batch=str(first))))
        except CellError as e:
            cell["error"] = str(e)
        checks.append(cell)
        batches[row] = cell.get("error") or (first if first.exists() else "no first batch written")
    diffs, refused = {}, {}
    reference = batches[REFERENCE]
    for row in plan:
        mine = batches[row]
        if isinstance(reference, str):
            refused[row] = f"first batch not compared: no reference (caffe lmdb's check: {reference[:300]})"
        elif isinstance(mine, str):
            refused[row] = f"first batch not compared: {mine[:1500]}"
        else:
            diffs[row_label(*row)] = diff = batch_difference(np.load(mine), np.load(reference))
            if not diff <= SAME:
                refused[row] = f"first batch differs from caffe lmdb's: max |difference| {diff:.3g}"
    return checks, diffs, refused


def batch_difference(batch, reference):
    """Max |difference| of two batches; inf where their shapes differ (nothing comparable)."""
    return float(np.abs(batch - reference).max()) if batch.shape == reference.shape and batch.size else float("inf")


def _train_split(data_root, dataset):
    """The train split as the LMDB's manifest describes it (count, C x H x W as stored)."""
    return build.load_manifest(data_root / dataset.name, "lmdb").splits["train"]








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
    p.add_argument("--forms", default=",".join(FORMS), help="the rows of these forms only")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--checks-only", action="store_true",
                   help="each row's first-batch check against Caffe LMDB's, no timed cells")
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
    unknown = set(a.forms.split(",")) - set(FORMS)
    if unknown:
        p.error(f"unknown form {', '.join(sorted(unknown))}; choose from {', '.join(FORMS)}")
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
    plan = rows(wanted, a.threads, a.forms.split(","))
    checks, diffs, refused = [], {}, {}
    for name in names:
        found_checks, diffs[name], refused[name] = check_first_batches(a, datasets.get(name), plan, tmp)
        checks += found_checks
        print(f"{name}: first batches compared with caffe lmdb's: {len(diffs[name])} of {len(plan)} rows; "
              f"refused: {', '.join(row_label(*r) for r in refused[name]) or 'none'}", file=sys.stderr, flush=True)
    rounds = 0 if a.checks_only else a.rounds
    total, done, started, cells = len(names) * len(plan) * len(caches) * rounds, 0, time.time(), []
    for round_no in range(rounds):
        for name in names:
            for state in caches:
                for row in plan:
                    cell = measure(a, datasets.get(name), row, state, round_no, tmp, refused[name].get(row))
                    cells.append(cell)
                    done += 1
                    left = (time.time() - started) / done * (total - done)
                    status = f"error: {cell['error'][:200]}" if "error" in cell else \
                        f"{cell['images'] / cell['seconds']:,.0f} images/s"
                    print(f"[{done}/{total}, ~{left / 60:.0f} min left] round {round_no + 1} {name} {state} "
                          f"{row_label(*row)}: {status}", file=sys.stderr, flush=True)
    found = {"cells": cells, "machine": runner.environment(), "rounds": a.rounds, "caches": caches,
             "thresholds": {"warm_at_least": WARM_AT_LEAST, "cold_at_most": COLD_AT_MOST, "same": SAME},
             "first_batch_checks": checks, "first_batch_max_difference": diffs,
             "first_batch_refused": {n: {row_label(*r): why for r, why in refused[n].items()} for n in names}}
    if a.json:
        a.json.write_text(json.dumps(found, indent=1))
    return report(found, a.figure)


def first_batch_line(found, name):
    """What the record says of a dataset's first-batch check."""
    diffs = found["first_batch_max_difference"].get(name)
    if not diffs:
        return "first batch NOT compared with caffe lmdb's (no row had a batch and a reference)"
    worst = max(diffs.values())
    phase = "the test phase's transform" if "first_batch_checks" in found else "the timed cells' first batches"
    return (f"first batch against caffe lmdb's ({phase}): max |difference| {worst:.3g} over {len(diffs)} rows" +
            ("" if worst <= SAME else "; differ: " + ", ".join(k for k, v in diffs.items() if not v <= SAME)))


def clock_residency_line(cells):
    """The residency at the clock of the cells that measured it, by cache state."""
    parts = []
    for state in ("warm", "cold"):
        seen = [c["resident_at_clock"] for c in cells if c["cache"] == state and c.get("resident_at_clock") is not None]
        if seen:
            parts.append(f"{state} {min(seen):.1%}-{max(seen):.1%} ({len(seen)} cells)")
    return "resident at the clock: " + ("; ".join(parts) if parts else "not measured (a record from before the check)")


def report(found, figure_path=None):
    """Prints the tables of a run (or of its --json, with --from) and draws its figure; 1 when
    a cell failed."""
    from monitor import cpu_probe
    cells, machine = found["cells"], found["machine"]
    caches = found.get("caches") or list(dict.fromkeys(c["cache"] for c in cells))
    names = list(dict.fromkeys([c["dataset"] for c in cells] + list(found["first_batch_max_difference"])))
    plan = list(dict.fromkeys((c["loader"], c["form"], c["threads"]) for c in cells))
    where = (f"{machine['cpu_model']}, {machine['cpu_cores']} cores, CPU probe {cpu_probe.rate(machine) or '?'} "
             f"images/s per core; {found['rounds']} round(s): medians")
    print(f"\nmachine: {where} (range)")
    summary = {}
    for name in names:
        ds = datasets.get(name)
        if not cells:  # --checks-only
            print(f"\n{ds.label}: " + first_batch_line(found, name))
            continue
        summary[name], lines = summarise(cells, ds, plan, caches)
        count = next((c["count"] for c in cells if c["dataset"] == name), 0)
        print(f"\n{ds.label}: {count:,} images a cell (warm: on for at least "
              f"{max((c.get('min_seconds') or 0) for c in cells):g} s), batch {ds.model.batch}\n")
        print("\n".join(lines))
        print("\n" + first_batch_line(found, name))
    print("\n" + clock_residency_line(cells))
    if found.get("status"):
        print(f"status: {found['status']}")
    failed = [c for c in cells if "error" in c]
    for c in failed:
        print(f"failed: {c['dataset']} {c['cache']} {row_label(c['loader'], c['form'], c['threads'])}: "
              f"{c['error'][:300]}")
    if not cells:
        failed = [(n, label, why) for n, rows_refused in found.get("first_batch_refused", {}).items()
                  for label, why in rows_refused.items()]
        for name, label, why in failed:
            print(f"failed check: {name} {label}: {why[:300]}")
    if figure_path and cells:
        figure(summary, {n: plan for n in names}, caches, figure_path,
               f"The same LMDB and PNG files through Caffe, DALI (CPU) and PyTorch's DataLoader\n{where}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
