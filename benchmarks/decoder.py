#!/usr/bin/env python3
"""Image decoding, one decoder against another on the same files: images/s that Caffe's
ImageData layer delivers to a 0 ms accelerator (as benchmarks/data_path.py), warm, with
Debian's OpenCV and with the minimal OpenCV build the GPU bundle carries
(device/opencv_minimal.sh: same version and sonames, PNG and JPEG only), in alternating
rounds. The real H100 image-file runs decoded with the bundle's build, the emulated ones here
with Debian's: this says how much of their difference the decoder can be.

  python benchmarks/decoder.py [--datasets mnist,cifar10] [--rounds 3] [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.data_path import ITERATIONS, delivered
from data_prep import build, datasets
from experiments import runner
from experiments.config import RunConfig

ROOT = Path(__file__).resolve().parents[1]


def minimal_opencv_lib():
    """The bundle's minimal OpenCV (built on first use, ~10 minutes on 2 cores)."""
    prefix = subprocess.run([str(ROOT / "device" / "opencv_minimal.sh")], check=True, capture_output=True,
                            text=True).stdout.strip().splitlines()[-1]
    return str(Path(prefix) / "lib")


def rate(dataset, data_root, out, library_path):
    """One warm run of the image files at 0 ms with LD_LIBRARY_PATH set as given."""
    saved = os.environ.get("LD_LIBRARY_PATH")
    os.environ.pop("LD_LIBRARY_PATH", None)
    if library_path:
        os.environ["LD_LIBRARY_PATH"] = library_path
    try:
        iters = ITERATIONS[dataset]
        config = RunConfig(dataset, "images", "warm", iters=iters, test_interval=iters, cpu=True, accelerator="0ms",
                           data=str(data_root), out=str(out), quiet=True)
        r = runner.run(config, log=lambda *_: None)
        return delivered(r, datasets.get(dataset).model.batch), r.environment.get("image_decoder")
    finally:
        os.environ.pop("LD_LIBRARY_PATH", None)
        if saved is not None:
            os.environ["LD_LIBRARY_PATH"] = saved


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default="mnist,cifar10")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--data", default=str(ROOT / "data"))
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    minimal = minimal_opencv_lib()
    with tempfile.TemporaryDirectory(prefix="decoder-") as scratch:
        return measure_decoders(a, minimal, Path(scratch))


def measure_decoders(a, minimal, out):
    """Measures both OpenCV builds on each dataset's image files (run files in out); prints the table."""
    result = {"machine": runner.environment(), "cells": {}}
    for name in a.datasets.split(","):
        build.prepare_missing(name, ["images"], a.data, log=lambda m: print(m, file=sys.stderr))
        rates, libs = {"debian": [], "minimal": []}, {}
        for _ in range(a.rounds):
            for which, path in (("debian", None), ("minimal", minimal)):
                value, lib = rate(name, Path(a.data), out, path)
                rates[which].append(value)
                libs[which] = lib
        med = {k: statistics.median(v) for k, v in rates.items()}
        print(f"{datasets.get(name).label}, image files warm, {a.rounds} rounds (images/s, median (range)):")
        for k, v in rates.items():
            print(f"  {k:<8} {med[k]:10,.0f} ({min(v):,.0f}-{max(v):,.0f})  {libs[k]}")
        print(f"  minimal / debian: {med['minimal'] / med['debian']:.3f}")
        result["cells"][name] = {"rates": rates, "libraries": libs, "ratio": med["minimal"] / med["debian"]}
    if a.json:
        a.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
