"""A Redis Cluster of Debian's redis-server processes, started and stopped by the project.

  python -m data_prep.redis_cluster.cluster start [--nodes 3] [--replicas 1] [--rtt 10ms] [--io-threads 2]
  python -m data_prep.redis_cluster.cluster status | stop | stop-keeper

Layout under the data folder (default data/redis-cluster/): node-I/ (nodes.conf, dump.rdb,
redis.log, redis.pid) per node, proxy.pid, and with replicas keeper.pid and keeper.log
(data_prep/redis_cluster/keeper.py: a master whose process exits is failed over at once). Node I
listens on 127.0.0.1:PORT+I (bus: +10000) and nowhere else; a password is required
(IMGSTORE_REDIS_PASSWORD; generated for this process when unset). The servers, their pid files,
owner and password: data_prep/redis_cluster/servers.py; the delay proxy that emulates a round trip:
data_prep/redis_cluster/proxy.py; slots, failover, migration and replication: data_prep/redis_cluster/topology.py.

Persistence: data_prep SAVEs every node once a data set is complete; stopping never saves
(SIGTERM with `save ""`), so what a restart loads is always a complete state.

Lifetime: servers started for a caller that stops them when it is done (`session()`, a run's
location: start(stops_with_caller=True)) stop with it when it is killed, and their keeper and
proxy with them (a death signal; owner.json says whose they are); those the command-line
`start` makes keep running until `stop`. Whatever a killed owner still left running (it died
before the signal was set, or started them from another thread) is stopped by the next start,
which says so on stderr.
"""
import argparse
import json
import os
import shutil
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from data_prep.errors import SourceError
from data_prep.options import parse_ms
from data_prep.redis_cluster.interface import ClusterInterface, median_ms
from data_prep.redis_cluster.proxy import ProxyMixin
from data_prep.redis_cluster.servers import PASSWORD_ENV, PORT_ENV, ROOT, ClusterError, ServersMixin, password
from data_prep.redis_cluster.topology import TopologyMixin


