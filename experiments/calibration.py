"""The instrument's calibration: each parameter of the emulated machines fitted on one named
measurement (the cells, the fits, the paper's reference values). Every other number is a
prediction, held against real data by the fidelity tables (analysis/fidelity.py); the command
line is benchmarks/calibration.py.

What is fitted, and on what: WHAT_IS_FITTED (also the command's --help).
"""
import json
from dataclasses import dataclass
from pathlib import Path

import catalogue
from experiments import accelerators, caffe_log, machines, record

ROOT = Path(__file__).resolve().parents[1]
# Every results folder the calibration and its fidelity tables name, in one place.
FOLDERS = {
    "real_h100": catalogue.relative("h100"),  # the real H100's runs: the h100 profile's fitting cells, the tables' reference
    "paper2016": catalogue.relative("ci-2core-paper2016-calibrated"),  # the disk's fitting run; the 2016 machine's matrix
    "emulated_h100": catalogue.relative("ci-2core-emulated-h100-calibrated"),  # the emulated H100's matrix on this machine
    "pre_calibration": catalogue.relative("ci-2core-emulated-h100"),  # the same cells on another CI machine, before the fit
    "decoder": f"{catalogue.relative('ci-2core-decoder')}/decoder.json",  # benchmarks/decoder.py: two OpenCV builds, same files
    "gpu_step_cells": catalogue.relative("ci-2core-gpu-step-cells"),  # the GPU steps' cells run emulated on this machine
    "gpu_steps": [catalogue.relative(name) for name in catalogue.named("*-calibrate*")],  # the GPU steps (gpu_calibrate.py)
    "fidelity": catalogue.relative("calibration"),  # where the fidelity tables are written
}
WHAT_IS_FITTED = """What is fitted, and on what (everything else is a prediction):
  h100 LeNet / cifar10_quick   train_ms: the real H100's LMDB warm run of that net (LMDB
                               delivers >= 10x what the net eats), its solver seconds less its
                               test passes, over the training iterations in that window;
                               test_ms: the same run's test passes, from the log's stamps
  h100 host copies             latency per copy: the real H100's MNIST HDF5 warm run (HDF5Data
                               copies each row to the device on the solver thread), its solver
                               seconds less the fitted compute and the bytes over the link's
                               bandwidth, over its copies; bandwidth: PCIe 5.0 x16 (published)
  titanx2016 LeNet / cifar10   the paper's fastest times (~20 s; LevelDB warm 38.06 s)
  titanx2016 host copies       latency: the paper's MNIST HDF5 = 1.28 x the fastest (Section
                               3.1); bandwidth: PCIe 3.0 x16 (published)
  paper2016 disk IOPS          the paper's MNIST image files cold, 427.16 s, from our run of
                               that cell at the IOPS of the previous step (DISK_CELL): its read
                               requests R as the throttle counted them (the device's counter in
                               runs recorded before the throttle's was) and the time not spent
                               on them, T0 = wall - R / IOPS; fitted IOPS = R / (427.16 - T0)
CaffeNet's times are not fitted on any training run (none on a real GPU yet): the h100 one is
`caffe time`, the titanx2016 one an estimate from published benchmarks; both say so.
"""

REFERENCE = json.loads((ROOT / "analysis" / "paper_reference.json").read_text())
FLOAT_BYTES = 4
# PCI-SIG figures per direction, 128b/130b encoding: Gen3 x16 8 GT/s -> 15.75 GB/s, Gen5 x16
# 32 GT/s -> 63.0 GB/s. Upper bounds: copies from pageable memory get less, which the fitted
# per-copy latency absorbs for the small copies that dominate (HDF5 rows).
PCIE_GBPS = {"h100": (63.0, "PCIe 5.0 x16, 32 GT/s x 16 lanes, 128b/130b: 63.0 GB/s per direction (PCI-SIG)"),
             "titanx2016": (15.75, "PCIe 3.0 x16, 8 GT/s x 16 lanes, 128b/130b: 15.75 GB/s per direction (PCI-SIG)")}
