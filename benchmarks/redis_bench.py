"""What the Redis benchmarks share: the cluster they read (the project's under the data folder,
or the one the user runs; or a cluster of the benchmark's own in a temporary folder), their
rounds, each cell's median and spread, and their JSON result."""
import json
import os
import shutil
import statistics
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from benchmarks import flags
from data_prep import build, datasets
from data_prep.redis_cluster import cluster as redis_cluster, external as redis_external
from data_prep.redis_cluster import keys as redis_keys
from experiments import runner


def cluster(data, **how):
    """The cluster holding the data sets under the data folder `data`: the one the user runs
    (IMGSTORE_REDIS_CLUSTER), else the project's; how: the project cluster's keywords (delay_legs, ...)."""
    return redis_keys.cluster_of(Path(data) / "any" / "redis", **how)


@contextmanager
def stopped_after(reached, scratch_prefix):
    """A temporary folder for the benchmark's nets; after, the cluster `reached` is stopped (one
    the user runs is left as it was) and the folder removed."""
    tmp = Path(tempfile.mkdtemp(prefix=scratch_prefix))
    try:
        yield tmp
    finally:
        reached.stop()
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def own_cluster(script, why, does, dataset, count, port, replicas=0):
    """A cluster of the benchmark's own (first node on `port`, in a temporary folder, the
    project's password and loopback rules) holding `count` records of the data set; stopped and
    removed after. Yields (data root, Cluster). Refused where the user names a cluster of theirs
    (IMGSTORE_REDIS_CLUSTER): the benchmark `script` (benchmarks/NAME.py) `does` things to its
    cluster ("kills masters") that `why` says are not the user's cluster's ("is not the
    project's to fail over")."""
    redis_external.refuse_external(script, why, f"unset {redis_external.SEEDS_ENV}: this benchmark {does} of a "
                                                "cluster it starts itself")
    root = Path(tempfile.mkdtemp(prefix=Path(script).stem.replace("_", "-") + "-"))
    previous_port = os.environ.get(redis_cluster.PORT_ENV)
    os.environ[redis_cluster.PORT_ENV] = str(port)  # where data_prep's writer finds this cluster
    own = redis_cluster.Cluster(root / redis_keys.CLUSTER_FOLDER, port=port, replicas=replicas)
    try:
        own.start(stops_with_caller=True)
        build.prepare(dataset, ["redis"], root, count=count, log=say)
        yield root, own
    finally:
        own.stop()
        shutil.rmtree(root, ignore_errors=True)
        if previous_port is None:
            os.environ.pop(redis_cluster.PORT_ENV)
        else:
            os.environ[redis_cluster.PORT_ENV] = previous_port


def add_own_cluster_flags(p):
    """--dataset and --count: what a benchmark's own cluster (own_cluster) holds."""
    p.add_argument("--dataset", default="cifar10", choices=list(datasets.REGISTRY))
    p.add_argument("--count", type=int, default=4000, help="records written to the benchmark's cluster")


def add_reading_net_flags(p, before, before_help):
    """--rtt, --before (seconds the net reads before the event measured), --batch and --depth: how
    a benchmark's net of one Data layer reads its cluster."""
    flags.add_rtt(p)
    p.add_argument("--before", type=float, default=before, help=before_help)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--depth", type=int, default=128, help="Redis requests in flight (prefetch_depth)")


def interleaved(rounds, cells):
    """(round from 0, the cell's index, cell) for every cell of every round, the cells in turn
    within a round, so that noise on a shared machine falls on every cell alike."""
    cells = list(cells)
    for r in range(rounds):
        for i, cell in enumerate(cells):
            yield r, i, cell


def spread(values, digits=1, width=0):
    """'MEDIAN [MIN-MAX]' of the values that are not None (the median `width` wide), or '-'."""
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return f"{statistics.median(values):{width}.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"


def machine():
    """The CPU model the tables name."""
    return runner.environment().get("cpu_model", "?")


def arguments(a):
    """A benchmark's parsed arguments as the JSON result keeps them: each as its text."""
    return {k: str(v) for k, v in vars(a).items()}


def write_result(path, result):
    """The JSON result, with the machine it was measured on, written beside `path` and renamed
    onto it, so that a benchmark cut short leaves no half-written file."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(dict(result, machine=runner.environment()), indent=1))
    os.replace(partial, path)


def say(text):
    print(text, file=sys.stderr, flush=True)
