#!/usr/bin/env python3
"""How long Caffe's Redis reader stalls while slots move under it (#22's goal: no pause longer
than one round trip per migrated slot).

A cluster of its own (3 masters on --port, in a temporary folder, the project's password and
loopback rules) holds --count records of the data set's train split. A net of one Data layer
(batch --batch, no compute, so it asks for records as fast as the reader delivers them) reads
them in its own process and prints when each batch is complete. After --before seconds the
benchmark moves --slots slots holding records to another node, as Redis Cluster's resharding
does (MIGRATING/IMPORTING, MIGRATE of their keys, SETSLOT NODE on every node): the reader meets
ASK while keys move and MOVED after. From the batches' times:

  pause       the longest gap between batches from the migration's start to 1 s after its end,
              less the mean gap before it (one stall, as the net saw it)
  time lost   that window's length less its batches times the mean gap (every stall in it;
              negative when the reader went faster than before)
  at rest     both again in a window as long just before the migration: what they are
              without one (the reader's own unevenness; replies come in bursts)

both set against the round trip (measured, PING) times the slots moved, and the ASK and
MOVED replies the nodes gave meanwhile (INFO errorstats: each one a request sent again). Each round moves
other slots (to the next node), directly and through the delay proxy at --rtt ms; medians and
the spread over rounds are printed.

  python benchmarks/redis_migration.py [--dataset cifar10] [--slots 16] [--rounds 3] [--rtt 10]
"""
import argparse
import subprocess
import sys
import threading
import time
from pathlib import Path

import processes
import toolchain
from benchmarks import redis_bench, redis_path
from data_prep import datasets
from data_prep.child_line import first_line
from data_prep.redis_cluster import keys as redis_keys

READY_WITHIN_S = 300  # a reading net's start: Caffe's import and the net's set-up, on a busy host
READ = """
import sys, time, caffe
net = caffe.Net(sys.argv[1], caffe.TEST)
end = time.time() + float(sys.argv[2])
print("ready", flush=True)
while time.time() < end:
    net.forward()
    print(repr(time.time()), flush=True)
"""


class Reader:
    """The reading net in its own process; the times its batches completed."""

    def __init__(self, net, seconds, env=None):
        self.p = subprocess.Popen([str(toolchain.PYTHON), "-c", READ, str(net), str(seconds)], text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                  preexec_fn=processes.child_setup())
        line = first_line(self.p, READY_WITHIN_S)
        if line != "ready":
            self.p.kill()
            why = f"did not start within {READY_WITHIN_S} s" if line is None else "did not start"
            raise RuntimeError(f"the reading net {why}:\n{self.p.communicate(timeout=30)[1][-3000:]}")
        self.times, self.log = [], []
        self._collect = [threading.Thread(target=self._read, daemon=True),
                         threading.Thread(target=self._read_log, daemon=True)]  # a full pipe would stop the net
        for t in self._collect:
            t.start()

    def _read(self):
        for line in self.p.stdout:
            self.times.append(float(line))

    def _read_log(self):
        for line in self.p.stderr:
            self.log.append(line)

    def wait(self, timeout):
        try:
            self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            raise RuntimeError("the reading net did not finish in time") from None
        for t in self._collect:
            t.join(timeout=10)
        if self.p.returncode != 0:
            raise RuntimeError(f"the reading net failed (exit {self.p.returncode}):\n{''.join(self.log)[-3000:]}")


def stalls(times, start, end, settle=1.0):
    """((pause, time lost) in the migration's window [start, end + settle], the same in a window
    as long just before it (the reader at rest: the numbers without a migration), the usual gap
    between batches) in seconds, of batches completed at `times`. The usual gap is the mean
    before both windows (replies come in bursts: the median gap would count bursts as stalls)."""
    width = end + settle - start
    usual = mean_gap(times, times[0], start - width)
    return excess(times, start, start + width, usual), excess(times, start - width, start, usual), usual


def mean_gap(times, lo, hi):
    inside = [t for t in times if lo <= t <= hi]
    if len(inside) < 10:
        raise RuntimeError(f"only {len(inside)} batches before the migration: raise --before")
    return (inside[-1] - inside[0]) / (len(inside) - 1)


def excess(times, lo, hi, usual):
    """(the longest gap touching [lo, hi] less the usual one, the window less its batches at the
    usual gap: negative when it went faster than usual)."""
    gaps = [b - a for a, b in zip(times, times[1:]) if b >= lo and a <= hi]
    batches = sum(1 for t in times if lo <= t <= hi)
    return max(gaps, default=hi - lo) - usual, (hi - lo) - batches * usual


def record_slots(cluster, prefix, to_node, how_many):
    """`how_many` slots holding records of `prefix`, none of them already on `to_node`."""
    from redis.crc import key_slot
    c = redis_keys.client(cluster)
    keys = [f"{prefix}:{k}" for k in redis_keys.keys_of(c, prefix)]
    c.close()
    slots = sorted({key_slot(k.encode()) for k in keys})
    owner_of = cluster.slot_owners()
    chosen = [s for s in slots if owner_of(s) != to_node][:how_many]
    if len(chosen) < how_many:
        raise RuntimeError(f"only {len(chosen)} slots with records off node {to_node}: raise --count")
    return chosen


