"""A Redis Cluster holding the same Datum records as the LMDB backend, read by Caffe's own Data
layer through the REDIS DB of caffe/patches/0011 (GETs pipelined ahead of the cursor, in key or
arrival order). The paper's future work: a distributed key-value store.

Keys: PREFIX:KEY per record (KEY as in LMDB), PREFIX:~index (the keys in order), and
PREFIX:~complete ("COUNT FINGERPRINT": the record count and the source's hash), written last,
once the index holds exactly COUNT keys, and deleted first when a data set is replaced; both
readers (Caffe's and records()) refuse an index of another length. PREFIX = DATASET:PHASE
(imgstore:DATASET:PHASE in a cluster the user runs, data_prep.redis.external, where the project
touches no other key). The records live in the servers (data_prep.redis.cluster, under DATA/redis-cluster/); the artifact's folder holds only
its manifest and, written into a cluster the user runs (the location's option seeds, --cluster), those
seeds (SEEDS_FILE), which every later reading of the artifact goes to.
"""
import shutil
import time
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

from data_prep import cache, locations, manifest
from data_prep.redis import cluster as redis_cluster, external as redis_external
from data_prep.backends import Backend, datum, phase_name, register
from data_prep.errors import SourceError
from data_prep.options import Option

CLUSTER_FOLDER = "redis-cluster"  # under the data root, beside the datasets
SEEDS_FILE = "seeds"  # in the artifact's folder: the seeds of the cluster the user runs that holds it
PIPELINE = 1000


def cluster_of(dest, seeds=None, **how):
    """The cluster holding the artifact at DATA/DATASET/redis (or its .partial folder): the one at
    `seeds` (HOST:PORT[,...], a cluster the user runs, data_prep.redis.external), else the one the
    artifact was written to (its SEEDS_FILE), else the one IMGSTORE_REDIS_CLUSTER names (a script's
    fallback), else the project's own under the data folder; `how`: the project cluster's keywords
    (io_threads, delay_legs)."""
    return (redis_external.cluster(seeds or seeds_written(dest))
            or redis_cluster.Cluster(Path(dest).resolve().parent.parent / CLUSTER_FOLDER, **how))


def seeds_written(dest):
    """The seeds of the cluster the user runs that the artifact at `dest` was written to, or None
    (the project's cluster, or nothing written yet)."""
    path = Path(dest) / SEEDS_FILE
    return path.read_text().strip() if path.exists() else None


def prefix_of(dest, phase, cluster=None):
    """The key prefix of the artifact at DATA/DATASET/redis (in `cluster`, else its own): see prefix_for."""
    return prefix_for(Path(dest).resolve().parent.name, phase, cluster or cluster_of(dest))


def prefix_for(name, phase, cluster=None):
    """NAME:PHASE in the project's cluster; imgstore:NAME:PHASE in one the user runs, where the
    project's keys are all under imgstore: (NAME: a data set, or a benchmark's copy of one,
    DATASET-png). cluster: where the keys are (None: IMGSTORE_REDIS_CLUSTER's, if set)."""
    external = cluster.external if cluster is not None else redis_external.seeds_asked() is not None
    return f"{redis_external.KEY_PREFIX if external else ''}{name}:{phase}"


def marker(prefix):
    return f"{prefix}:~complete"


def index(prefix):
    return f"{prefix}:~index"


def client(cluster):
    """A cluster client (routes by slot, follows MOVED/ASK) for bulk work."""
    return cluster.client()


def keys_of(c, prefix):
    """The record keys of a complete data set, in order."""
    value = c.get(marker(prefix))
    if value is None:
        raise SourceError(f"Redis: no complete data set {prefix} (its marker {marker(prefix)} is missing)")
    count, listed = int(value.split()[0]), c.llen(index(prefix))
    if listed != count:
        raise SourceError(f"Redis: {index(prefix)} lists {listed} keys but {marker(prefix)} says {count}: the data "
                          "set was changed after it was written (prepare it again with --force)")
    return keys_of_index(c, prefix)


def keys_of_index(c, prefix):
    return [k.decode() for k in c.lrange(index(prefix), 0, -1)]


def marker_of(c, prefix):
    """[COUNT, FINGERPRINT] of the complete data set under `prefix`, or None."""
    value = c.get(marker(prefix))
    if value is None:
        return None
    return value.decode().split() if isinstance(value, bytes) else value.split()


def marker_text(count, fingerprint):
    """A complete data set's marker: its record count and its source's fingerprint."""
    return f"{count} {fingerprint or '-'}"


