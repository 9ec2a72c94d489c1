"""One core's speed at Caffe's image data path, measured the same way on every host
(monitor/cpu_probe.cpp: PNG decode + Caffe's DataTransformer of one fixed image, one thread,
about a second). Every record keeps it (environment.cpu_probe), so that runs on two machines of
the same kind, or on a GPU host and an emulating one, can be told apart by how fast their
cores decode, and image-file cells can be scaled from one host to another."""
import json
import statistics
import subprocess

import toolchain

SECONDS = 1.0
SAME_HOST_SPREAD = 0.05  # probes further apart than this: runs not merged as one machine's


def measure(seconds=SECONDS):
    """{"images_per_second": ..., ...} or {"error": why}; never raises (a record is still kept)."""
    tool = toolchain.CPU_PROBE
    if not tool.exists():
        return {"error": f"{tool} missing: run `make caffe`"}
    try:
        out = subprocess.run([str(tool), str(seconds)], capture_output=True, text=True, timeout=30 + 2 * seconds)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"error": f"{tool}: {e}"}
    if out.returncode != 0:
        return {"error": f"{tool} exited {out.returncode}: {out.stderr.strip()[-300:]}"}
    try:
        return json.loads(out.stdout)
    except ValueError:
        return {"error": f"{tool} printed no JSON: {out.stdout[:200]!r}"}


def rate(environment):
    """The images/s of a record's environment (a dict), or None where it has no probe."""
    probe = (environment or {}).get("cpu_probe") or {}
    return probe.get("images_per_second")


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
    rates = [r["images_per_second"] for r in probes if "images_per_second" in r]
    summary = {"probes": probes, "median_images_per_second": statistics.median(rates) if rates else None,
               "spread": spread(rates)}
    for probe in probes:
        print(probe.get("images_per_second") or probe.get("error"))
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(summary, indent=1))
    return 0 if rates else 1


if __name__ == "__main__":
    raise SystemExit(main())
