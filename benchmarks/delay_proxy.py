#!/usr/bin/env python3
"""The delay proxy's own cost: the CPU the proxy process spends per record it relays while
Caffe's Data layer reads a data set from the cluster at --rtt ms, for this checkout's proxy
(data_prep/delay_proxy.c) against another build of it (--against: a delay_proxy binary, say
one compiled from an earlier commit).

The proxy stands in for a network where the kernel has no netem; its CPU is the emulation's
own, not the data path's, yet a 2-core machine pays it out of the same budget as Caffe's
prefetch thread and the servers. So it should be small, and it is measured, not assumed.
Each cell: the cluster reached through a fresh proxy of that build, one net of one Data layer
in its own process reading --records records after warming up (benchmarks/redis_reader.py's
measurement); rounds alternate the builds; medians and the spread are printed.

  git show HEAD~1:data_prep/delay_proxy.c > /tmp/old.c && gcc -O2 -pthread -o /tmp/old /tmp/old.c
  python benchmarks/delay_proxy.py --against /tmp/old [--datasets imagenet,cifar10] [--rounds 3]
"""
import argparse
import statistics
import sys
from pathlib import Path

import toolchain
from benchmarks import flags, redis_bench, redis_path, redis_reader
from data_prep import build, datasets
from data_prep.redis_cluster import cluster as redis_cluster, external as redis_external
from data_prep.redis_cluster import keys as redis_keys
from experiments import runner

RECORDS = {"mnist": 250000, "cifar10": 250000, "imagenet": 12800}


def measure_with(binary, cluster, net, records, rtt):
    """(proxy CPU us per record, records/s) through a proxy of `binary`."""
    compiled = toolchain.delay_proxy
    toolchain.delay_proxy = lambda: binary
    try:
        cluster.start(None, stops_with_caller=True)  # the running proxy stopped, whichever build it was
        cluster.start(rtt, stops_with_caller=True)
    finally:
        toolchain.delay_proxy = compiled
    proxy = [cluster.proxy_pid()]
    before = redis_reader.process_cpu(proxy)
    got = redis_reader.measure(net, records, cluster)
    return (redis_reader.process_cpu(proxy) - before) / got["records"] * 1e6, got["images_per_s"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--against", type=Path, required=True, help="another delay_proxy binary to compare with")
    p.add_argument("--datasets", default="imagenet,cifar10")
    p.add_argument("--rounds", type=int, default=3)
    flags.add_rtt(p)
    p.add_argument("--depth", type=int, default=128, help="Redis requests in flight (prefetch_depth)")
    p.add_argument("--delay-legs", choices=sorted(redis_cluster.Cluster.DELAY_LEGS), default="both",
                   help="where the round trip is put (default %(default)s: a build before session 16 "
                   "takes only that)")
    p.add_argument("--data", default=str(runner.ROOT / "data"))
    p.add_argument("--json", type=Path, help="also write every round's cells here")
    a = p.parse_args(argv)
    redis_external.refuse_external("benchmarks/delay_proxy.py", "is not the project's to put a delay proxy in front of",
                                   f"unset {redis_external.SEEDS_ENV}: this benchmark measures the proxy in front of "
                                   "the project's own cluster")
    if not a.against.is_file():
        p.error(f"--against {a.against}: no such binary")
    builds = {"this checkout": toolchain.delay_proxy(), "against": a.against.resolve()}
    cluster = redis_bench.cluster(a.data, delay_legs=a.delay_legs)
    cells = {}
    with redis_bench.stopped_after(cluster, "delay-proxy-") as tmp:
        for name in a.datasets.split(","):
            ds = datasets.get(name)
            build.prepare_missing(name, ["redis"], a.data, log=lambda m: print(m, file=sys.stderr))
            net = redis_path.net_file(tmp / f"{name}.prototxt", a.data, cluster, redis_keys.prefix_for(name, "train"),
                                      ds, a.depth, False, redis_io="thread")
            for r, _, (label, binary) in redis_bench.interleaved(a.rounds, builds.items()):
                us, rate = measure_with(binary, cluster, net, RECORDS[name], a.rtt)
                cells.setdefault(f"{name}/{label}", []).append({"proxy_us": us, "images_per_s": rate})
                redis_bench.say(f"round {r + 1} {name:<9} {label:<14} proxy {us:7.1f} us/record, {rate:9,.0f} images/s")
    report(cells, a)
    if a.json:
        redis_bench.write_result(a.json, {"cells": cells, "rtt_ms": a.rtt, "delay_legs": a.delay_legs, "depth": a.depth,
                                          "against": str(a.against)})
    return 0


def report(cells, a):
    print(f"\nThe delay proxy's CPU per record relayed at {a.rtt:g} ms, {a.depth} requests in flight; median "
          f"[min-max] of {a.rounds} rounds; machine: {redis_bench.machine()}")
    print(f"{'cell':<28}{'proxy us/record':>24}{'x against':>11}{'images/s':>12}{'x against':>11}")
    for key, got in cells.items():
        base = cells[f"{key.split('/')[0]}/against"]

        def ratio(field):
            """'1.23x' against the cell without the proxy; '-' where that one measured 0 (a run too short
            for the CPU clock's ticks)."""
            against = statistics.median(g[field] for g in base)
            return f"{statistics.median(g[field] for g in got) / against:.2f}x" if against else "-"
        print(f"{key:<28}{redis_bench.spread([g['proxy_us'] for g in got], 1, 10)}".ljust(52)
              + f"{ratio('proxy_us'):>11}{statistics.median(g['images_per_s'] for g in got):>12,.0f}"
              + f"{ratio('images_per_s'):>11}")


if __name__ == "__main__":
    sys.exit(main())
