"""A Redis Cluster (or Valkey) that the user runs, read and written where the project's own
cluster (data_prep.redis_cluster.cluster) would be: its seeds (HOST:PORT[,HOST:PORT...]) are the Redis
location's option, --cluster on prepare.py and run.py (data_prep.backends.redis_store); the
artifact keeps the seeds it was written to, so that reading it needs no flag. For scripts that
call the library without seeds (and the benchmarks, which take no --cluster), IMGSTORE_REDIS_CLUSTER
still names one: seeds_asked() is the one place that reads it.

Credentials come from the environment only, never from argv, a prototxt, a record or a log:
IMGSTORE_REDIS_USER (an ACL user; unset: the default user) and IMGSTORE_REDIS_PASSWORD, or
IMGSTORE_REDIS_PASSWORD_FILE, a file readable by its owner alone. Caffe's reader takes the same
variables (caffe/patches/0011).

The project's keys there are under imgstore:DATASET:PHASE, and nothing else is written or
deleted. The project never starts, stops, saves or restarts such a cluster: a cold run is
refused (its servers' memory is not the project's to drop), writes are not waited on by
replicas (replication is its owner's), and the benchmarks that fail over, migrate slots, stop
servers or put a delay proxy in front refuse it (refuse_external).

Least privilege (docs/redis.md): READER_RULES are what run.py and Caffe's reader send, WRITER_RULES
what prepare.py and clean send besides; INFO (servers' versions, CPU, memory) is optional and
recorded as not available where the user may not send it.
"""
import os
import stat
from contextlib import nullcontext
from pathlib import Path

from data_prep.errors import SourceError
from data_prep.redis_cluster.interface import ClusterInterface, info_by_node, median_ms

SEEDS_ENV = "IMGSTORE_REDIS_CLUSTER"
USER_ENV = "IMGSTORE_REDIS_USER"
PASSWORD_ENV = "IMGSTORE_REDIS_PASSWORD"
PASSWORD_FILE_ENV = "IMGSTORE_REDIS_PASSWORD_FILE"
KEY_PREFIX = "imgstore:"
CLUSTER_FLAG = "--cluster"  # the Redis location's option naming the seeds (data_prep.backends.redis_store)
CLUSTER_FLAG_HELP = ("the redis backend in a Redis or Valkey Cluster you run, reached at these seeds; credentials "
                     f"from {USER_ENV} and {PASSWORD_ENV} or {PASSWORD_FILE_ENV} (chmod 600), never from the "
                     "command line")
# ACL rules, set on every node (ACLs are per node), found by running each command as a user with
# only these, then without each one (tests/test_redis_acl.py uses them alone): a reader's (run.py:
# Caffe's REDIS reader and the warming; the read-only benchmarks) and a writer's (prepare.py,
# prepare.py clean, redis_path.py's PNG copy: a reader's and these). The python client sends
# COMMAND when it connects; Caffe's reader sends ASKING while a slot migrates.
READER_RULES = (f"~{KEY_PREFIX}*", "+get", "+llen", "+lrange", "+ping", "+asking", "+cluster|slots", "+command")
WRITER_RULES = READER_RULES + ("+set", "+rpush", "+exists", "+unlink", "+scan", "+strlen", "+memory|usage")


class ExternalClusterError(SourceError):
    pass


def refuse_external(command, why, fix=f"unset {SEEDS_ENV}"):
    """Stops `command` (e.g. "benchmarks/redis_failover.py") with one line where a cluster the
    user runs is named: `why` says what the command would do to it ("is not the project's to
    fail over"), `fix` what to do instead."""
    if seeds_asked():
        raise SystemExit(f"{command}: a cluster you run ({SEEDS_ENV}) {why}; {fix}")


def seeds_asked():
    """The seeds IMGSTORE_REDIS_CLUSTER names, or None where it is unset: the fallback of a script
    that gives no seeds (the only reading of the variable)."""
    text = os.environ.get(SEEDS_ENV, "").strip()
    return parse_seeds(text, SEEDS_ENV) if text else None


def parse_seeds(text, what=CLUSTER_FLAG):
    """[(host, port)] of HOST:PORT[,HOST:PORT...]; what: where the text came from, for the error."""
    seeds = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ExternalClusterError(f"{what}: {item!r} is not HOST:PORT")
        seeds.append((host, int(port)))
    if not seeds:
        raise ExternalClusterError(f"{what} names no seed (HOST:PORT[,HOST:PORT...])")
    return seeds


def seed_text(text):
    """--cluster's value: the seeds as HOST:PORT,HOST:PORT (spaces dropped), checked."""
    return ",".join(f"{h}:{p}" for h, p in parse_seeds(text))


