#!/usr/bin/env python3
"""Several client hosts against one Redis Cluster: how many accelerators the clients keep fed
when the solvers are spread over 1, 2, 4 ... hosts (MLPerf Storage's several clients against
one store), on one machine.

  python benchmarks/multihost.py mnist                          # 1, 2 and 4 client hosts, emulated H100
  python benchmarks/multihost.py mnist --hosts 1,2 --confirm 2 --server valkey
  python benchmarks/multihost.py cifar10 --hosts 1,4 --max 16 --accelerator titanx2016   # any run.py option

It makes 3 server hosts and as many client hosts as the largest count asks, each a network
namespace with an address of its own on one bridge (experiments/hosts.py); starts a cluster of
one master per server host with an ACL user (experiments/lab_cluster.py, standing in for a
lab's); prepares DATASET into it from the first client host (prepare.py --cluster, in a data
folder of its own, removed afterwards); then, for each count H, runs the capacity sweep
(benchmarks/capacity.py) inside the first client host with the solvers placed over H client
hosts in turn (run.py --client-hosts). Every run is an ordinary record in results/DATASET,
saying its cluster and over how many client hosts its solvers ran; the table at the end has the
largest N per H and what stopped the N above it.

The hosts share this machine's cores and memory: the namespaces give each client its own
address and link (veth to a bridge: the kernel's network path, not loopback), not its own CPU.
A sweep measures what the network path between hosts costs, not what more client CPUs would
buy. Needs root (namespaces). Everything it made is removed on exit, and by the next start
after a SIGKILL.
"""
import argparse
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import processes
import toolchain
from analysis import capacity_stats as stats
from analysis.capacity_stoppers import stopped_words
from data_prep import datasets
from data_prep.redis_cluster import external as redis_external
from experiments import hosts, lab_cluster, record
from experiments.config import RunConfig, arguments
from experiments.data_path_cpu import solvers

SERVERS = 3
ROW_HEAD = ("| client hosts | largest N | group AU at N / N + 1 (median, n) | stopped by | CPU per image at N + 1 "
            "(at N where N + 1 was not run), µs: solvers / servers |")


def parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", choices=list(datasets.REGISTRY))
    p.add_argument("--hosts", default="1,2,4", help="client host counts to sweep (default %(default)s)")
    p.add_argument("--server", choices=lab_cluster.SERVERS, default="redis",
                   help="Debian's redis-server, or its valkey-server (fetched into the cache on first use; "
                        "default %(default)s)")
    p.add_argument("--count", type=int, help="train images of a generated stand-in (CIFAR-10, ImageNet)")
    p.add_argument("--out", default=str(toolchain.ROOT / "results"), help="results root (default: %(default)s)")
    return p


def counts(text):
    found = sorted({int(t) for t in text.split(",") if t.strip()})
    if not found or found[0] < 1 or found[-1] > 16:
        raise SystemExit(f"--hosts: counts from 1 to 16, not {text!r}")
    return found


def _stop(signum, frame):
    raise KeyboardInterrupt  # leaving the hosts' `with` removes them


def sweep_hosts(argv=None):
    signal.signal(signal.SIGTERM, _stop)
    a, sweep_options = parser().parse_known_args(argv)
    redis_external.refuse_external("benchmarks/multihost.py", "is not used: this benchmark starts a cluster of its "
                                   "own on server hosts it makes")
    wanted = counts(a.hosts)
    started, rows = time.time(), []
    with tempfile.TemporaryDirectory(prefix="imgstore-multihost-") as scratch, \
            hosts.Hosts(clients=wanted[-1], servers=SERVERS) as net:
        lab = lab_cluster.LabCluster(net, Path(scratch) / "lab", server=a.server).start()
        env = lab.env()
        clients = [net.namespace(f"client-{i}") for i in range(wanted[-1])]
        say(f"{SERVERS} server hosts ({a.server}, {lab.seeds}) and {len(clients)} client hosts made; "
            f"preparing {a.dataset} into the cluster from client-0")
        data = Path(scratch) / "data"
        inside(net, ["data_prep/prepare.py", a.dataset, "redis", "--out", str(data), "--cluster", lab.seeds, "--quiet"]
               + (["--count", str(a.count)] if a.count else []), env)
        for h in wanted:
            say(f"\n{h} client host{'s' * (h > 1)}: the capacity sweep, solvers over {', '.join(clients[:h])}")
            inside(net, ["benchmarks/capacity.py", *sweep_arguments(a.dataset, sweep_options, lab.seeds, clients[:h],
                                                                     data, a.out)], env)
            rows.append(row_of(a, h, lab.seeds))
    print(table_of(a, rows, time.time() - started))
    return 0


def sweep_arguments(dataset, sweep_options, seeds, clients, data, out):
    """capacity.py's arguments for one count of client hosts: the user's options (capacity.py's and
    run.py's), then the RunConfig of where this sweep reads and writes, which stands over them."""
    words = arguments(RunConfig(dataset, "redis", "warm", client_hosts=tuple(clients), data=str(data), out=str(out),
                                options={"seeds": seeds}))
    positional, flags = words[:3], words[3:]
    return [*positional, *sweep_options, *flags]


def inside(net, script_args, env):
    """One of the project's scripts run inside client-0."""
    argv = net.command("client-0", [str(toolchain.PYTHON), str(toolchain.ROOT / script_args[0]), *script_args[1:]])
    p = subprocess.run(argv, env=env, cwd=toolchain.ROOT, preexec_fn=processes.child_setup())
    if p.returncode != 0:
        raise SystemExit(f"{script_args[0]} failed inside client-0 (exit {p.returncode}); its error is above")


def row_of(a, h, seeds):
    """One count of client hosts, as analysis/capacity.py tabulates a curve, from the records of
    the sweep just run (those on this cluster over h client hosts, on the curve of the last one);
    the CPU per image at N + 1, or at N where --max held and N + 1 was not run."""
    mine = [r for r in record.recorded(a.out, a.dataset) if not r.superseded
            and (r.concurrent or {}).get("client_hosts") == h and (r.location or {}).get("seeds") == seeds]
    key = stats.curve_of(mine[-1])
    curve = [r for r in mine if stats.curve_of(r) == key]
    by_n, lost_at = stats.curves(curve)[key], stats.lost(curve).get(key, set())
    n, at, above = stats.largest_n(by_n, lost_at)
    split = stats.cpu_per_image([r for r in curve if solvers(r) == (n + 1 if above else n)])
    return (f"| {h} | {n}{'' if above else '+'} | {_median(at)} / {_median(above)} | "
            f"{stopped_words(curve, key, by_n, lost_at, Path(a.out))} | "
            f"{' / '.join(f'{v:.1f}' for v in split) if split else '-'} |")


def _median(aus):
    return f"{statistics.median(aus):.3f} (n = {len(aus)})" if aus else "-"


def table_of(a, rows, seconds):
    return "\n".join([f"\n{a.dataset} redis warm, {SERVERS} masters on server hosts ({a.server}): accelerators "
                      f"the client hosts keep at AU >= 0.90 together ({seconds / 60:.0f} min)", "",
                      ROW_HEAD, "|---|---|---|---|---|", *rows])


def say(text):
    print(text, file=sys.stderr, flush=True)


def main(argv=None):
    try:
        return sweep_hosts(argv)
    except KeyboardInterrupt:
        say("interrupted: the hosts and the cluster were removed; runs recorded so far are kept")
        return 130


if __name__ == "__main__":
    sys.exit(main())
