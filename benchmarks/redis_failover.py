#!/usr/bin/env python3
"""How long Caffe's Redis reader stops when a master is killed mid-pass (#22's goal: a pause of
at most cluster-node-timeout + 2 s, the record sequence unchanged), with the project's keeper
failing the master over and with Redis Cluster's own failover.

A cluster of its own (3 masters with a replica each, on --port, in a temporary folder, the
project's password and loopback rules) holds --count records of the data set's train split. A
net of one Data layer (no compute: it asks for records as fast as the reader delivers them)
reads them in its own process and prints when each batch is complete. After --before seconds a
master's redis-server gets SIGKILL. Per round and cell:

  pause       what the reader logs ("Redis failover: node A lost, its slots served by B after
              S s"): from its loss of the node until it reads again
  gap         the longest gap between batches from the kill on, as the net saw it
  phases      from the nodes' logs, counted from the reader's loss of the node: the keeper's
              CLUSTER FAILOVER FORCE reaching the replica, the replica's election won; the
              rest of the pause is the reader's

Cells: the keeper on, the cluster reached directly and through the delay proxy at --rtt ms;
the keeper stopped (Redis's own detection: node timeout, gossip, election delay), directly.
Each round kills another master; the cluster is restarted whole between rounds.

  python benchmarks/redis_failover.py [--dataset cifar10] [--rounds 3] [--rtt 10]
"""
import argparse
import os
import signal
import sys
import time
from pathlib import Path

from benchmarks import redis_bench, redis_path
from benchmarks.redis_migration import Reader
from data_prep import datasets
from data_prep.redis_cluster import keys as redis_keys
from data_prep.redis_cluster import location as redis_location
from experiments import caffe_log

CELLS = (("keeper", None), ("keeper", "rtt"), ("redis", None))


def one_round(cluster, location, net, keeper, rtt, victim_index, before):
    cluster.start(rtt, stops_with_caller=True)  # whole again, reached as asked, the keeper running
    if keeper == "redis":
        cluster.stop_keeper()
    victim = cluster.masters_ports()[victim_index % cluster.count]  # through the proxy: its port
    reader = Reader(net, before + 2.5 * cluster.node_timeout_ms / 1000 + 5,  # its failover line is glog's INFO
                    env=dict(os.environ, GLOG_minloglevel="0", GLOG_logtostderr="1"))
    time.sleep(before)
    killed = time.time()
    os.kill(cluster.server_pids()[(victim - cluster.port) % 100], signal.SIGKILL)
    reader.wait(timeout=before + 180)
    log = "".join(reader.log)
    failovers = caffe_log.parse(log)["failovers"]
    if len(failovers) != 1:
        raise RuntimeError(f"the reader logged {len(failovers)} failovers, not 1:\n{log[-3000:]}")
    [failover] = failovers
    phases = location.failover_phases(failover)
    after = [t for t in reader.times if t >= killed]
    gap = max(b - a for a, b in zip([killed] + after, after))
    return {"failed_over_by_asked": keeper, "failed_over_by": phases.get("failed_over_by"), "rtt_ms_asked": rtt,
            "node": failover["node"], "served_by": failover["served_by"],
            "pause_s": failover["pause_seconds"], "gap_s": gap,
            "requests_asked_again": failover["requests_asked_again"],
            "forced_after_s": phases.get("forced_after_seconds"), "failing_after_s": phases.get("failing_after_seconds"),
            "promoted_after_s": phases.get("promoted_after_seconds"), "election_delay_ms": phases.get("election_delay_ms"),
            "goal_s": cluster.node_timeout_ms / 1000 + 2}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    redis_bench.add_own_cluster_flags(p)
    p.add_argument("--rounds", type=int, default=3)
    redis_bench.add_reading_net_flags(p, 3.0, "seconds of reading before the kill")
    p.add_argument("--port", type=int, default=7700, help="the benchmark cluster's first port (its proxies: +100)")
    p.add_argument("--json", type=Path, help="also write every round here")
    a = p.parse_args(argv)
    ds = datasets.get(a.dataset)
    rounds = []
    with redis_bench.own_cluster("benchmarks/redis_failover.py", "is not the project's to fail over", "kills masters",
                                 a.dataset, a.count, a.port, replicas=1) as (root, cluster):
        location = redis_location.RedisClusterLocation(root / a.dataset / "redis", [])
        prefix = redis_keys.prefix_for(a.dataset, "train")
        net = redis_path.net_file(root / "read.prototxt", root, cluster, prefix, ds, a.depth, False, batch=a.batch)
        for r, i, (keeper, rtt) in redis_bench.interleaved(a.rounds, CELLS):
            got = one_round(cluster, location, net, keeper, a.rtt if rtt else None, r + i, a.before)
            rounds.append(got)
            redis_bench.say(f"round {r + 1} {cell_name(got)}: {got['node']} lost, served by {got['served_by']} "
                            f"(failed over by {got['failed_over_by']}): pause {got['pause_s']:.2f} s, longest gap "
                            f"{got['gap_s']:.2f} s; forced {got['forced_after_s']}, failing {got['failing_after_s']}, "
                            f"promoted {got['promoted_after_s']} s after the loss")
    report(rounds, a, cluster.node_timeout_ms / 1000)
    if a.json:
        redis_bench.write_result(a.json, {"rounds": rounds, "args": redis_bench.arguments(a),
                                             "node_timeout_s": cluster.node_timeout_ms / 1000})
    return 0


def cell_name(got):
    where = "direct" if got["rtt_ms_asked"] is None else f"{got['rtt_ms_asked']:g} ms"
    return f"{got['failed_over_by_asked']}, {where}"


def report(rounds, a, timeout_s):
    print(f"\n{a.dataset}, {a.count} records, batch {a.batch}, {a.depth} in flight; a master SIGKILLed mid-pass; "
          f"cluster-node-timeout {timeout_s:g} s; median [min-max] of {a.rounds} rounds; "
          f"machine: {redis_bench.machine()}")
    print(f"{'cell':<18}{'pause s':>20}{'longest gap s':>20}{'forced after s':>20}{'promoted after s':>20}"
          f"{'pause / (timeout + 2 s)':>26}")
    for keeper, rtt in CELLS:
        got = [g for g in rounds if g["failed_over_by_asked"] == keeper and (g["rtt_ms_asked"] is None) == (rtt is None)]
        if not got:
            continue

        def cell(field, scale=1.0):
            return redis_bench.spread([g[field] / scale for g in got if g[field] is not None], 2)
        print(f"{cell_name(got[0]):<18}{cell('pause_s'):>20}{cell('gap_s'):>20}{cell('forced_after_s'):>20}"
              f"{cell('promoted_after_s'):>20}{cell('pause_s', timeout_s + 2):>26}")
    print("goal (#22): a master killed mid-epoch with replicas: pause <= cluster-node-timeout + 2 s "
          "(pause / (timeout + 2 s) <= 1)")


if __name__ == "__main__":
    sys.exit(main())
