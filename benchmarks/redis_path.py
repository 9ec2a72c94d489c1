#!/usr/bin/env python3
"""What a Redis Cluster over a network delivers to Caffe: images per second through Caffe's
own Data layer (REDIS DB: prefetch thread, Datum parsing, transformer; PNG decoding for
encoded Datums) and nothing else, over round trips added by the delay proxy, for each number
of requests in flight and for key order against arrival order.

Without prefetching a reader gets at most prefetch_depth records per round trip; with it,
the round trip should vanish. The goal: at 100 ms, at least 0.9 of the rate at 0 ms.

  python benchmarks/redis_path.py [--datasets cifar10,imagenet] [--rtts 0,1,10,50,100]
                                  [--depths 1,16,128,1024] [--encodings raw,png] [--json FILE]

Each cell: one net in its own process, warmed up, then forward passes for --seconds; the rate
is images over that time. Warm-up lasts at least --seconds / 3 and until the rate stops
rising (no half second 10% above the best before it; at most 30 s): the reader's window
starts at one request and doubles per round trip, so at 100 ms a deep window takes seconds
to open, and a shorter warm-up measures the opening, not the rate that training then keeps
(each cell's warm-up is printed). "direct" is the cluster without the proxy: direct /
proxy-at-0-ms is the proxy's own cost. --delay-legs both,requests compares where the proxy
puts the round trip (data_prep/delay_proxy.c says why requests is the default).

On a cluster you run (IMGSTORE_REDIS_CLUSTER) the cells are direct only, at every depth: no
delay proxy is put in front of it (--rtts and --delay-legs are refused). The PNG copy is
written under imgstore:DATASET-png:train there and removed after.
"""
import argparse
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import processes
import toolchain
from benchmarks import redis_bench
from data_prep import build, datasets
from data_prep.redis_cluster import cluster as redis_cluster, external as redis_external
from data_prep import backends
from data_prep.backends import datum
from data_prep.redis_cluster import keys as redis_keys
from experiments import runner

BATCH = 16  # small, so that a slow cell (1 request in flight at 100 ms: 10 images/s) ends soon

MEASURE = """
import sys, time, caffe
net = caffe.Net(sys.argv[1], caffe.TEST)
batch, seconds = net.blobs["data"].num, float(sys.argv[2])
start = interval = time.time()
n, best, rising = 0, 0.0, True
while n < 5 or time.time() - start < seconds / 3 or (rising and time.time() - start < 30):
    net.forward()
    n += 1
    if time.time() - interval >= 0.5:
        rate = n * batch / (time.time() - interval)
        rising, best = rate > 1.1 * best, max(best, rate)
        interval, n = time.time(), 0
warm_up = time.time() - start
t, n = time.time(), 0
while n < 3 or time.time() - t < seconds:
    net.forward()
    n += 1
print(n * batch / (time.time() - t), warm_up)
"""


def png_copy(cluster, dataset, phase="train"):
    """The data set's records again, as PNG-encoded Datums (what convert_imageset --encoded
    stores), under DATASET-png:PHASE (imgstore:DATASET-png:PHASE on a cluster you run). Written
    once per data set: its marker is the source's, marked +png."""
    import cv2
    import numpy as np
    from caffe.proto import caffe_pb2
    prefix, source = png_prefix(dataset, phase), redis_keys.prefix_for(dataset, phase)
    c = redis_keys.client(cluster)
    try:
        keys = redis_keys.keys_of(c, source)  # a complete data set, or refused
        count, fingerprint = redis_keys.marker_of(c, source)
        copied = [count, fingerprint + "+png"]
        if redis_keys.marker_of(c, prefix) == copied:
            return prefix
        redis_keys.delete_prefix(c, prefix)
        pipe = c.pipeline(transaction=False)
        for n, (key, (value,)) in enumerate(redis_keys.pipelined(c, [f"{source}:{k}" for k in keys], "get"), 1):
            label, pixels = datum.decode(value)
            ok, png = cv2.imencode(".png", np.ascontiguousarray(pixels.transpose(1, 2, 0)))
            d = caffe_pb2.Datum(channels=pixels.shape[0], height=pixels.shape[1], width=pixels.shape[2],
                                data=png.tobytes(), label=label, encoded=True)
            pipe.set(f"{prefix}:{key[len(source) + 1:]}", d.SerializeToString())
            if n % redis_keys.PIPELINE == 0 or n == len(keys):
                pipe.execute()
        c.rpush(redis_keys.index(prefix), *keys)
        c.set(redis_keys.marker(prefix), " ".join(copied))
        cluster.save()  # kept when the cluster restarts
        return prefix
    finally:
        c.close()


