#!/usr/bin/env python3
"""Conversion speed: data_prep (parallel decode, one writer) against Caffe's own
convert_imageset, on the same ImageNet-layout tree of 256x256 PNGs, into LMDB. Checks that
both produce the same keys and Datum bytes, then prints the time ratio.

  python benchmarks/convert_speed.py [--images 2000] [--jobs N]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import processes
import toolchain
from data_prep import build
from data_prep.datasets import imagenet
from data_prep.images import png_bytes
from data_prep.backends.lmdb_store import raw_items

ROOT = Path(__file__).resolve().parents[1]


def make_tree(root, count):
    src = imagenet.standin(count=count, test_count=10, num_classes=20)
    for i, (_, label, pixels) in enumerate(src.train.records()):
        d = root / "train" / f"c{label:03d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"img{i:07d}.png").write_bytes(png_bytes(pixels))
    for c in range(20):
        (root / "train" / f"c{c:03d}").mkdir(parents=True, exist_ok=True)
    (root / "val").mkdir()
    for i, (_, label, pixels) in enumerate(src.test.records()):
        (root / "val" / f"v{i}.png").write_bytes(png_bytes(pixels))
    (root / "val.txt").write_text("".join(f"v{i}.png {l}\n" for i, (_, l, _) in enumerate(src.test.records())))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--images", type=int, default=2000)
    p.add_argument("--jobs", type=int, default=os.cpu_count())
    a = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="convert-bench-"))
    try:
        tree = work / "tree"
        make_tree(tree, a.images)
        classes = sorted(d.name for d in (tree / "train").iterdir() if any(d.iterdir()))
        all_classes = sorted(d.name for d in (tree / "train").iterdir())
        lines = [f"{c}/{f.name} {all_classes.index(c)}\n" for c in classes
                 for f in sorted((tree / "train" / c).iterdir())]
        (work / "list.txt").write_text("".join(lines))
        subprocess.run(["sync"])
        t = time.time()
        subprocess.run([str(toolchain.caffe_tool("convert_imageset")), "--resize_height=256", "--resize_width=256",
                        str(tree / "train") + "/", str(work / "list.txt"), str(work / "caffe_lmdb")],
                       check=True, capture_output=True, preexec_fn=processes.child_setup())
        caffe_s = time.time() - t
        t = time.time()
        build.prepare("imagenet", ["lmdb"], work / "ours", source_path=tree, jobs=a.jobs, progress=False,
                      log=lambda *_: None)
        ours_s = time.time() - t  # includes the small val split and the mean
        same = list(raw_items(work / "caffe_lmdb")) == list(raw_items(work / "ours" / "imagenet" / "lmdb" / "train_lmdb"))
        print(f"{a.images} PNGs 256x256 -> LMDB on {os.cpu_count()} cores ({a.jobs} jobs)")
        print(f"convert_imageset: {caffe_s:.2f} s   data_prep: {ours_s:.2f} s   speed-up: {caffe_s / ours_s:.2f}x")
        print(f"identical keys and Datum bytes: {same}")
        return 0 if same else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
