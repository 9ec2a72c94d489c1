#!/usr/bin/env python3
"""The instrument's calibration: each parameter of the emulated machines fitted on one named
measurement, and every other number a prediction held against real data.

  python benchmarks/calibration.py fit            # each fitted value, from its named cell
  python benchmarks/calibration.py fit --check    # exit 1 if models/accelerators.json or the
                                                  # paper2016 disk differ from the fit
  python benchmarks/calibration.py fit --write    # write the fitted values into accelerators.json
  python benchmarks/calibration.py table          # the fidelity tables from the folders the
                                                  # catalogue names (--h100, --paper2016, --out: others)

"""
# The command line only: the model (the cells, the fits, the paper's reference values) is
# experiments/calibration.py, the fidelity tables analysis/fidelity.py.
import argparse
import json
import sys
from pathlib import Path

from analysis import fidelity, readme
from experiments import accelerators
from experiments.calibration import FOLDERS, WHAT_IS_FITTED, differences, fitted, write_profiles

ROOT = Path(__file__).resolve().parents[1]


def cmd_fit(a):
    fits, disk = fitted()
    for name, (nets, link) in fits.items():
        for net, v in nets.items():
            print(f"{name} {net}: train_ms {v['train_ms']}, test_ms {v['test_ms']}  <- {v['fitted_on']}")
        print(f"{name} host copies: {link['latency_us']} us + bytes at {link['gbps']} GB/s  <- {link['fitted_on']}")
    print(f"paper2016 disk: {disk['riops']} read IOPS  <- {disk['fitted_on']}: {disk['source']}")
    if a.write:
        write_profiles(fits)
        print(f"wrote {accelerators.PROFILES_FILE}")
    diff = differences(accelerators.profiles(), fits, disk)
    for line in diff:
        print("differs: " + line)
    return 1 if a.check and diff else 0


def cmd_table(a):
    h100, paper = fidelity.h100_rows(a.h100), fidelity.paper_rows(a.paper2016)
    steps = a.same_host.split(",") if a.same_host else fidelity.gpu_step_folders()
    same = fidelity.same_host_rows(steps)
    cross = fidelity.cross_host_rows(steps, a.here) if a.here else []
    out = ROOT / a.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "fidelity.json").write_text(json.dumps({"h100": h100, "paper2016": paper, "same_host": same,
                                                   "cross_host": cross,
                                                   "folders": {"h100": a.h100, "paper2016": a.paper2016,
                                                               "same_host": steps, "here": a.here}}, indent=1))
    text = fidelity.markdown(h100, paper, a.h100, a.paper2016, same, cross, a.here)
    (out / "fidelity.md").write_text(text)
    if a.readme:
        readme.replace_block(fidelity.README_BEGIN, fidelity.README_END,
                             fidelity.tables(h100, paper, a.h100, a.paper2016, caveats=False,
                                             same_host=same, cross_host=cross, here_folder=a.here))
    print(text)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__ + WHAT_IS_FITTED, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fit", help="each fitted value from its named cell")
    f.add_argument("--write", action="store_true", help="write the fitted values into models/accelerators.json")
    f.add_argument("--check", action="store_true", help="exit 1 where the files differ from the fit")
    t = sub.add_parser("table", help="the fidelity table: every real cell and paper finding, ours beside it")
    t.add_argument("--h100", default=FOLDERS["emulated_h100"],
                   help=f"emulated-h100 records to hold against {FOLDERS['real_h100']}")
    t.add_argument("--paper2016", default=FOLDERS["paper2016"],
                   help="emulated-2016 records to hold against the paper")
    t.add_argument("--same-host", help="the GPU steps' records, comma-separated folders: real GPU and emulated H100 "
                   "on one host (default: every results/*-calibrate* folder the catalogue lists)")
    t.add_argument("--here", default=FOLDERS["gpu_step_cells"],
                   help="the GPU steps' cells run emulated on this machine, to hold against their real GPU runs")
    t.add_argument("--out", default=FOLDERS["fidelity"])
    t.add_argument("--readme", action="store_true", help="also write the tables (without caveats) into README.md")
    a = ap.parse_args(argv)
    return cmd_fit(a) if a.cmd == "fit" else cmd_table(a)


if __name__ == "__main__":
    sys.exit(main())