def png_prefix(dataset, phase="train"):
    return redis_keys.prefix_for(f"{dataset}-png", phase)


def remove_png_copy(cluster, dataset):
    """The PNG copy's keys, under its own prefix alone (a cluster you run keeps none of them)."""
    c = redis_keys.client(cluster)
    try:
        redis_keys.delete_prefix(c, png_prefix(dataset))
    finally:
        c.close()


@contextmanager
def png_copies_removed(cluster, copied, external):
    """On a cluster you run, the PNG copies of the data sets named in `copied` (as they are made)
    removed after, even if the benchmark is cut short; the project's cluster keeps them."""
    try:
        yield
    finally:
        if external:
            for name in copied:
                remove_png_copy(cluster, name)


def net_file(path, data, cluster, prefix, dataset, depth, out_of_order, lmdb=None, redis_io=None, batch=None):
    """A net of one Data layer reading the data set from Redis (or, as the reference, `lmdb`),
    made by the backend with its declared read options, its mean from the data folder `data`;
    redis_io: "thread" or "inline" (patch 0011), or None for the build's default."""
    import caffe
    mean = Path(data) / dataset.name / "mean.binaryproto"
    if lmdb:
        return backends.get("lmdb").write_data_net(path, None, dataset, batch or BATCH, caffe.TEST, mean_file=mean,
                                                   source=str(lmdb))
    options = dict(prefetch_depth=depth, **({"out_of_order": True} if out_of_order else {}),
                   **({"redis_io": redis_io} if redis_io else {}))
    return backends.get("redis").write_data_net(path, None, dataset, batch or BATCH, caffe.TEST, options, mean,
                                                source=cluster.source(prefix))


def measure(path, seconds):
    """(images/s after warming up, seconds the warm-up took)"""
    p = subprocess.run([str(toolchain.PYTHON), "-c", MEASURE, str(path), str(seconds)], capture_output=True,
                       text=True, timeout=600, preexec_fn=processes.child_setup())
    if p.returncode != 0:
        raise RuntimeError(f"the measuring net failed:\n{p.stderr[-2000:]}")
    rate, warm_up = map(float, p.stdout.strip().splitlines()[-1].split())
    return rate, warm_up


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default="cifar10,imagenet")
    p.add_argument("--rtts", help="round trips in ms (plus 'direct', always; default 0,1,10,50,100)")
    p.add_argument("--depths", default="1,16,128,1024")
    p.add_argument("--encodings", default="raw,png")
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--delay-legs",
                   help="where the proxy puts each round trip: requests (default), both (half each way), or both "
                   "of these compared (requests,both)")
    p.add_argument("--data", default=str(runner.ROOT / "data"))
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    external = redis_external.seeds_asked() is not None
    if external and (a.rtts or a.delay_legs):
        redis_external.refuse_external("benchmarks/redis_path.py", "is measured direct only (--rtts and --delay-legs "
                                       "put a delay proxy in front of the project's own cluster)",
                                       "leave them out")
    rtts = [] if external else [float(r) for r in (a.rtts or "0,1,10,50,100").split(",")]
    depths = [int(d) for d in a.depths.split(",")]
    legs = (a.delay_legs or "requests").split(",")
    for leg in legs:
        if leg not in redis_cluster.Cluster.DELAY_LEGS:
            p.error(f"--delay-legs: {leg!r} is not one of {', '.join(redis_cluster.Cluster.DELAY_LEGS)}")
    clusters = {leg: redis_bench.cluster(a.data, delay_legs=leg) for leg in legs}
    cluster = clusters[legs[0]]
    cells, measured_rtt, warm_ups, copied = {}, {}, {}, []
    started = time.time()
    with redis_bench.stopped_after(cluster, "redis-path-") as tmp, png_copies_removed(cluster, copied, external):
        for name in a.datasets.split(","):
            ds = datasets.get(name)
            build.prepare_missing(name, ["redis"], a.data, log=lambda m: print(m, file=sys.stderr))
            lmdb = Path(a.data) / name / "lmdb" / "train_lmdb"
            if lmdb.exists():  # the reference: the same net reading the local LMDB, page cache warm
                cells[f"{name}/raw/lmdb"], _ = measure(net_file(tmp / "net.prototxt", a.data, cluster, None, ds, 0,
                                                                False, lmdb), a.seconds)
                print(f"{name}/raw/lmdb {cells[f'{name}/raw/lmdb']:,.0f} images/s", file=sys.stderr, flush=True)
            cluster.start(stops_with_caller=True)
            prefixes = {"raw": redis_keys.prefix_for(name, "train")}
            if "png" in a.encodings.split(","):
                copied.append(name)  # removed after on a cluster you run, even if cut short
                prefixes["png"] = png_copy(cluster, name)
            for rtt, leg in [(None, legs[0])] + reaches(rtts, legs):
                clusters[leg].start(rtt, stops_with_caller=True)
                reach = rtt_label(rtt, leg, legs)
                measured_rtt[reach] = clusters[leg].rtt_ms()
                for enc, prefix in prefixes.items():
                    for depth in depths:
                        for ooo in ([False, True] if depth > 1 else [False]):
                            if rtt is None and not external and (ooo or depth != max(depths)):
                                continue  # direct: only the proxy's cost at the deepest pipeline
                            path = net_file(tmp / "net.prototxt", a.data, cluster, prefix, ds, depth, ooo)
                            key = f"{name}/{enc}/{reach}/{depth}/{'ooo' if ooo else 'in'}"
                            cells[key], warm_ups[key] = measure(path, a.seconds)
                            print(f"{key:<40} {cells[key]:10,.0f} images/s after {warm_ups[key]:4.1f} s warm-up  "
                                  f"({time.time() - started:.0f} s)", file=sys.stderr, flush=True)
    report(cells, measured_rtt, a, depths, rtts, legs)
    if a.json:
        redis_bench.write_result(a.json, {"cells": cells, "warm_up_seconds": warm_ups, "rtt_ms_measured": measured_rtt,
                                          "batch": BATCH, "seconds": a.seconds, "delay_legs": legs,
                                          "delay_proxy_source": toolchain.delay_proxy_source()})
    return 0