def redirections(cluster):
    """{"ASK": n, "MOVED": n}: the redirections every node has replied so far (INFO errorstats)."""
    counts = {"ASK": 0, "MOVED": 0}
    for node in cluster.nodes():
        for kind in counts:
            counts[kind] += (node.info("errorstats").get(f"errorstat_{kind}") or {}).get("count", 0)
    return counts


def one_round(cluster, net, prefix, rtt, slots, to_node, before):
    cluster.start(rtt, stops_with_caller=True)
    measured = cluster.rtt_ms()
    moving = record_slots(cluster, prefix, to_node, slots)
    reader = Reader(net, before + 3.0)
    time.sleep(before)
    replied = redirections(cluster)
    start = time.time()
    moved = cluster.migrate_slots(moving, to_node)
    end = time.time()
    reader.wait(timeout=before + 120)
    replied = {k: v - replied[k] for k, v in redirections(cluster).items()}
    (pause, lost), (rest_pause, rest_lost), usual = stalls(reader.times, start, end)
    budget = moved * measured / 1000
    return {"rtt_ms_asked": rtt, "rtt_ms": measured, "slots": moved, "migration_s": end - start,
            "ask_replies": replied["ASK"], "moved_replies": replied["MOVED"],
            "batches": len(reader.times), "usual_gap_ms": usual * 1000, "pause_ms": pause * 1000,
            "lost_ms": lost * 1000, "at_rest_pause_ms": rest_pause * 1000, "at_rest_lost_ms": rest_lost * 1000,
            "pause_per_slot_rtt": pause / budget, "lost_per_slot_rtt": lost / budget}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    redis_bench.add_own_cluster_flags(p)
    p.add_argument("--slots", type=int, default=16, help="slots moved per round")
    p.add_argument("--rounds", type=int, default=3)
    redis_bench.add_reading_net_flags(p, 4.0, "seconds of reading before the migration (at least twice its "
                                              "window: about 2.5 s)")
    p.add_argument("--redis-io", default="thread", choices=("thread", "inline"))
    p.add_argument("--port", type=int, default=7400, help="the benchmark cluster's first port (its proxies: +100)")
    p.add_argument("--json", type=Path, help="also write every round here")
    a = p.parse_args(argv)
    ds = datasets.get(a.dataset)
    rounds = []
    with redis_bench.own_cluster("benchmarks/redis_migration.py", "is not the project's to move slots in",
                                 "migrates slots", a.dataset, a.count, a.port) as (root, cluster):
        prefix = redis_keys.prefix_for(a.dataset, "train")
        net = redis_path.net_file(root / "read.prototxt", root, cluster, prefix, ds, a.depth, False,
                                  redis_io=a.redis_io, batch=a.batch)
        for r, _, rtt in redis_bench.interleaved(a.rounds, (None, a.rtt)):
            got = one_round(cluster, net, prefix, rtt, a.slots, (r + 1) % cluster.count, a.before)
            rounds.append(got)
            redis_bench.say(f"round {r + 1} {'direct' if rtt is None else f'{rtt:g} ms':<7} {got['slots']} slots "
                            f"moved in {got['migration_s']:.2f} s ({got['ask_replies']} ASK, {got['moved_replies']} "
                            f"MOVED replies): pause {got['pause_ms']:.1f} ms, lost {got['lost_ms']:.1f} ms; at rest "
                            f"{got['at_rest_pause_ms']:.1f} / {got['at_rest_lost_ms']:.1f} ms "
                            f"(round trip {got['rtt_ms']:.2f} ms, usual gap {got['usual_gap_ms']:.2f} ms)")
    report(rounds, a)
    if a.json:
        redis_bench.write_result(a.json, {"rounds": rounds, "args": redis_bench.arguments(a)})
    return 0


def report(rounds, a):
    print(f"\n{a.dataset}, {a.count} records, batch {a.batch}, {a.depth} in flight, redis_io {a.redis_io}, "
          f"{a.slots} slots moved per round; median [min-max] of {a.rounds} rounds; "
          f"machine: {redis_bench.machine()}")
    print(f"{'cell':<10}{'round trip ms':>16}{'pause ms':>22}{'time lost ms':>22}{'at rest: pause':>20}{'lost':>22}"
          f"{'pause / (slots x rtt)':>24}{'lost / (slots x rtt)':>24}{'ASK replies':>16}{'MOVED replies':>16}")
    for rtt in (None, a.rtt):
        got = [g for g in rounds if g["rtt_ms_asked"] == rtt]

        def cell(field, digits=1):
            return redis_bench.spread([g[field] for g in got], digits)
        print(f"{'direct' if rtt is None else f'{rtt:g} ms':<10}{cell('rtt_ms', 2):>16}{cell('pause_ms'):>22}"
              f"{cell('lost_ms'):>22}{cell('at_rest_pause_ms'):>20}{cell('at_rest_lost_ms'):>22}"
              f"{cell('pause_per_slot_rtt', 2):>24}{cell('lost_per_slot_rtt', 2):>24}"
              f"{cell('ask_replies', 0):>16}{cell('moved_replies', 0):>16}")
    print("goal (#22): no pause longer than one round trip per migrated slot (pause / (slots x rtt) <= 1)")


if __name__ == "__main__":
    sys.exit(main())