class Cluster(ServersMixin, ProxyMixin, TopologyMixin, ClusterInterface):
    """`nodes` masters, each with `replicas` replicas (their ports follow the masters'). The
    shape is kept in the cluster's folder (shape.json) once it has been formed, so that every
    later Cluster of that folder has it: a Cluster of another shape there is refused."""
    SHAPE = "shape.json"

    def __init__(self, root, nodes=None, port=None, replicas=None, io_threads=None, delay_legs="requests"):
        self.root = Path(root).resolve()  # redis-server chdirs: paths must be absolute
        self.io_threads = io_threads  # each node's (Redis's io-threads, reads too); None: as running, or 1
        if delay_legs not in self.DELAY_LEGS:
            raise ClusterError(f"delay legs must be one of {', '.join(self.DELAY_LEGS)}, not {delay_legs!r}")
        self.delay_legs = delay_legs
        self.port = port or int(os.environ.get(PORT_ENV, "7100"))
        kept = self._kept_shape()
        asked = (nodes, replicas)
        self.count, self.replicas = kept or (nodes or 3, replicas or 0)
        if kept and any(a is not None and a != k for a, k in zip(asked, kept)):
            raise ClusterError(f"the cluster under {self.root} has {kept[0]} masters with {kept[1]} replicas "
                               f"each, not {nodes or kept[0]} with {replicas if replicas is not None else kept[1]}: "
                               f"stop it and remove that folder to make another (its data is written again)")
        # a master lost is failed over to its replica after this long (without replicas a long
        # timeout: a node merely busy must not take the cluster down)
        self.node_timeout_ms = 5000 if self.replicas else 30000

    external = False  # started and run by the project (data_prep.redis_cluster.external: one the user runs)

    def client(self, timeout=30):
        """A cluster client (routes by slot, follows MOVED/ASK) for bulk work."""
        import redis
        from redis.cluster import RedisCluster
        try:
            return RedisCluster(host="127.0.0.1", port=self.port, password=password(), socket_timeout=timeout)
        except redis.RedisError as e:
            raise ClusterError(f"Redis cluster under {self.root}: {e}") from e

    def _kept_shape(self):
        try:
            shape = json.loads((self.root / self.SHAPE).read_text())
            return shape["masters"], shape["replicas"]
        except (OSError, ValueError, KeyError):
            return None

    def _keep_shape(self):
        tmp = self.root / (self.SHAPE + ".partial")
        tmp.write_text(json.dumps({"masters": self.count, "replicas": self.replicas}) + "\n")
        tmp.replace(self.root / self.SHAPE)

    # --- addresses ---------------------------------------------------------------
    def node_ports(self):
        """Every node's port: the masters', then their replicas'."""
        return [self.port + i for i in range(self.count * (1 + self.replicas))]

    def proxy_ports(self):
        return [self.port + 100 + i for i in range(len(self.node_ports()))]

    def node_dir(self, i):
        return self.root / f"node-{i}"

    def source(self, prefix):
        """Caffe's Data layer source for a data set stored under `prefix`."""
        seeds = ",".join(f"127.0.0.1:{p}" for p in self.node_ports())
        return f"redis://{seeds}/{prefix}"

    def start(self, rtt_ms=None, timeout=60, keep_reach=False, stops_with_caller=False):
        """Make the cluster run with clients reaching it at `rtt_ms` (None: directly; with
        keep_reach a running cluster stays as it is reached). Returns True when it started
        the servers. stops_with_caller: the caller stops the servers it started when it is done
        (a session, a run), so they, their keeper and their proxy get a death signal when this
        process exits (started from its main thread; else the next start stops what is left)."""
        want = self.delays_for(rtt_ms)
        if self.running() and self.io_threads not in (None, self.running_io_threads()):
            self.stop()  # a node's io-threads is fixed at its start
        self.stop_leftovers()
        if self.running():
            self._check_password()
            if not keep_reach:
                self._reach(want, timeout)
            self.start_keeper()
            return False
        self.stop()
        if shutil.which("redis-server") is None:
            raise ClusterError("redis-server not found: apt-get install redis-server redis-tools")
        self.root.mkdir(parents=True, exist_ok=True)
        self._check_ports_free()
        self._keep_owner(stops_with_caller)
        started = [self._start_node(i, port) for i, port in enumerate(self.node_ports())]
        try:
            self._wait_ready(timeout, started)
            self._form_cluster(timeout)
            self._wait_converged(self.node_ports(), timeout)
            self._reach(want, timeout)
            self.wait_replicated(timeout)  # a replica not yet in sync is not eligible to take over
            self.start_keeper()
        except BaseException:
            self.stop()
            raise
        return True

    def save(self, timeout=600):
        """Every node's data to its RDB file, in the background (a SAVE of a large data set
        blocks a node past the cluster's failure timeout), waiting until all are written."""
        self.wait_replicated(timeout)  # a replica's RDB holds what its master's does
        nodes, deadline = self.nodes(), time.time() + timeout

        def settled(n, saves=None):  # no save running (and, given a count, one more done)
            info = n.info("persistence")
            return not info["rdb_bgsave_in_progress"] and (saves is None or info["rdb_saves"] > saves)
        while not all(settled(n) for n in nodes) and time.time() < deadline:
            time.sleep(0.1)
        before = [n.info("persistence")["rdb_saves"] for n in nodes]
        for n in nodes:
            n.bgsave()
        for i, (n, saves) in enumerate(zip(nodes, before)):
            while not settled(n, saves):
                if time.time() > deadline:
                    raise ClusterError(f"node {i} (127.0.0.1:{self.node_ports()[i]}): RDB not written in {timeout} s")
                time.sleep(0.1)
            if n.info("persistence")["rdb_last_bgsave_status"] != "ok":
                raise ClusterError(f"node {i} (127.0.0.1:{self.node_ports()[i]}): writing its RDB file failed "
                                   f"(its log: {self.node_dir(i) / 'redis.log'})")

    @contextmanager
    def session(self, rtt_ms=None):
        """The cluster up for a while, as it is reached now if it runs; else started (reached
        at `rtt_ms`) and stopped at the end."""
        started = self.start(rtt_ms, keep_reach=True, stops_with_caller=True)
        try:
            yield self
        finally:
            if started:
                self.stop()

    def rtt_ms(self, samples=21):
        """Median PING round trip, in ms, from this process through the address clients use."""
        import redis
        ports = self.proxy_ports() if self.proxy_pid() else self.node_ports()
        for port in ports:  # the first node that answers (a master may have been lost)
            c = self._client(port)
            try:
                c.ping()
                break
            except redis.ConnectionError:
                continue
        else:
            return None
        return median_ms(c.ping, samples)

    def describe(self):
        delays = self.proxy_delays()
        return {"nodes": self.count, "ports": self.node_ports(), "replicas": self.replicas,
                "io_threads": self.running_io_threads() if self.running() else self.io_threads,
                "rtt_ms_asked": None if delays is None else sum(delays),  # None: no proxy, direct
                "delay_ms_requests_replies": delays,
                "delay_proxy_source": None if delays is None else self.proxy_source(),
                # memory the proxy holds outside the run's cgroup, at most since it started
                "delay_proxy_peak_rss_bytes": None if delays is None else self.proxy_peak_rss(),
                "rtt_ms_measured": self.rtt_ms() if self.running() else None, "bandwidth_limit": None}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=["start", "stop", "status", "stop-keeper"],
                   help="stop-keeper: leave a lost master to Redis Cluster's own failover (5.5-8.5 s, "
                   "not the keeper's < 1 s) until the next start")
    p.add_argument("--data", default=str(ROOT / "data"), help="data root (default: %(default)s)")
    p.add_argument("--nodes", type=int, help="masters (default 3, or the folder's cluster's)")
    p.add_argument("--replicas", type=int, help="replicas of each master (default 0): a master lost is "
                   "failed over to its replica, and Caffe's reader carries on")
    p.add_argument("--port", type=int, help=f"first node's port (default: ${PORT_ENV} or 7100)")
    p.add_argument("--rtt", help="round trip to emulate, e.g. 10ms (default: none, direct)")
    p.add_argument("--io-threads", type=int, help="each node's I/O threads, reading too (Redis's io-threads; "
                   "default 1: the main thread does all; a running cluster with another number is restarted)")
    a = p.parse_args(argv)
    try:
        cluster = Cluster(Path(a.data) / "redis-cluster", a.nodes, a.port, a.replicas, a.io_threads)
        if a.action == "start":
            if not os.environ.get(PASSWORD_ENV):
                raise ClusterError(f"set {PASSWORD_ENV} first (e.g. export {PASSWORD_ENV}=$(openssl rand -hex 16)): "
                                   "later commands need the same password, and none is stored in a file")
            cluster.start(parse_ms(a.rtt) if a.rtt else None)
            print(f"Redis cluster running: {cluster.describe()}")
        elif a.action == "stop":
            cluster.stop()
            print("Redis cluster stopped")
        elif a.action == "stop-keeper":
            cluster.stop_keeper()
            print("keeper stopped: a lost master now waits for Redis Cluster's own failover")
        else:
            keeper = f"keeper pid {cluster.keeper_pid()}" if cluster.keeper_pid() else "no keeper"
            print(f"running: {cluster.running()}; {cluster.describe() if cluster.running() else ''}; {keeper}")
    except SourceError as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
