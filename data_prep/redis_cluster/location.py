"""The Redis location: where a run reads a data set held in a Redis Cluster (the project's or one
the user runs), what cold and warm mean there, and what the servers did during the run."""
import time
from contextlib import contextmanager
from datetime import datetime, timedelta

from data_prep import cache, locations, manifest
from data_prep.redis_cluster import external as redis_external
from data_prep.options import Option
from data_prep.redis_cluster.keys import check_marker, client, cluster_of, prefix_of, records, seeds_written


@contextmanager
def _said(cluster, doing):
    """A Redis error while `doing` (a command the ACL user may not send, a node gone) as one
    line naming the cluster and the user."""
    import redis
    try:
        yield
    except (redis.RedisError, redis.exceptions.RedisClusterException) as e:
        who = f" as user {cluster.user()}" if cluster.external else ""
        raise locations.LocationError(f"Redis: {getattr(cluster, 'name', cluster.root)}{who}, {doing}: "
                                      f"{str(e).splitlines()[0]}") from e


@locations.register
class RedisClusterLocation(locations.Location):
    """Records in a Redis Cluster's memory (data_prep.redis_cluster.cluster). An in-memory store has no
    cold reads; what can be cold is the servers: cold = every node stopped, the page cache
    dropped, the nodes restarted from their RDB files (the load is timed, not part of the run);
    warm = the cluster up and every record read once through the network. Clients reach the
    nodes directly or, with a round trip asked, through the delay proxy. A cluster that was not
    running is stopped after the run; one that was (make redis-start's) is left running, reached
    as it was, even when a cold run restarted it."""
    name = "redis-cluster"
    options = (Option("rtt_ms", "round trip between Caffe and the servers, e.g. 10ms, added by a delay proxy "
                                "on loopback (default: none, direct)", kind="ms", minimum=0, flag_name="--rtt",
                      recorded_as="rtt_ms_asked"),
               Option("seeds", redis_external.CLUSTER_FLAG_HELP, kind="text", flag_name=redis_external.CLUSTER_FLAG,
                      metavar="HOST:PORT[,...]", parse=redis_external.seed_text, recorded_as="seeds", written=True))

    def __init__(self, path, files, rtt_ms=None, seeds=None):
        super().__init__(path, [])
        written = seeds_written(path)
        if written and written != seeds:  # an artifact written before its folder kept the seeds: as asked
            asked = f"{redis_external.CLUSTER_FLAG} {seeds}" if seeds else f"no {redis_external.CLUSTER_FLAG}"
            raise locations.LocationError(f"{path} was prepared into the cluster at {written}, and this run gives "
                                          f"{asked}: run with {redis_external.CLUSTER_FLAG} {written}")
        self.rtt_ms = rtt_ms
        self.cluster = cluster_of(path, seeds)
        if self.cluster.external and not seeds:  # a run names the cluster it reads, and its record says it
            found = self.cluster.seed_text()
            raise locations.LocationError(f"{redis_external.SEEDS_ENV} names the cluster at {found}, which a run "
                                          f"takes as {redis_external.CLUSTER_FLAG} {found} (the variable is the "
                                          "fallback of scripts that give no seeds)")
        self.started, self.load_seconds, self.usage_before = False, None, None
        self.found = None  # (round trip in ms, or None: direct) of a cluster found running

    def set_cache(self, state, cold_fallback=None, group=None):
        if state == "cold" and self.cluster.external:
            raise locations.LocationError(
                f"cold: {self.cluster.name} is not this project's: its servers hold every record in memory, "
                "and stopping them or dropping their caches is their owner's to do; run it warm")
        with _said(self.cluster, "setting the cache"):
            return self._set_cache(state, cold_fallback)

    def _set_cache(self, state, cold_fallback):
        if not self.cluster.external:
            self.cluster.stop_leftovers()  # what a killed owner left running is no one's: not a cluster found
        if self.cluster.running():
            self.found = (self.cluster.rtt_asked_ms(),)
        if state == "cold":
            self.cluster.stop()
            dumps = [d / "dump.rdb" for d in map(self.cluster.node_dir, range(len(self.cluster.node_ports())))
                     if (d / "dump.rdb").exists()]
            dropped = cache.make_state("cold", dumps, cold_fallback)
            t = time.time()
            self.started = self.cluster.start(self.rtt_ms, stops_with_caller=self.found is None)
            self.load_seconds = round(time.time() - t, 3)
            how = f"servers restarted from their RDB files after {dropped}"
        else:
            self.started = self.cluster.start(self.rtt_ms, stops_with_caller=self.found is None)
            for phase in ("train", "test"):
                for _ in records(self.path, phase, self.cluster):
                    pass
            how = "every record read once over the network"
        self._check_markers()
        self.usage_before = self.cluster.server_usage()
        return how, 1.0  # the servers hold every record in memory either way

    def _check_markers(self):
        written = manifest.load(self.path)
        c = client(self.cluster)
        try:
            for phase, split in written.splits.items():
                check_marker(c, prefix_of(self.path, phase, self.cluster), split.count, written.source_fingerprint)
        finally:
            c.close()

    def limit_target(self):
        raise locations.LocationError("read IOPS/bandwidth limits apply to a local disk; a Redis Cluster is reached "
                            "over the network (use --rtt)")

    def describe(self):
        """The cluster, the round trip, and each server's CPU seconds since set_cache and its
        memory now (a cluster the user runs: also its keyspace hits since set_cache, the reads
        it served)."""
        servers = {}
        for port, now in self.cluster.server_usage().items():
            then = (self.usage_before or {}).get(port)
            servers[port] = None if not (now and then) else {
                "cpu_seconds": round(now["cpu_seconds"] - then["cpu_seconds"], 3), "rss_bytes": now["rss_bytes"]}
            if servers[port] and "keyspace_hits" in now:
                servers[port]["keyspace_hits"] = now["keyspace_hits"] - then["keyspace_hits"]
        return dict(self.cluster.describe(), kind=self.name, root=str(self.cluster.root),
                    load_seconds=self.load_seconds, servers=servers)

    def explain(self, log_text):
        """Caffe names the address it reached; through the delay proxy that is the proxy's
        port: say which node stands behind it."""
        import re
        proxies = dict(zip(self.cluster.proxy_ports(), enumerate(self.cluster.node_ports())))
        for port in sorted({int(p) for p in re.findall(r"127\.0\.0\.1:(\d+)", log_text)}):
            if port in proxies:
                i, node_port = proxies[port]
                return (f"127.0.0.1:{port} in Caffe's log is the delay proxy in front of Redis node {i} "
                        f"(127.0.0.1:{node_port}; its log: {self.cluster.node_dir(i) / 'redis.log'})")
        return None

    def failover_phases(self, failover):
        """Where a failover's pause went, from the nodes' own logs: who failed the node over (the
        project's keeper, or Redis's own detection), seconds from the reader's loss of the node
        (the pause's start) to the keeper's FORCE reaching the replica, to the masters agreeing
        that it failed and to the replica winning its election, and that election's delay; the
        rest of the pause is the reader's."""
        resumed = datetime.fromisoformat(failover["at"])
        if resumed.year == 2000:  # glog's stamps carry no year
            resumed = resumed.replace(year=datetime.now().year)
        lost = resumed - timedelta(seconds=failover["pause_seconds"])
        # from the loss on (1 s for the clocks' stamps): an earlier failover's lines are not this one's;
        # a reader that noticed the loss late (an idle test net) gets no phases
        events = self.cluster.failover_events(lost - timedelta(seconds=1), resumed)
        port = int(failover["served_by"].rsplit(":", 1)[1])
        ports = self.cluster.node_ports() + self.cluster.proxy_ports()
        replica = ports.index(port) % len(self.cluster.node_ports()) if port in ports else None
        won = [at for at, node, kind, _ in events if kind == "won" and node == replica]
        if not won:
            return {}
        failing = [at for at, _, kind, _ in events if kind == "failing" and at <= won[-1]]
        delays = [ms for at, node, kind, ms in events if kind == "delayed" and node == replica and at <= won[-1]]
        forced = [at for at, node, kind, _ in events if kind == "forced" and node == replica and at <= won[-1]]
        after = lambda at: round((at - lost).total_seconds(), 3)  # noqa: E731
        return {"failed_over_by": "keeper" if forced else "redis",
                "forced_after_seconds": after(forced[-1]) if forced else None,
                "failing_after_seconds": after(failing[-1]) if failing else None,
                "promoted_after_seconds": after(won[-1]), "election_delay_ms": delays[-1] if delays else None}

    def close(self):
        if self.found is not None:
            self.cluster.start(self.found[0])  # as it was found: running, reached as before
        elif self.started:
            self.cluster.stop()