def check_marker(c, prefix, count, fingerprint):
    """The complete data set under `prefix` is the one a manifest describes: its marker's record
    count and source fingerprint (written last, by _Writer.finish) are the manifest's."""
    held = marker_of(c, prefix)
    if held is None:
        raise SourceError(f"Redis: no complete data set {prefix} (its marker {marker(prefix)} is missing): "
                          "prepare it again")
    if held != marker_text(count, fingerprint).split():
        raise SourceError(f"Redis: {prefix} holds {held[0]} records of source {held[-1][:16]}, the manifest here "
                          f"describes {count} of {(fingerprint or '-')[:16]}: the cluster was written by another "
                          "prepare since; prepare it again (--force)")


def delete_prefix(c, prefix):
    """Every key under PREFIX: (a data set, complete or not), node by node; one key per UNLINK,
    since a cluster refuses multi-key commands across hash slots. The completion marker goes
    first, so that a deletion cut short never leaves a marker vouching for missing records."""
    c.unlink(marker(prefix))
    for node in c.get_primaries():
        r = c.get_redis_connection(node)
        pipe = r.pipeline(transaction=False)
        for n, key in enumerate(r.scan_iter(match=f"{prefix}:*", count=PIPELINE), 1):
            pipe.unlink(key)
            if n % PIPELINE == 0:
                pipe.execute()
        pipe.execute()


def _check_ours(c, cluster, dest, phase, written):
    """Refuses (SourceError) to remove a phase of the data set at `dest` from a shared cluster
    unless `written`, the manifest there, describes it: its marker, or with no manifest, any key."""
    prefix = prefix_of(dest, phase, cluster)
    held = marker_of(c, prefix)
    if written is None:
        if held is not None or _holds_any(c, prefix):
            whose = f"{held[0]} records of source {held[-1]}" if held else "keys but no completion marker"
            raise SourceError(f"Redis: {cluster.name} holds {prefix} ({whose}), and no manifest at {dest} says it is "
                              "this checkout's: nothing removed (prepare.py clean --force removes it whoever wrote it)")
        return
    split = written.splits.get(phase)
    mine = marker_text(split.count, written.source_fingerprint).split() if split else None
    if held is not None and held != mine:
        raise SourceError(f"Redis: {cluster.name} holds {prefix} as {held[0]} records of source {held[-1]}, the "
                          f"manifest at {dest} describes {mine[0] if mine else 0} of {mine[-1] if mine else '-'}: "
                          "another checkout's data set; nothing removed (prepare.py clean --force removes it)")


def _holds_any(c, prefix):
    """Whether any key is under PREFIX: on any master."""
    return any(next(c.get_redis_connection(node).scan_iter(match=f"{prefix}:*", count=PIPELINE), None) is not None
               for node in c.get_primaries())


def pipelined(c, keys, *commands):
    """(key, [each command's reply]) for every key, PIPELINE keys per round trip; commands are
    client method names ("get", "strlen", ...)."""
    for lo in range(0, len(keys), PIPELINE):
        pipe = c.pipeline(transaction=False)
        for key in keys[lo:lo + PIPELINE]:
            for command in commands:
                getattr(pipe, command)(key)
        replies = pipe.execute()
        n = len(commands)
        for i, key in enumerate(keys[lo:lo + PIPELINE]):
            yield key, replies[i * n:(i + 1) * n]


def records(dest, phase, cluster=None):
    """(key, Datum bytes) of the artifact at `dest`, in key order, from `cluster` (a run's: the one
    its location reaches), else the artifact's own (cluster_of); the cluster is started for the
    reading if it is not up."""
    cluster = cluster_of(dest) if cluster is None else cluster
    with cluster.session():
        c = client(cluster)
        try:
            prefix = prefix_of(dest, phase, cluster)
            for key, (value,) in pipelined(c, [f"{prefix}:{k}" for k in keys_of(c, prefix)], "get"):
                if value is None:
                    raise SourceError(f"Redis: key {key} is missing")
                yield key[len(prefix) + 1:].encode(), value
        finally:
            c.close()


class _Batch:
    """One pipeline of SETs and the index entries for them."""

    def __init__(self, c, prefix):
        self.pipe, self.prefix, self.keys = c.pipeline(transaction=False), prefix, []

    def put(self, key, value):
        key = key.decode() if isinstance(key, bytes) else key
        self.pipe.set(f"{self.prefix}:{key}", value)
        self.keys.append(key)


