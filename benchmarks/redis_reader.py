#!/usr/bin/env python3
"""The CPU Caffe's data-prefetch thread spends per record read from Redis, against the same
records read from the local LMDB (page cache warm): #22's goal, Redis <= 1.5x LMDB.

The same Data layer (same records, same transformer) reads the data set from LMDB, from the
cluster directly, and through the delay proxy at --rtt ms, each Redis cell with the reader's
replies received on its own I/O thread (redis_io THREAD, patch 0011) and on the prefetch
thread (INLINE, the reader before it). Each cell runs in its own process: forward passes
until the prefetch queue is in its steady state, then, over --records records, the CPU
seconds of the prefetch thread ("caffe-prefetch", caffe/patches/0009) and of the threads
reading for it ("redis-io"; "lmdb-*" for LMDB's other read paths), and the records per
second the layer delivered. Moving work to another thread is not saving it: the table shows
the prefetch thread alone and the data path (prefetch + readers). The servers' CPU per
record (all redis-server processes, and the proxy's) is printed beside it; with
--server-io-threads 1,2 each Redis cell runs once per number of the servers' I/O threads
(Redis's io-threads, reads included; the cluster restarted between them). Rounds are
interleaved (LMDB, direct, proxied, LMDB, ...) so that noise on a shared machine falls on
every cell alike; medians and the spread over rounds are printed.

  python benchmarks/redis_reader.py [--datasets cifar10,imagenet] [--rounds 3] [--rtt 10]
                                    [--server-io-threads 1,2]

On a cluster you run (IMGSTORE_REDIS_CLUSTER) it reads imgstore:DATASET:train, directly only
(--rtt and --server-io-threads, the project's proxy and servers, are refused); the servers' CPU
is what their INFO says (every client's, not only this reader's; '-' where the ACL user may
not send INFO).
"""
import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import processes
import toolchain
from benchmarks import flags, redis_bench, redis_path
from data_prep import build, datasets
from data_prep.redis_cluster import cluster as redis_cluster, external as redis_external
from data_prep.redis_cluster import keys as redis_keys
from experiments import runner

RECORDS = {"mnist": 60000, "cifar10": 50000, "imagenet": 3000}

MEASURE = """
import os, sys, time, caffe
from experiments import proctrack
net = caffe.Net(sys.argv[1], caffe.TEST)
batch, records = net.blobs["data"].num, int(sys.argv[2])
def cpu():
    by_role = proctrack.roles(proctrack.thread_cpu(os.getpid()), os.getpid())
    return by_role.get(proctrack.PREFETCH, 0), proctrack.readers_cpu(by_role)
for _ in range(20):  # the prefetched batches drained, Redis' window grown
    net.forward()
(prefetch, readers), wall, n = cpu(), time.time(), 0
while n * batch < records:
    net.forward()
    n += 1
now = cpu()
print(now[0] - prefetch, now[1] - readers, n * batch, time.time() - wall)
"""


def process_cpu(pids):
    """CPU seconds of these processes so far (a None pid, such as no proxy, counts nothing)."""
    import psutil
    total = 0.0
    for pid in pids:
        if pid:
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system
    return total


def measure_cell(cluster, net, cell, records, rtt):
    cluster.start(None if cell == "lmdb" or cell.startswith("direct") else rtt, stops_with_caller=True)
    return measure(net, records, cluster)


def servers_cpu(cluster):
    """CPU seconds of the servers (and the delay proxy) so far: their processes', or on a
    cluster you run what its masters' INFO says (None where the user may not send INFO)."""
    if cluster.external:
        usage = list(cluster.server_usage().values())
        return None if None in usage else sum(u["cpu_seconds"] for u in usage)
    return process_cpu(cluster.server_pids() + [cluster.proxy_pid()])


