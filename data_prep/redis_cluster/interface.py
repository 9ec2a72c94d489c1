"""One interface over the two kinds of Redis Cluster a run reads: the project's own (Cluster,
data_prep.redis_cluster.cluster: servers it starts on loopback, a delay proxy, a keeper) and one the user
runs (ExternalCluster, data_prep.redis_cluster.external: seeds and credentials, nothing started).

The backend (data_prep.backends.redis_store), the runner and the benchmarks reach a cluster
through the members named here. A few members exist on one kind only; callers use them where
that kind is certain (`cluster.external` tested, or a benchmark that refuses a user's cluster):
PROJECT_ONLY and EXTERNAL_ONLY name them (tests/test_redis_interface.py holds callers to this).
"""
import statistics
import time
from abc import ABC, abstractmethod

# Members of the project's Cluster alone, each with what it is.
PROJECT_ONLY = {
    "count": "how many masters",
    "port": "the first node's port",
    "node_timeout_ms": "Redis Cluster's node timeout, the wait before its own failover",
    "node_dir": "a node's folder (its RDB file and log)",
    "server_pids": "the redis-server pids, None for a node not running",
    "proxy_pid": "the delay proxy's pid, or None",
    "stop_leftovers": "stop what a killed owner left running",
    "stop_keeper": "leave a lost master to Redis Cluster's own failover",
    "masters_ports": "the ports of the nodes that serve slots now",
    "slot_owners": "slot -> the node serving it",
    "migrate_slots": "move slots to another node, as redis-cli --cluster reshard does",
    "nodes": "a client per node, on its own port",
    "node_client": "a client of one node",
    "node_roles": "each node's id, master and slots",
}
# Members of a user's ExternalCluster alone: where it is named in messages and records.
EXTERNAL_ONLY = {
    "name": "'the cluster at SEEDS', for messages",
    "seed_text": "the seeds, HOST:PORT,HOST:PORT",
    "user": "the ACL user logged in as",
}


class ClusterInterface(ABC):
    """What the backend, the runner and the benchmarks ask of a Redis Cluster, either kind."""
    external: bool  # project's: False; user's: True
    replicas: int  # replicas per master; user's: 0 (writes are not WAITed on: its replication is its owner's)
    root: object  # project's: its folder (a Path); user's: "seeds HOST:PORT,..." for messages

    @abstractmethod
    def client(self, timeout=30):
        """A cluster client for bulk work: project's with its password; user's as the environment's user."""

    @abstractmethod
    def source(self, prefix):
        """Caffe's Data layer source (redis://SEEDS/PREFIX): project's nodes' ports; user's seeds."""

    @abstractmethod
    def session(self, rtt_ms=None):
        """A context: project's up for the while (started and stopped if it was not running); user's as it is."""

    @abstractmethod
    def start(self, rtt_ms=None, **how):
        """Project's: running, reached at rtt_ms, True if the servers were started; user's: False (rtt refused)."""

    @abstractmethod
    def stop(self):
        """Project's: keeper, proxy and servers stopped (no save); user's: nothing (not the project's)."""

    @abstractmethod
    def running(self):
        """Project's: every node's redis-server alive; user's: always True."""

    @abstractmethod
    def save(self, timeout=600):
        """Project's: every node's RDB file written; user's: nothing (its persistence is its owner's)."""

    @abstractmethod
    def rtt_asked_ms(self):
        """The round trip the delay proxy adds: project's, or None when direct; user's: None."""

    @abstractmethod
    def node_ports(self):
        """Project's: every node's port, masters first; user's: [] (its nodes are its owner's)."""

    @abstractmethod
    def proxy_ports(self):
        """Project's: the delay proxy's port per node; user's: [] (no proxy)."""

    @abstractmethod
    def server_usage(self):
        """Per node: CPU seconds and RSS (project's: its processes; user's: masters' INFO, None without +info)."""

    @abstractmethod
    def failover_events(self, since, until):
        """Project's: what the nodes' logs say of a failover between two datetimes; user's: [] (logs not ours)."""

    @abstractmethod
    def rtt_ms(self, samples=21):
        """Median PING round trip in ms: project's through the address clients use; user's to the first master."""

    @abstractmethod
    def describe(self):
        """The cluster for a run's record: project's shape, ports, proxy and round trip; user's seeds, server, user."""


def info_by_node(c, nodes, section=None):
    """{node name: its INFO (a dict)} of `nodes` (ClusterNodes) through cluster client `c`: the one
    reading of INFO across nodes. redis-py answers a command sent to several nodes with {node name:
    reply} but one sent to one node (a cluster with one master) with the reply alone."""
    nodes = list(nodes)
    replies = c.info(section, target_nodes=nodes) if section else c.info(target_nodes=nodes)
    if len(nodes) == 1 and nodes[0].name not in replies:
        return {nodes[0].name: replies}
    return replies


def median_ms(call, samples=21):
    """The median time of `call()` over `samples` calls, in ms (a PING's round trip, say)."""
    times = []
    for _ in range(samples):
        t = time.perf_counter()
        call()
        times.append((time.perf_counter() - t) * 1000)
    return round(statistics.median(times), 3)
