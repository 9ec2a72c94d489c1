"""The keys and markers a data set is stored under in a Redis Cluster, and the reading of them.

Keys: PREFIX:KEY per record (KEY as in LMDB: it starts with eight digits, so never with ~),
PREFIX:~writer (the id of the data folder that writes the data set, WRITER_FILE there: written
before any record), PREFIX:~index (the keys in order), and PREFIX:~complete ("COUNT FINGERPRINT":
the record count and the source's hash), written last, once the index holds exactly COUNT keys,
and deleted first when a data set is replaced; both readers (Caffe's and records()) refuse an
index of another length. PREFIX = DATASET:PHASE (imgstore:DATASET:PHASE in a cluster the user
runs, data_prep.redis_cluster.external, where the project touches no other key, and where two
checkouts that prepare the same data set share the prefix: ~writer says whose it is). A DATASET
with a colon (it would nest under another's prefix) or a space or control character is
refused; SCAN patterns escape Redis's glob characters (match_under). The records live in the
servers (data_prep.redis_cluster.cluster, under DATA/redis-cluster/); the artifact's folder holds only
its manifest and, written into a cluster the user runs (the location's option seeds, --cluster), those
seeds (SEEDS_FILE), which every later reading of the artifact goes to.
"""
import os
import secrets
from pathlib import Path

from data_prep.redis_cluster import cluster as redis_cluster, external as redis_external
from data_prep.errors import SourceError

CLUSTER_FOLDER = "redis-cluster"  # under the data root, beside the datasets
SEEDS_FILE = "seeds"  # in the artifact's folder: the seeds of the cluster the user runs that holds it
WRITER_FILE = ".redis-writer"  # in the data folder: the id its data sets' ~writer keys hold
GLOB_SPECIALS = "\\*?[]"  # what Redis's glob (SCAN MATCH) reads as a pattern
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
    bad = next((ch for ch in name if ch == ":" or ch.isspace() or not ch.isprintable()), None)
    if bad is not None or not name:
        raise SourceError(f"Redis: a data set named {name!r} cannot be a key prefix"
                          + (f" (it holds {bad!r}: keys are PREFIX:PHASE:KEY)" if bad is not None else ""))
    external = cluster.external if cluster is not None else redis_external.seeds_asked() is not None
    return f"{redis_external.KEY_PREFIX if external else ''}{name}:{phase}"


def match_under(prefix):
    """The SCAN MATCH pattern of every key under PREFIX: alone: the prefix's glob characters
    escaped (a data set named a* must not match ab's keys)."""
    return "".join("\\" + ch if ch in GLOB_SPECIALS else ch for ch in prefix) + ":*"


def writer_key(prefix):
    return f"{prefix}:~writer"


def writer_id(dest):
    """The id of the data folder holding the artifact at `dest` (DATA/DATASET/redis or its
    .partial): made once, at random, and kept in DATA/WRITER_FILE; what a data set's ~writer key
    holds, so that a checkout replaces or removes only what it wrote."""
    path = Path(dest).resolve().parent.parent / WRITER_FILE
    if not path.exists():  # written whole, then linked: a prepare beside this one reads all of it or none
        made = path.with_name(f"{WRITER_FILE}.{os.getpid()}.tmp")
        made.write_text(secrets.token_hex(8) + "\n")
        try:
            os.link(made, path)
        except FileExistsError:
            pass  # another prepare's id came first: it is this folder's
        finally:
            made.unlink()
    text = path.read_text().strip()
    if not text:
        raise SourceError(f"Redis: {path}, the data folder's writer id, is empty: remove it (prepare makes another)")
    return text


def writer_of(c, prefix):
    """The id in PREFIX:~writer, or None (nothing written, or a data set from before writers were kept)."""
    value = c.get(writer_key(prefix))
    return value.decode() if isinstance(value, bytes) else value


def not_ours(c, prefix, writer, mine=None):
    """Why the keys under PREFIX: are not this data folder's to replace or remove, or None (they
    are, or there are none). writer: this data folder's id (writer_id); mine: the [COUNT,
    FINGERPRINT] its manifest describes, which vouches for a data set written before writers
    were kept (no ~writer key)."""
    held, wrote = marker_of(c, prefix), writer_of(c, prefix)
    state = f"{held[0]} records of source {held[-1]}" if held else "keys but no completion marker"
    if wrote is not None:
        if wrote == writer:
            return None
        return (f"{state}, written by data folder {wrote}" + (f" (this one is {writer})" if writer else "")
                + ("" if held else ": another checkout's write in progress, or one cut short"))
    if held is not None:
        return None if mine is not None and held == mine else f"{state}, that no manifest here describes"
    return f"{state} and no writer" if _holds_any(c, prefix) else None


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
    first, so that a deletion cut short never leaves a marker vouching for missing records; the
    writer's key last, so that what it leaves is still its writer's to finish."""
    c.unlink(marker(prefix))
    writer = writer_key(prefix).encode()
    for node in c.get_primaries():
        r = c.get_redis_connection(node)
        pipe = r.pipeline(transaction=False)
        for n, key in enumerate((k for k in r.scan_iter(match=match_under(prefix), count=PIPELINE) if k != writer), 1):
            pipe.unlink(key)
            if n % PIPELINE == 0:
                pipe.execute()
        pipe.execute()
    c.unlink(writer_key(prefix))


def _check_ours(c, cluster, dest, phase, written):
    """Refuses (SourceError) to remove a phase of the data set at `dest` from a shared cluster
    unless `written`, the manifest there, says it is this data folder's, and the cluster agrees:
    its ~writer key holds this folder's id, or, for a data set written before writers were kept,
    its marker is the manifest's. With no manifest nothing found there is this folder's."""
    prefix = prefix_of(dest, phase, cluster)
    if written is None:
        why, described = not_ours(c, prefix, None), f"no manifest at {dest} says it is this checkout's"
    else:
        split = written.splits.get(phase)
        mine = marker_text(split.count, written.source_fingerprint).split() if split else None
        why = not_ours(c, prefix, writer_id(dest), mine)
        described = f"the manifest at {dest} describes {mine[0] if mine else 0} of {mine[-1] if mine else '-'}"
    if why:
        raise SourceError(f"Redis: {cluster.name} holds {prefix} as {why}, and {described}: another checkout's "
                          "data set; nothing removed (prepare.py clean --force removes it whoever wrote it)")


def _holds_any(c, prefix):
    """Whether any key is under PREFIX: on any master."""
    return any(next(c.get_redis_connection(node).scan_iter(match=match_under(prefix), count=PIPELINE), None) is not None
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

