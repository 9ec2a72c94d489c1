"""One core's speed at Caffe's image data path, measured the same way on every host
(monitor/cpu_probe.cpp, one thread, about a second each): PNG decode + Caffe's DataTransformer
of one fixed 256x256 image (images_per_second: the pixel work) and of 28x28 PNG files read in
turn from the page cache (small_files_per_second: the per-file work). Every record keeps both
(environment.cpu_probe), so that runs on two machines of the same kind, or on a GPU host and an
emulating one, can be told apart by how fast their cores decode, and image-file cells can be
scaled from one host to another by the work that matches their images (WORK_OF)."""
import json
import statistics
import subprocess

import processes
import toolchain

SECONDS = 1.0
SAME_HOST_SPREAD = 0.05  # probes further apart than this: runs not merged as one machine's
PIXELS, FILES = "images_per_second", "small_files_per_second"
# which work a dataset's image files are like: MNIST's and CIFAR-10's PNGs are a few hundred
# bytes to 3 KB, read per file; ImageNet's are ~100 KB of pixels
WORK_OF = {"mnist": FILES, "cifar10": FILES, "imagenet": PIXELS}


def measure(seconds=SECONDS):
    """{"images_per_second": ..., ...} or {"error": why}; never raises (a record is still kept)."""
    tool = toolchain.CPU_PROBE
    if not tool.exists():
        return {"error": f"{tool} missing: run `make caffe`"}
    try:
        out = subprocess.run([str(tool), str(seconds)], capture_output=True, text=True, timeout=30 + 2 * seconds,
                             preexec_fn=processes.child_setup())
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"error": f"{tool}: {e}"}
    if out.returncode != 0:
        return {"error": f"{tool} exited {out.returncode}: {out.stderr.strip()[-300:]}"}
    try:
        return json.loads(out.stdout)
    except ValueError:
        return {"error": f"{tool} printed no JSON: {out.stdout[:200]!r}"}


def rate(environment, work=PIXELS):
    """The images/s of one work in a record's environment (a dict), or None where it has no
    probe (or none of that work: records before 2026-11-26 have the pixel work only)."""
    probe = (environment or {}).get("cpu_probe") or {}
    return probe.get(work)


def spread(rates):
    """(max - min) / median of the probes given (None ignored); None when fewer than two."""
    found = [r for r in rates if r]
    if len(found) < 2:
        return None
    return (max(found) - min(found)) / statistics.median(found)


def main(argv=None):
    import argparse
    from pathlib import Path
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seconds", type=float, default=SECONDS)
    p.add_argument("--json", type=Path, help="write the probes and their median here")
    a = p.parse_args(argv)
    probes = [measure(a.seconds) for _ in range(a.repeats)]
    rates = [r[PIXELS] for r in probes if PIXELS in r]
    files = [r[FILES] for r in probes if FILES in r]
    summary = {"probes": probes, "median_images_per_second": statistics.median(rates) if rates else None,
               "spread": spread(rates), "median_small_files_per_second": statistics.median(files) if files else None,
               "small_files_spread": spread(files)}
    for probe in probes:
        print(f"{probe[PIXELS]} images/s, {probe.get(FILES)} small files/s" if PIXELS in probe else probe.get("error"))
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(summary, indent=1))
    return 0 if rates else 1


if __name__ == "__main__":
    raise SystemExit(main())