class _Writer(datum.BatchWriter):
    """Writes one split into a running cluster (build.write_artifact keeps it up: `session`)."""

    def __init__(self, cluster, prefix, overwrite, fingerprint=None):
        """overwrite: True (any complete data set under `prefix`), False (none), or the [COUNT,
        FINGERPRINT] of the one that may be (the local manifest's, on a cluster the user runs)."""
        import redis
        self.cluster, self.prefix, self.count, self.fingerprint = cluster, prefix, 0, fingerprint or "-"
        self.client = client(cluster)
        try:
            held = marker_of(self.client, prefix)
            if held is not None and overwrite is not True and held != overwrite:
                raise SourceError(f"Redis cluster under {cluster.root} already holds a complete data set {prefix} "
                                  f"({held[0]} records of source {held[-1]}) that no manifest here describes; "
                                  "--force overwrites it")
            delete_prefix(self.client, prefix)  # also what a killed earlier write left
        except BaseException as e:
            self.client.close()
            if isinstance(e, redis.RedisError):
                raise SourceError(f"Redis cluster under {cluster.root}: {e}") from e
            raise
        super().__init__()

    def begin(self):
        return _Batch(self.client, self.prefix)

    def commit(self):
        import redis
        if not self.batch.keys:
            return
        self.batch.pipe.rpush(index(self.prefix), *self.batch.keys)
        try:
            self.batch.pipe.execute()
            self._wait_replicated()
        except redis.RedisError as e:  # full (maxmemory), a node gone: no marker, nothing trusted
            why = str(e).split("caused error: ")[-1]  # not the command, which holds a whole Datum
            raise SourceError(f"Redis cluster under {self.cluster.root}: writing {self.prefix} failed "
                              f"after {self.count} records: {why}") from e
        self.count += len(self.batch.keys)

    def _wait_replicated(self, timeout_ms=10000):
        """With replicas: every master's writes are on its replicas before the next batch (a
        failover forced while a write is only on its master would drop it; Redis replicates
        after it acknowledges)."""
        if not self.cluster.replicas:
            return
        # one WAIT per master: redis-py's cluster client sums WAIT's replies over its target nodes,
        # so a master whose replica is behind would pass on the others' acknowledgements
        behind = {}
        for node in self.client.get_primaries():
            acks = self.client.get_redis_connection(node).execute_command("WAIT", self.cluster.replicas, timeout_ms)
            if acks < self.cluster.replicas:
                behind[node.name] = acks
        if behind:
            raise SourceError(f"Redis cluster under {self.cluster.root}: writing {self.prefix}, masters "
                              f"{', '.join(behind)} had their writes on fewer than {self.cluster.replicas} replicas "
                              f"after {timeout_ms / 1000:g} s; no completion marker written")

    def finish(self):
        listed = self.client.llen(index(self.prefix))
        missing = None if listed != self.count else next(
            (key for key, (there,) in pipelined(self.client, [f"{self.prefix}:{k}" for k in keys_of_index(
                self.client, self.prefix)], "exists") if not there), None)
        if listed != self.count or missing:  # a retried pipeline appended twice; a failover lost a write
            self.client.close()
            found = (f"{index(self.prefix)} lists {listed} keys" if listed != self.count else
                     f"record {missing} is not there (lost in a failover?)")
            raise SourceError(f"Redis cluster under {self.cluster.root}: {found} after {self.count} records were "
                              "written; no completion marker written")
        self.client.set(marker(self.prefix), marker_text(self.count, self.fingerprint))
        self.cluster.save()  # what a restart loads: the complete data set
        self.client.close()

    def abandon(self):
        self.client.close()


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


