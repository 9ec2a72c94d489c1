#!/usr/bin/env python3
"""A 1 Hz system sampler: what the paper's Figures 5, 8 and 12 show.

Writes one CSV row per interval: CPU user/system/iowait/idle %, memory used and page cache,
reads (bytes and requests) on the block device holding the data, bytes received on every
network interface (loopback included: a Redis Cluster on this machine), and GPU utilisation and
memory through NVML when a GPU is present. Runs as its own process so that its cost is its
own: on exit (SIGTERM/SIGINT) it writes its CPU seconds and wall time to OUT.self.json.

  python monitor/sampler.py OUT.csv --device vda [--interval 1.0]
"""
import argparse
import csv
import json
import signal
import sys
import time

import psutil

FIELDS = ["t", "cpu_user", "cpu_system", "cpu_iowait", "cpu_idle", "mem_used_bytes",
          "mem_cached_bytes", "read_bytes", "read_requests", "net_recv_bytes", "device_busy", "gpu_util",
          "gpu_mem_used_bytes"]


class Gpu:
    def __init__(self):
        self.handle = None
        try:
            import pynvml
            pynvml.nvmlInit()
            if pynvml.nvmlDeviceGetCount() > 0:
                self.nvml, self.handle = pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception:  # no driver, no GPU: the columns stay empty
            self.handle = None

    def sample(self):
        if self.handle is None:
            return "", ""
        util = self.nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu
        return util, self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used


def disk_reads(device):
    """(bytes read, reads, ms the device was busy: /proc/diskstats' io_ticks) of `device`, or
    of all disks (busy: the busiest one's)."""
    counters = psutil.disk_io_counters(perdisk=True) or {}
    c = counters.get(device) if device else None
    if c is None:
        c = psutil.disk_io_counters()
        busy = max((getattr(d, "busy_time", 0) for d in counters.values()), default=0)
    else:
        busy = getattr(c, "busy_time", 0)
    return (c.read_bytes, c.read_count, busy) if c else (0, 0, 0)


def net_received():
    c = psutil.net_io_counters()
    return c.bytes_recv if c else 0


def run(out, device, interval):
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    gpu, start = Gpu(), time.time()
    me = psutil.Process()
    startup = me.cpu_times()  # imports and NVML init: a fixed cost, kept apart from the sampling's
    psutil.cpu_times_percent(None)
    last_reads, last_net = disk_reads(device), net_received()
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(FIELDS)
        f.flush()  # the runner starts the training once it sees this header: SIGTERM is handled by then
        next_t = start + interval
        while not stop:
            time.sleep(max(0.0, next_t - time.time()))
            next_t += interval
            cpu = psutil.cpu_times_percent(None)
            mem = psutil.virtual_memory()
            reads, net = disk_reads(device), net_received()
            busy = min(1.0, (reads[2] - last_reads[2]) / (interval * 1000))  # share of the interval
            w.writerow([round(time.time() - start, 3), cpu.user, cpu.system, getattr(cpu, "iowait", 0.0),
                        cpu.idle, mem.used, mem.cached, reads[0] - last_reads[0],
                        reads[1] - last_reads[1], net - last_net, round(busy, 4), *gpu.sample()])
            f.flush()
            last_reads, last_net = reads, net
    end = me.cpu_times()
    with open(out + ".self.json", "w") as f:
        json.dump({"cpu_seconds": (end.user + end.system) - (startup.user + startup.system),
                   "startup_cpu_seconds": startup.user + startup.system,
                   "wall_seconds": time.time() - start, "interval": interval, "device": device}, f)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--device", help="block device name as in /proc/diskstats (default: all disks)")
    p.add_argument("--interval", type=float, default=1.0)
    a = p.parse_args(argv)
    if not a.interval > 0:
        p.error(f"--interval must be above 0 seconds, not {a.interval:g}")
    run(a.out, a.device, a.interval)


if __name__ == "__main__":
    sys.exit(main())