NET_OF = {"mnist": "lenet", "cifar10": "cifar10_quick", "imagenet": "caffenet"}
STOCK_OF = {"mnist", "cifar10"}  # datasets whose stock solver the table knows (STOCK)
# the stock solvers as they run: iterations, test batches per pass, batch sizes, input shape
STOCK = {"lenet": dict(iters=10_000, test_iter=100, batch=64, test_batch=100, shape=(1, 28, 28)),
         "cifar10_quick": dict(iters=5_000, test_iter=100, batch=100, test_batch=100, shape=(3, 32, 32))}
TEST_INTERVAL = 500  # both stock solvers' test_interval


def passes_tested(iterations):
    """Test passes a solver makes in `iterations`: at iteration 0 and every TEST_INTERVAL."""
    return iterations // TEST_INTERVAL + 1


def images_read(dataset, iterations=None):
    """Images a run of the stock solver reads, cut to `iterations` where it was."""
    s = STOCK[NET_OF[dataset]]
    iterations = iterations or s["iters"]
    return iterations * s["batch"] + passes_tested(iterations) * s["test_iter"] * s["test_batch"]


@dataclass
class Cell:
    """One measured run: where it is, what its record and log say."""
    folder: str
    dataset: str
    backend: str
    cache: str
    riops: int = None  # the read IOPS limit it ran under, where a folder holds runs under several
    run: str = None  # the run's id, where the cell holds several

    def load(self):
        rs = [r for r in record.recorded(ROOT / self.folder, self.dataset)
              if r.ok and (r.backend, r.cache) == (self.backend, self.cache)
              and (self.riops is None or (r.limits or {}).get("riops") == self.riops)
              and (self.run is None or r.run_id == self.run)]
        if len(rs) != 1:
            raise SystemExit(f"{self}: expected one ok run, found {len(rs)}")
        r = rs[0]
        return r, caffe_log.parse((ROOT / self.folder / r.run_dir / "caffe.log").read_text(errors="replace"))

    def name(self):
        r, _ = self.load()
        return f"{self.folder}/{self.dataset} {self.backend} {self.cache}, run {Path(r.run_dir).name}"


H100_NET_CELLS = {"lenet": Cell(FOLDERS["real_h100"], "mnist", "lmdb", "warm"),
                  "cifar10_quick": Cell(FOLDERS["real_h100"], "cifar10", "lmdb", "warm")}
H100_COPY_CELL = Cell(FOLDERS["real_h100"], "mnist", "hdf5", "warm")
# The disk is fitted by iteration on this one cell: a run at the last fitted IOPS gives the next.
# Step 1: the ci-2core-paper2016 folder (150 IOPS, an Intel Xeon CI machine) gave 388; step 2 (388
# IOPS, an AMD EPYC CI machine) gave 287. Both counted the device's requests, and the host's DAMON
# pageout evicted files between epochs (1.27-2.21 reads per file, varying run to run). Step 3
# (below: 287 IOPS, the run's pages kept from the reclaimer, the throttle's own count: 1.08 reads
# per file) gives the value in force.
DISK_CELL = Cell(FOLDERS["paper2016"], "mnist", "images", "cold", riops=287,
                 run="20261124-175151-0765a6")


EARLIER_DISK_STEPS = (287, 388)  # the IOPS of the disk fit's earlier steps, newest first


# where a profile's net time comes from when no training run fitted it (models/accelerators.json)
UNFITTED_COMPUTE = {"h100": "`caffe time`, not fitted on a training run",
                    "titanx2016": "an estimate from published benchmarks"}
H100_FIT_CELLS = [*((c, f"fitted (h100 {net} train_ms, test_ms)") for net, c in H100_NET_CELLS.items()),
                  (H100_COPY_CELL, "fitted (h100 copy latency)")]


