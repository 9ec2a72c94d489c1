#!/usr/bin/env python3
"""Does the emulated disk bite? A cold read of N small files (the image-files backend's
access pattern), once unlimited and once inside a cgroup v2 with the runner's io.max read
limits (default: the paper2016 profile's), side by side. Prints files/s, read requests/s
and MB/s as the block device counted them, and the ratio of the achieved read rate to the
limit. Needs root and a cgroup hierarchy (v2 or v1), like the runner's --profile.

  python benchmarks/io_limit.py [--files 3000] [--size 2000] [--profile paper2016 | --riops N --rbps BYTES]
                                [--dir DIR]   (DIR on the disk to test; default: data/ in the repo)
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import processes
from data_prep import cache, locations
from experiments import cgroup, machines
from monitor.sampler import disk_reads

ROOT = Path(__file__).resolve().parents[1]

READER = "import sys, pathlib\nfor p in sorted(pathlib.Path(sys.argv[1]).iterdir()): p.read_bytes()\n"


def make_files(folder, count, size):
    folder.mkdir(parents=True)
    rng = os.urandom  # incompressible bytes, so no layer below can shortcut the reads
    for i in range(count):
        (folder / f"{i:07d}.bin").write_bytes(rng(size))
    subprocess.run(["sync"], check=True)


def cold_read(folder, device, group=None):
    """Drop the caches, read every file in a child process (inside `group` if given), and
    return seconds, read requests and bytes the device served."""
    files = sorted(folder.iterdir())
    how, resident = cache.set_and_measure("cold", files)
    if resident:
        raise cache.CacheError(f"{resident:.1%} of {folder} still cached after {how}: not a cold read")
    before = disk_reads(device)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", READER, str(folder)], check=True,
                   preexec_fn=processes.child_setup(group))
    seconds = time.perf_counter() - t
    after = disk_reads(device)
    return seconds, after[1] - before[1], after[0] - before[0]


def side_by_side(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--files", type=int, default=3000)
    p.add_argument("--size", type=int, default=2000, help="bytes per file (default ~ a CIFAR PNG)")
    p.add_argument("--profile", default="paper2016", choices=sorted(machines.PROFILES))
    p.add_argument("--riops", type=int)
    p.add_argument("--rbps", type=int)
    p.add_argument("--dir", type=Path, default=ROOT / "data")
    p.add_argument("--json", type=Path, help="also write the numbers here")
    a = p.parse_args(argv)
    limits = cgroup.Limits.from_args(profile=a.profile, riops=a.riops, rbps=a.rbps)
    limits.cpus = limits.mem_bytes = None  # only the disk is under test
    a.dir.mkdir(parents=True, exist_ok=True)
    folder = a.dir / f"io-limit-{uuid.uuid4().hex[:8]}"
    try:
        make_files(folder, a.files, a.size)
        location = locations.LocalFolder(folder, sorted(folder.iterdir()))
        device = location.block_device()
        rows = {"unlimited": cold_read(folder, device)}
        group = cgroup.create(limits, "io-limit-" + folder.name[-8:], location)
        try:
            rows["limited"] = cold_read(folder, device, group)
        finally:
            group.remove()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"cold read of {a.files} files of {a.size} B on {device}; limit riops={limits.riops} rbps={limits.rbps}")
    out = {"files": a.files, "size": a.size, "device": device, "riops": limits.riops, "rbps": limits.rbps}
    for name, (seconds, reads, nbytes) in rows.items():
        print(f"  {name:9s}: {seconds:7.2f} s  {a.files / seconds:8.0f} files/s  {reads / seconds:8.0f} reads/s  "
              f"{nbytes / seconds / 1e6:7.1f} MB/s  ({reads} reads)")
        out[name] = {"seconds": seconds, "reads": reads, "bytes": nbytes}
    lim_s, lim_reads, _ = rows["limited"]
    slowdown = lim_s / rows["unlimited"][0]
    achieved = lim_reads / lim_s
    print(f"slowdown under the limit: {slowdown:.1f}x; achieved {achieved:.0f} reads/s = "
          f"{achieved / limits.riops:.2f} of riops={limits.riops}" if limits.riops else f"slowdown {slowdown:.1f}x")
    out.update(slowdown=slowdown, achieved_riops=achieved)
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return 0


def main(argv=None):
    try:
        return side_by_side(argv)
    except (cgroup.CgroupError, cache.CacheError) as e:
        return f"io_limit: {e}"


if __name__ == "__main__":
    sys.exit(main())
