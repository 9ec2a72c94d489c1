"""A Redis Cluster holding the same Datum records as the LMDB backend, read by Caffe's own Data
layer through the REDIS DB of caffe/patches/0011 (GETs pipelined ahead of the cursor, in key or
arrival order). The paper's future work: a distributed key-value store. The keys and markers a
data set is stored under: data_prep.redis_cluster.keys; the location a run reads it from:
data_prep.redis_cluster.location.
"""
import shutil
from pathlib import Path

from data_prep import manifest
from data_prep.redis_cluster import external as redis_external
from data_prep.backends import Backend, datum, phase_name, register
from data_prep.errors import SourceError
from data_prep.options import Option
from data_prep.redis_cluster import location  # noqa: F401  registers the redis-cluster location
from data_prep.redis_cluster.keys import (SEEDS_FILE, _check_ours, client, cluster_of, delete_prefix, index, keys_of,
                                          keys_of_index, marker, marker_of, marker_text, not_ours, pipelined, prefix_of,
                                          records, writer_id, writer_key)


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

    def __init__(self, cluster, prefix, overwrite, fingerprint=None, writer=None):
        """overwrite: True (any data set under `prefix`), False (none), or the [COUNT, FINGERPRINT]
        of the one that may be (the local manifest's, on a cluster the user runs). writer: on a
        cluster the user runs, this data folder's id (keys.writer_id): its own data set, complete
        or cut short, may be replaced; another's, even a write still in progress, only with --force."""
        import redis
        self.cluster, self.prefix, self.count, self.fingerprint = cluster, prefix, 0, fingerprint or "-"
        self.client = client(cluster)
        try:
            if overwrite is not True:
                held = marker_of(self.client, prefix)
                why = (not_ours(self.client, prefix, writer, overwrite or None) if writer is not None else
                       None if held is None or held == overwrite else f"{held[0]} records of source {held[-1]}")
                if why:
                    raise SourceError(f"Redis cluster under {cluster.root} already holds a "
                                      f"{'complete' if held else 'partial'} data set {prefix} ({why}) that no "
                                      "manifest here describes; --force overwrites it")
            delete_prefix(self.client, prefix)  # also what a killed earlier write left
            if writer is not None:
                self.client.set(writer_key(prefix), writer)  # before any record: whose write this is
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
                       self._may_overwrite(cluster, ctx, split.phase), ctx.source_fingerprint,
                       writer_id(dest) if cluster.external else None)

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
        set: each phase's ~writer key must hold this data folder's id (keys._check_ours); --force
        removes whatever is under the prefixes. The keys go first and the
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
