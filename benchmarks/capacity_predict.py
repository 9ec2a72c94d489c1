"""imgstore capacity --predict --accelerator T: each backend's N (the solvers one host feeds at
AU >= 0.90, as far as the data path's CPU allows) predicted on this host from its data-path probe
(benchmarks/data_path.py probe(); the model: experiments/data_path_model.py cpu_allows), in
seconds, without a capacity sweep. The newest data_path_probe.json of this machine (same boot)
under the catalogue's host-check, no older than MAX_AGE_H, is used; without one the probe runs
first (about a minute on 2 cores; its data prepared under data/host-check/ where missing) and
its file is written into this host's host-check folder.

  imgstore capacity --predict --accelerator h100
  imgstore capacity --predict --accelerator 2.5ms --probe FILE   # a given probe, nothing run

main(argv) is called by benchmarks/capacity.py when its arguments hold --predict (that flag taken out).

Exit status: 0 printed; 1 the probe's runs failed; 2 refused (bad input).
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

import catalogue
from benchmarks import data_path, host_check
from experiments import accelerators, data_path_model, runner
from monitor import cpu_probe

MAX_AGE_H = 24  # a probe file older than this is measured again


def recent_probe(root=None, boot=None, max_age_h=MAX_AGE_H):
    """The newest data_path_probe.json under `root` (the catalogue's host-check) made in boot
    `boot` (this machine's) on the whole host (no cpuset or quota) within max_age_h hours, or None."""
    root, boot = Path(root or catalogue.folder("host-check")), boot or runner.boot_id()
    found = []
    for path in root.glob("*/" + host_check.data_path_probe_file(".").name):
        probe = json.loads(path.read_text())
        if time.time() - path.stat().st_mtime <= max_age_h * 3600 and probe.get("boot_id") == boot \
                and not probe.get("shape"):
            found.append(path)
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def measure(log):
    """Runs the data-path probe into this host's host-check folder (named by its CPU probe, as
    make host-check names it); returns the probe file's path and the probe's failures."""
    pixels = cpu_probe.measure().get(cpu_probe.PIXELS)
    out = catalogue.folder("host-check") / host_check.host_name(runner._cpu_model(), os.cpu_count(), pixels)
    out.mkdir(parents=True, exist_ok=True)
    a = host_check.parser().parse_args([])
    failed = host_check.measure_data_path(host_check.CELLS, a, out, log)
    return host_check.data_path_probe_file(out), failed


def lines(probe, accelerator, cores):
    """The table: per probed backend and data set, images/s, what 0.90 of one accelerator eats,
    one prefetch thread's share of it, and N."""
    rows = [f"| data set / backend | images/s (n) | needed at AU 0.90 | one thread's share | N on {cores} cores |",
            "|---|---|---|---|---|"]
    for key, cell in sorted((probe.get("cells") or {}).items()):
        dataset, backend = cell["dataset"], cell["backend"]
        allows = data_path_model.cpu_allows(probe, dataset, backend, accelerator, cores)
        rate = cell.get("images_per_s") or {}
        rows.append(f"| {key} | {host_check.fmt(rate.get('median'), ',.0f')} ({rate.get('n', 0)}) | "
                    f"{data_path_model.needed_per_second(dataset, accelerator):,.0f} | "
                    f"{host_check.fmt(allows and allows[1])} | {host_check.fmt(allows and allows[0], '.1f')} |")
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--accelerator", required=True, help="a step time such as 2.5ms, or a profile of "
                   f"models/accelerators.json: {', '.join(accelerators.profiles())}")
    p.add_argument("--probe", type=Path, help="a data_path_probe.json to predict from (default: this machine's "
                   f"newest within {MAX_AGE_H} h, or a new probe)")
    p.add_argument("--cores", type=float, default=os.cpu_count(), help="the host's cores (default: %(default)s)")
    a = p.parse_args(argv)
    try:
        for dataset in ("mnist", "cifar10", "imagenet"):
            data_path_model.compute_of(a.accelerator, dataset)
    except accelerators.AcceleratorError as e:
        p.error(str(e))
    if a.accelerator.strip().endswith("ms") and not data_path_model.compute_of(a.accelerator, "mnist").ms_per_iteration:
        p.error("--accelerator: a step time above 0 ms (at 0 ms no data path keeps up)")
    if a.probe and not a.probe.is_file():
        p.error(f"--probe: {a.probe}: no such file")
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    path, failed = (a.probe, []) if a.probe else (recent_probe(), [])
    if path is None:
        log("no recent data-path probe of this machine: probing first")
        path, failed = measure(log)
    log(f"data-path probe: {path}")
    probe = json.loads(path.read_text())
    print(f"The N the data path's CPU allows at {a.accelerator} (AU >= 0.90), predicted from this host's data-path "
          f"probe ({path}):")
    print("\n".join(lines(probe, a.accelerator, a.cores)))
    for f in probe.get("failed") or []:
        print(f"failed: {f}")
    return 1 if failed else 0