def password(cluster_name="the cluster you run"):
    """The password from IMGSTORE_REDIS_PASSWORD_FILE (owner-only) or IMGSTORE_REDIS_PASSWORD; the
    file's is put in the environment, where Caffe's reader looks for it."""
    path = os.environ.get(PASSWORD_FILE_ENV)
    if path:
        try:
            info = os.stat(path)
        except OSError as e:
            raise ExternalClusterError(f"{PASSWORD_FILE_ENV}: {path}: {e.strerror}") from e
        if info.st_uid != os.getuid() or info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ExternalClusterError(f"{PASSWORD_FILE_ENV}: {path} must belong to this user and be readable "
                                       "by it alone (chmod 600)")
        os.environ[PASSWORD_ENV] = Path(path).read_text().strip()
    if not os.environ.get(PASSWORD_ENV):
        raise ExternalClusterError(f"{cluster_name} needs a password: set {PASSWORD_ENV} "
                                   f"or {PASSWORD_FILE_ENV} (and {USER_ENV} for an ACL user)")
    return os.environ[PASSWORD_ENV]


class ExternalCluster(ClusterInterface):
    """The seeds of a cluster the user runs, behind the interface of the project's own Cluster
    (data_prep.redis_cluster.interface)."""
    replicas = 0  # writes are not WAITed on: the owner's replication is the owner's
    external = True

    def __init__(self, seeds):
        self.seeds = list(seeds)
        self.root = "seeds " + self.seed_text()  # "Redis cluster under ROOT: ..." in redis_store's messages
        self.name = "the cluster at " + self.seed_text()

    def seed_text(self):
        return ",".join(f"{h}:{p}" for h, p in self.seeds)

    def source(self, prefix):
        return f"redis://{self.seed_text()}/{prefix}"

    def client(self, timeout=30):
        """A cluster client logged in as the environment says; an error names the cluster and
        the user, never the password."""
        import redis
        from redis.cluster import ClusterNode, RedisCluster
        user = os.environ.get(USER_ENV) or None
        try:
            return RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in self.seeds], username=user,
                                password=password(self.name), socket_timeout=timeout, socket_connect_timeout=5)
        except (redis.RedisError, redis.exceptions.RedisClusterException) as e:  # the latter: no seed answered
            who = f"user {user}" if user else "the default user"
            raise ExternalClusterError(f"{self.name}, logging in as {who}: {e}") from e

    # the project never runs this cluster: nothing to start, stop, save or proxy
    def session(self, rtt_ms=None):
        return nullcontext(self)

    def start(self, rtt_ms=None, **_):
        if rtt_ms:
            raise ExternalClusterError(f"{self.name}: --rtt puts a delay proxy in front of the project's own "
                                       "cluster; a cluster you run has its own network")
        return False

    def stop(self):
        pass

    def running(self):
        return True

    def save(self, timeout=None):
        pass

    def rtt_asked_ms(self):
        return None

    def node_ports(self):
        return []

    def proxy_ports(self):
        return []

    def server_usage(self):
        """Per master (HOST:PORT): its CPU seconds, resident memory and keyspace hits (reads of a
        key it holds) as its INFO says; None each where the user may not ask (an ACL without +info)."""
        import redis
        c = self.client()
        try:
            primaries = c.get_primaries()
            try:
                info = info_by_node(c, primaries)
            except redis.RedisError:
                return {node.name: None for node in primaries}
            return {name: {"cpu_seconds": round(v["used_cpu_sys"] + v["used_cpu_user"], 3),
                           "rss_bytes": v["used_memory_rss"], "keyspace_hits": v["keyspace_hits"]}
                    for name, v in info.items()}
        finally:
            c.close()

    def failover_events(self, since, until):
        return []  # its servers' logs are not the project's to read

    def rtt_ms(self, samples=21):
        """Median PING round trip to the first master, in ms (interface.median_ms)."""
        c = self.client()
        try:
            return self._rtt_ms(c, samples)
        finally:
            c.close()

    @staticmethod
    def _rtt_ms(c, samples=21):
        first = c.get_primaries()[0]
        return median_ms(lambda: c.ping(target_nodes=first), samples)

    def describe(self):
        """Which cluster: seeds, shape (from the slot map), the round trip, that the project did
        not start it; the servers' kind and versions from INFO, or, where the user may not send
        INFO (an ACL without it: +@dangerous holds it), None with the reason in not_available."""
        import redis
        c = self.client()
        not_available = []
        try:
            masters, replicas = len(c.get_primaries()), len(c.get_replicas())
            try:
                info = info_by_node(c, c.get_primaries(), "server")
            except redis.ResponseError as e:  # NOPERM, or a server without INFO
                info = None
                not_available.append(f"INFO: {str(e).splitlines()[0]} (user {self.user()}): no servers' versions, "
                                     "CPU or memory")
            rtt = self._rtt_ms(c)
        finally:
            c.close()
        versions = sorted({v.get("valkey_version") or v.get("redis_version") for v in info.values()}) if info else None
        server = None if info is None else "valkey" if any("valkey_version" in v for v in info.values()) else "redis"
        return {"external": True, "started_by_project": False, "seeds": self.seed_text(), "server": server,
                "versions": versions, "masters": masters, "replicas": replicas, "user": self.user(),
                "rtt_ms_measured": rtt, "not_available": not_available or None}

    @staticmethod
    def user():
        return os.environ.get(USER_ENV) or "default"


def cluster(seeds=None):
    """The cluster at `seeds` (HOST:PORT[,...]); none given, the one IMGSTORE_REDIS_CLUSTER names;
    None where neither names one."""
    found = parse_seeds(seeds) if seeds else seeds_asked()
    return ExternalCluster(found) if found else None