def measure(net, records, cluster):
    before = servers_cpu(cluster)
    p = subprocess.run([str(toolchain.PYTHON), "-c", MEASURE, str(net), str(records)], capture_output=True,
                       text=True, timeout=900, preexec_fn=processes.child_setup())
    if p.returncode != 0:
        raise RuntimeError(f"the measuring net {net} failed:\n{p.stderr[-3000:]}")
    prefetch, readers, n, wall = (float(x) for x in p.stdout.split()[-4:])
    after = servers_cpu(cluster)
    return {"prefetch_us": prefetch / n * 1e6, "readers_us": readers / n * 1e6,
            "data_path_us": (prefetch + readers) / n * 1e6,
            "servers_us": None if before is None or after is None else (after - before) / n * 1e6,
            "images_per_s": n / wall, "records": n}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default="cifar10,imagenet")
    p.add_argument("--rounds", type=int, default=3)
    flags.add_rtt(p)
    p.set_defaults(rtt=None)  # 10 ms, unless on a cluster you run (which refuses it)
    p.add_argument("--depth", type=int, default=128, help="Redis requests in flight (prefetch_depth)")
    p.add_argument("--redis-io", default="thread,inline", help="the Redis reader's receiving: thread, inline "
                                                                "or both (patch 0011)")
    p.add_argument("--records", type=int, help="records per cell (default: one pass of the train split, "
                                               "3,000 for ImageNet)")
    p.add_argument("--data", default=str(runner.ROOT / "data"))
    p.add_argument("--json", type=Path, help="also write every round's cells here")
    p.add_argument("--server-io-threads", help="each Redis node's io-threads, a comma-separated list to compare "
                   "(e.g. 1,2: each Redis cell once per value; the cluster restarted between them; default 1)")
    a = p.parse_args(argv)
    external = redis_external.seeds_asked() is not None
    if external and (a.rtt is not None or a.server_io_threads):
        redis_external.refuse_external("benchmarks/redis_reader.py", "is read directly only (--rtt and "
                                       "--server-io-threads are the project's own delay proxy and servers)",
                                       "leave them out")
    a.rtt = 10.0 if a.rtt is None else a.rtt
    server_threads = [int(t) for t in (a.server_io_threads or "1").split(",")]
    cluster = redis_bench.cluster(a.data)
    rounds = {}
    with redis_bench.stopped_after(cluster, "redis-reader-") as tmp:
        for name in a.datasets.split(","):
            ds = datasets.get(name)
            build.prepare_missing(name, ["lmdb", "redis"], a.data, log=lambda m: print(m, file=sys.stderr))
            records = a.records or RECORDS[name]
            lmdb = Path(a.data) / name / "lmdb" / "train_lmdb"
            nets = {"lmdb": redis_path.net_file(tmp / f"{name}-lmdb.prototxt", a.data, cluster, None, ds, 0, False,
                                                lmdb)}
            for where in ["direct"] + ([] if external else [f"{a.rtt:g} ms"]):
                for io in a.redis_io.split(","):
                    nets[f"{where} {io}"] = redis_path.net_file(
                        tmp / f"{name}-{where.split()[0]}-{io}.prototxt", a.data, cluster,
                        redis_keys.prefix_for(name, "train"), ds, a.depth, False, redis_io=io)
            for r, _, threads in redis_bench.interleaved(a.rounds, server_threads):
                if not external:
                    cluster = redis_cluster.Cluster(cluster.root, io_threads=threads)
                for cell, net in nets.items():
                    if cell == "lmdb" and threads != server_threads[0]:
                        continue  # no server in it
                    if cell != "lmdb" and len(server_threads) > 1:
                        cell = f"{cell} io-threads {threads}"
                    got = measure_cell(cluster, net, cell, records, a.rtt)
                    rounds.setdefault(f"{name}/{cell}", []).append(got)
                    servers = "-" if got["servers_us"] is None else f"{got['servers_us']:6.1f}"
                    redis_bench.say(f"round {r + 1} {name:<9} {cell:<14} prefetch thread {got['prefetch_us']:7.1f} "
                                    f"us/record, readers {got['readers_us']:6.1f}, servers {servers} us/record, "
                                    f"{got['images_per_s']:8,.0f} images/s")
    report(rounds, a)
    if a.json:
        redis_bench.write_result(a.json, {"rounds": rounds, "rtt_ms": None if external else a.rtt, "depth": a.depth,
                                          "server_io_threads": server_threads, "batch": redis_path.BATCH})
    return 0


def report(rounds, a):
    print(f"\nCPU per record (us), median [min-max] of {a.rounds} rounds, batch {redis_path.BATCH}, "
          f"{a.depth} requests in flight; records/s delivered; ratios to LMDB's medians; "
          f"machine: {redis_bench.machine()}")
    print(f"{'cell':<28}{'prefetch thread':>24}{'x LMDB':>8}{'data path':>24}{'x LMDB':>8}"
          f"{'servers + proxy':>24}{'records/s':>12}{'x LMDB':>8}")

    def median(got, field):
        return statistics.median(g[field] for g in got)

    def ratio(got, base, field):  # '-' where LMDB's figure is 0 (too few records for a CPU tick)
        return f"{median(got, field) / median(base, field):>7.2f}x" if median(base, field) else f"{'-':>8}"
    for key, got in rounds.items():
        base = rounds[f"{key.split('/')[0]}/lmdb"]
        print(f"{key:<28}" + "".join(f"{redis_bench.spread([g[f] for g in got], 1, 7):>24}{ratio(got, base, f)}"
                                      for f in ("prefetch_us", "data_path_us"))
              + f"{redis_bench.spread([g['servers_us'] for g in got], 1, 7) if 'lmdb' not in key else '-':>24}"
              + f"{median(got, 'images_per_s'):>12,.0f}{ratio(got, base, 'images_per_s')}")
    print("goal (#22): the prefetch thread's CPU per record from Redis <= 1.5x LMDB's; the data path's says "
          "what the CPU pays in all")


if __name__ == "__main__":
    sys.exit(main())