def hdf5_copies(net, work):
    """(copies, bytes) HDF5Data makes to the device for `work` (caffe_log.timed_compute):
    one per row and top (data, label) of every batch (HDF5DataLayer::Forward_gpu)."""
    s = STOCK[net]
    train, forwards, test = work
    rows = (train + forwards) * s["batch"] + test * s["test_batch"]
    c, h, w = s["shape"]
    return 2 * rows, rows * (c * h * w + 1) * FLOAT_BYTES


def fit_h100_net(net):
    r, parsed = H100_NET_CELLS[net].load()
    train, forwards, _ = caffe_log.timed_compute(parsed)
    test_seconds = sum(parsed["test_pass_seconds"])
    train_ms = 1000 * (r.solver_seconds - test_seconds) / (train + forwards * accelerators.FORWARD_SHARE)
    return {"train_ms": round(train_ms, 4), "test_ms": r.test_ms_per_iteration,
            "fitted_on": H100_NET_CELLS[net].name(),
            "source": f"fitted: {r.solver_seconds:.3f} solver s less {test_seconds:.3f} s of test passes, "
                      f"over {train} training iterations (+{forwards} forward); test_ms from the same log's "
                      f"{len(parsed['test_pass_seconds'])} test passes"}


def fit_host_latency(compute, net, solver_seconds, work, gbps):
    """Per-copy latency (us) that makes `compute` plus HDF5Data's copies take solver_seconds."""
    copies, nbytes = hdf5_copies(net, work)
    extra = solver_seconds - compute.seconds(work) - nbytes / (gbps * 1e9)
    return 1e6 * extra / copies, copies


def fit_h100(nets=None):
    nets = nets or {net: fit_h100_net(net) for net in H100_NET_CELLS}
    r, parsed = H100_COPY_CELL.load()
    lenet = nets["lenet"]
    compute = accelerators.Compute("emulated", "h100", lenet["train_ms"], lenet["test_ms"])
    gbps, gbps_source = PCIE_GBPS["h100"]
    latency, copies = fit_host_latency(compute, "lenet", r.solver_seconds, caffe_log.timed_compute(parsed), gbps)
    link = {"latency_us": round(latency, 3), "gbps": gbps, "fitted_on": H100_COPY_CELL.name(),
            "source": f"latency fitted: {r.solver_seconds:.3f} solver s less the fitted LeNet compute and the "
                      f"bytes at {gbps} GB/s, over its {copies:,} copies; bandwidth: {gbps_source}"}
    return nets, link


PAPER_FASTEST_MNIST_S = 20.0  # the paper's fastest MNIST backends, "~20 s" (Section 3.1; no exact value)


def paper_seconds(dataset, backend, cache):
    for row in REFERENCE["training_seconds"]:
        if (row["dataset"], row["backend"], row["cache"]) == (dataset, backend, cache):
            return row["mean"]
    raise KeyError((dataset, backend, cache))


def finding(fid):
    return next(f for f in REFERENCE["findings"] if f["id"] == fid)


def paper_work(net):
    s = STOCK[net]
    return s["iters"], 0, passes_tested(s["iters"]) * s["test_iter"]


