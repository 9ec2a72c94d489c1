"""A run's monitor CSV (monitor/sampler.py) summed up for its record: the mean and peak of
each level the sampler writes, the total of each count, and the sampler's own CPU."""
import csv
import json
from pathlib import Path

from monitor.sampler import FIELDS

LEVELS = ["cpu_user", "cpu_system", "cpu_iowait", "cpu_idle", "mem_used_bytes", "mem_cached_bytes",
          "device_busy", "gpu_util", "gpu_mem_used_bytes"]       # each sample a state: mean and peak
COUNTS = ["read_bytes", "read_requests", "net_recv_bytes"]  # each sample what happened since the last: total
assert set(LEVELS + COUNTS) <= set(FIELDS), "a summarized column the sampler does not write"


def summarize(csv_path):
    if not Path(csv_path).exists():
        raise FileNotFoundError(f"{csv_path}: no monitor CSV (the sampler did not start, or was stopped "
                                "before it wrote one)")
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    out = {"samples": len(rows)}
    for col in LEVELS:
        vals = [float(r[col]) for r in rows if r.get(col) not in (None, "")]
        if vals:
            out[f"{col}_mean"] = sum(vals) / len(vals)
            out[f"{col}_peak"] = max(vals)
    for col in COUNTS:
        out[f"{col}_total"] = sum(float(r.get(col) or 0) for r in rows) if rows else 0
    self_path = Path(str(csv_path) + ".self.json")
    if self_path.exists():
        me = json.loads(self_path.read_text())
        out["monitor_cpu_fraction_of_core"] = me["cpu_seconds"] / max(me["wall_seconds"], 1e-9)
        out["monitor_startup_cpu_seconds"] = me.get("startup_cpu_seconds")
    return out