@register
class RedisBackend(datum.DatumBackend, Backend):
    name, label, color = "redis", "Redis Cluster", "#a6761d"
    db = "REDIS"
    location = "redis-cluster"
    options = (Option("prefetch_depth", "GETs Caffe keeps in flight (default 128; 1: one request per round trip)",
                      minimum=1, patch="0011"),
               Option("out_of_order", "hand records to the net in arrival order, not key order", kind="flag",
                      patch="0011"),
               Option("redis_io", "where Caffe's reader receives and parses the replies: thread (default: an I/O "
                      "thread of its own, beside the prefetch thread's transform) or inline (on the prefetch "
                      "thread, the reader without its I/O thread)", kind="choice", choices=("thread", "inline"),
                      proto_enum="RedisIO", patch="0011"),
               datum.TRANSFORM_THREADS)

    def unsupported(self, dataset, seeds=None, **_run_only):
        if shutil.which("redis-server") is None and not seeds and not redis_external.seeds_asked():
            return "redis-server is not installed (apt-get install redis-server)"
        from caffe.proto import caffe_pb2
        if "REDIS" not in caffe_pb2.DataParameter.DB.keys():
            return "this Caffe build has no REDIS DB (caffe/patches/0011: run make caffe)"
        return None

    def paths(self, dest, phase):
        return []  # nothing local but the manifest

    def writer(self, split, dest, ctx, seeds=None, **_run_only):
        """seeds: the cluster the user runs to write into (None: the project's); the location's
        other options (the round trip) are a run's, not the writing's."""
        cluster = cluster_of(dest, seeds)
        if cluster.external:
            (Path(dest) / SEEDS_FILE).write_text(cluster.seed_text() + "\n")
        return _Writer(cluster, prefix_of(ctx.final_dir, split.phase, cluster),
                       self._may_overwrite(cluster, ctx, split.phase), ctx.source_fingerprint)

    @staticmethod
    def _may_overwrite(cluster, ctx, phase):
        """--force: any data set; else the one the manifest here describes: on the project's
        cluster whatever is there, on one the user runs only a data set whose marker is the
        manifest's (another checkout's is left alone)."""
        written = manifest.load(ctx.final_dir)
        if ctx.overwrite or (written and not cluster.external):
            return True
        if written and phase in written.splits:
            return marker_text(written.splits[phase].count, written.source_fingerprint).split()
        return False

    def session(self, dest, seeds=None, **_run_only):
        return cluster_of(dest, seeds).session()

    def remove(self, dest, force=False, seeds=None, **_run_only):
        """The manifest first (no manifest vouches for records going), then every key of both
        phases, under this data set's prefixes alone; the project's cluster saves after, so that
        a restart does not bring them back. On a cluster the user runs (the one the artifact was
        written to, or at `seeds`): see _remove_shared."""
        cluster = cluster_of(dest, seeds)
        if cluster.external:
            return self._remove_shared(dest, cluster, force)
        super().remove(dest)
        if not cluster.root.exists():
            return  # the project's cluster never ran under this data folder: no record anywhere
        with cluster.session():
            c = client(cluster)
            try:
                for phase in ("train", "test"):
                    delete_prefix(c, prefix_of(dest, phase, cluster))
            finally:
                c.close()
            cluster.save()

    def _remove_shared(self, dest, cluster, force):
        """On a cluster the user runs, which other checkouts may share, only this checkout's data
        set: each phase's marker must be the manifest's (or absent: what a removal or a write cut
        short left); --force removes whatever is under the prefixes. The keys go first and the
        manifest last, so that a removal cut short is still this checkout's to finish."""
        written = manifest.load(dest)
        c = client(cluster)
        try:
            if not force:
                for phase in ("train", "test"):
                    _check_ours(c, cluster, dest, phase, written)
            for phase in ("train", "test"):
                delete_prefix(c, prefix_of(dest, phase, cluster))
        finally:
            c.close()
        super().remove(dest)

    def footprint(self, dest, phase=None):
        """As the servers report it: value bytes (STRLEN) and memory used (MEMORY USAGE)."""
        cluster = cluster_of(dest)
        with cluster.session():
            c = client(cluster)
            try:
                apparent = allocated = count = 0
                for p in [phase] if phase else ["train", "test"]:
                    prefix = prefix_of(dest, p, cluster)
                    keys = [f"{prefix}:{k}" for k in keys_of(c, prefix)]
                    for _, (length, used) in pipelined(c, keys, "strlen", "memory_usage"):
                        apparent, allocated = apparent + (length or 0), allocated + (used or 0)
                    allocated += sum(c.memory_usage(k) or 0 for k in (index(prefix), marker(prefix)))
                    count += len(keys)
                return {"apparent_bytes": apparent, "allocated_bytes": allocated, "files": 0, "records": count}
            finally:
                c.close()

    def read(self, dest, phase, ctx):
        for _, value in records(dest, phase):
            yield datum.decode(value)

    def source(self, dest, phase, cluster=None):
        """The Data layer's source for one split: in `cluster` (a run's), else the artifact's own."""
        cluster = cluster_of(dest) if cluster is None else cluster
        return cluster.source(prefix_of(dest, phase, cluster))

    def data_layer(self, dest, dataset, mean_file, read_options=None, source=None, cluster=None):
        """cluster: the one the run's location reaches (its --cluster), which each phase's source
        names; without it, the artifact's own (cluster_of)."""
        if cluster is None or source:
            return super().data_layer(dest, dataset, mean_file, read_options, source)
        inner = super()
        return lambda batch, phase: inner.data_layer(dest, dataset, mean_file, read_options,
                                                     self.source(dest, phase_name(phase), cluster))(batch, phase)


@locations.register
class RedisClusterLocation(locations.Location):
    """Records in a Redis Cluster's memory (data_prep.redis.cluster). An in-memory store has no
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