def fit_titanx2016():
    """The paper's own cells: LeNet ~20 s for its fastest backends (Section 3.1, no exact
    value), cifar10_quick 38.06 s (LevelDB warm, Figure 7); test = train/3 x the batch ratio
    (the paper has no logs to measure it from). These seconds are wall times, start-up
    included: upper bounds on the compute."""
    nets = {}
    for net, seconds, where in [("lenet", PAPER_FASTEST_MNIST_S, "the paper's fastest MNIST backends, ~20 s (Section 3.1)"),
                                ("cifar10_quick", paper_seconds("cifar10", "leveldb", "warm"),
                                 "the paper's CIFAR-10 LevelDB warm, 38.06 s (Section 3.2 / Figure 7)")]:
        s = STOCK[net]
        test_share = accelerators.FORWARD_SHARE * s["test_batch"] / s["batch"]
        train, _, test = paper_work(net)
        train_ms = 1000 * seconds / (train + test * test_share)
        nets[net] = {"train_ms": round(train_ms, 4), "test_ms": round(train_ms * test_share, 4), "fitted_on": where,
                     "source": f"fitted: {seconds} s = train_ms x ({train:,} + {test:,} x {test_share:.3f}); "
                               "test = train/3 x test batch / batch (not measured); wall time: an upper bound"}
    gbps, gbps_source = PCIE_GBPS["titanx2016"]
    ratio = finding("mnist-hdf5")["paper_ratio"]
    lenet = nets["lenet"]
    compute = accelerators.Compute("emulated", "titanx2016", lenet["train_ms"], lenet["test_ms"])
    hdf5_seconds = ratio * PAPER_FASTEST_MNIST_S
    latency, copies = fit_host_latency(compute, "lenet", hdf5_seconds, paper_work("lenet"), gbps)
    link = {"latency_us": round(latency, 3), "gbps": gbps,
            "fitted_on": f"the paper's MNIST HDF5 = {ratio} x the fastest (~20 s) (Section 3.1)",
            "source": f"latency fitted: {hdf5_seconds:.1f} s less the fitted LeNet compute and the bytes at "
                      f"{gbps} GB/s, over its {copies:,} copies; bandwidth: {gbps_source}"}
    return nets, link


def disk_reads(r):
    """(read requests a cold run made, what counted them): the throttle's own count of the reads it
    paced where the record has it, else the device's counter (machine-wide, after the block
    layer merged requests; records before 2026-11-24 have only that one)."""
    paced = (r.limits or {}).get("throttled_reads")
    if paced:
        return paced["read_ios"], "the throttle paced"
    return r.monitor["read_requests_total"], "the device counted"


def fit_disk():
    r, _ = DISK_CELL.load()
    asked = r.limits["riops"]
    requests, counted = disk_reads(r)
    target = paper_seconds("mnist", "images", "cold")
    t0 = r.wall_seconds - requests / asked
    iops = requests / (target - t0)
    return {"riops": round(iops), "fitted_on": DISK_CELL.name() + f" (at {asked} IOPS)",
            "source": f"{requests:,.0f} read requests ({counted}) in {r.wall_seconds:.1f} s at {asked} IOPS: "
                      f"{t0:.1f} s not spent on them; {requests:,.0f} / ({target} - {t0:.1f}) = {iops:.0f} IOPS "
                      f"gives the paper's {target} s"}


def fitted():
    h100_nets, h100_link = fit_h100()
    tx_nets, tx_link = fit_titanx2016()
    return {"h100": (h100_nets, h100_link), "titanx2016": (tx_nets, tx_link)}, fit_disk()


def differences(profiles, fits, disk):
    """Where models/accelerators.json or the paper2016 disk differ from the fit."""
    out = []
    for name, (nets, link) in fits.items():
        p = profiles.get(name, {})
        for net, values in nets.items():
            for k in ("train_ms", "test_ms"):
                if p.get(net, {}).get(k) != values[k]:
                    out.append(f"{name}.{net}.{k}: {p.get(net, {}).get(k)} in the file, {values[k]} fitted")
        for k in ("latency_us", "gbps"):
            if (p.get("host_copies") or {}).get(k) != link[k]:
                out.append(f"{name}.host_copies.{k}: {(p.get('host_copies') or {}).get(k)} in the file, {link[k]} fitted")
    if machines.get("paper2016").limits["riops"] != disk["riops"]:
        out.append(f"paper2016 riops: {machines.get('paper2016').limits['riops']} in experiments/machines.py, "
                   f"{disk['riops']} fitted")
    return out


def write_profiles(fits):
    data = json.loads(accelerators.PROFILES_FILE.read_text())
    for name, (nets, link) in fits.items():
        for net, values in nets.items():
            data[name][net] = values
        data[name]["host_copies"] = link
    tmp = accelerators.PROFILES_FILE.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(accelerators.PROFILES_FILE)


def fits_titanx_train_ms(net):
    return fit_titanx2016()[0][net]["train_ms"]