def reaches(rtts, legs):
    """(round trip, where the proxy puts it) per row; at 0 ms there is nothing to put anywhere."""
    return [(r, leg) for r in rtts for leg in (legs if r else legs[:1])]


def rtt_label(rtt, leg, legs):
    """A cell's reach: 'direct', the round trip ('100.0'), and where it was put when several are compared."""
    if rtt is None:
        return "direct"
    return f"{rtt}" if len(legs) == 1 or not rtt else f"{rtt}-{leg}"


def report(cells, measured_rtt, a, depths, rtts, legs):
    """The tables; with no round trips (a cluster you run) one row, direct."""
    rows = [rtt_label(r, leg, legs) for r, leg in reaches(rtts, legs)] or ["direct"]
    for name in a.datasets.split(","):
        for enc in a.encodings.split(","):
            base = cells.get(f"{name}/{enc}/{rtt_label(rtts[0], legs[0], legs)}/{max(depths)}/in") if rtts else None
            direct = cells.get(f"{name}/{enc}/direct/{max(depths)}/in")
            print(f"\n{name}, {enc} Datums: images/s through Caffe's Data layer (batch {BATCH}, "
                  f"{a.seconds} s per cell, 1 round)")
            lmdb = cells.get(f"{name}/{enc}/lmdb")
            if lmdb and base:
                print(f"  the same net from the local LMDB (warm): {lmdb:,.0f}; Redis through the proxy at 0 ms: "
                      f"{base / lmdb:.2f} of it")
            if base and direct:
                print(f"  proxy's own cost: direct {direct:,.0f}, through the proxy at 0 ms {base:,.0f} "
                      f"({base / direct:.2f} of direct)")
            head = "".join(f"{f'{d} in':>11}{f'{d} ooo':>11}" if d > 1 else f"{f'{d}':>11}" for d in depths)
            print(f"  {'RTT (measured)':<26}{head}")
            for reach in rows:
                row = ""
                for d in depths:
                    for order in (["in", "ooo"] if d > 1 else ["in"]):
                        v = cells.get(f"{name}/{enc}/{reach}/{d}/{order}")
                        row += f"{v:11,.0f}" if v is not None else f"{'-':>11}"
                label = reach if reach == "direct" else f"{reach} ms"
                print(f"  {f'{label} ({measured_rtt.get(reach)} ms)':<26}{row}")
            for leg in legs if rtts else []:
                far = cells.get(f"{name}/{enc}/{rtt_label(rtts[-1], leg, legs)}/{max(depths)}/in")
                if base and far:
                    print(f"  at {rtts[-1]:g} ms ({leg}) with {max(depths)} in flight: {far / base:.2f} of the rate at "
                          f"{rtts[0]:g} ms (goal >= 0.90); with 1 in flight: "
                          f"{(cells.get(f'{name}/{enc}/{rtt_label(rtts[-1], leg, legs)}/1/in') or 0) / base:.4f}")
    if cells:
        print(f"\n{len(cells)} cells, median {statistics.median(cells.values()):,.0f} images/s")


if __name__ == "__main__":
    sys.exit(main())
