"""The keys and markers a data set is stored under in a Redis Cluster, and the reading of them.

Keys: PREFIX:KEY per record (KEY as in LMDB), PREFIX:~index (the keys in order), and
PREFIX:~complete ("COUNT FINGERPRINT": the record count and the source's hash), written last,
once the index holds exactly COUNT keys, and deleted first when a data set is replaced; both
readers (Caffe's and records()) refuse an index of another length. PREFIX = DATASET:PHASE
(imgstore:DATASET:PHASE in a cluster the user runs, data_prep.redis_cluster.external, where the project
touches no other key). The records live in the servers (data_prep.redis_cluster.cluster, under DATA/redis-cluster/); the artifact's folder holds only
its manifest and, written into a cluster the user runs (the location's option seeds, --cluster), those
seeds (SEEDS_FILE), which every later reading of the artifact goes to.
"""
from pathlib import Path

from data_prep.redis_cluster import cluster as redis_cluster, external as redis_external
from data_prep.errors import SourceError

CLUSTER_FOLDER = "redis-cluster"  # under the data root, beside the datasets
SEEDS_FILE = "seeds"  # in the artifact's folder: the seeds of the cluster the user runs that holds it
PIPELINE = 1000


def cluster_of(dest, seeds=None, **how):
    """The cluster holding the artifact at DATA/DATASET/redis (or its .partial folder): the one at
    `seeds` (HOST:PORT[,...], a cluster the user runs, data_prep.redis_cluster.external), else the one the
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

