"""A Redis Cluster of Debian's redis-server processes, started and stopped by the project.

  python -m data_prep.redis_cluster start [--nodes 3] [--replicas 1] [--rtt 10ms] [--io-threads 2]
  python -m data_prep.redis_cluster status | stop | stop-keeper

Layout under the data folder (default data/redis-cluster/): node-I/ (nodes.conf, dump.rdb,
redis.log, redis.pid) per node, proxy.pid, and with replicas keeper.pid and keeper.log
(data_prep/redis_keeper.py: a master whose process exits is failed over at once). A pid file
holds the pid and the process's start time (`PID [SOURCE] started=TICKS`): only the process
that was started there is ever signalled, never another that got its number later. Node I
listens on 127.0.0.1:PORT+I (bus: +10000) and nowhere else; a password is required (IMGSTORE_REDIS_PASSWORD; generated for this process
when unset). It is handed to redis-server on stdin and to Caffe in the environment, so no file
the project writes holds it.

Network latency: this kernel may lack the netem qdisc, so a delay proxy
(data_prep/delay_proxy.c) at 127.0.0.1:PORT+100+I adds the asked round trip, all of it to the
client's requests (Cluster(delay_legs="both"): half each way; the client sees the same round
trip, but the proxy then holds half a round trip of replies in this host's memory, which a
real network keeps on the wire). With a delay the nodes announce the proxies' ports, so a cluster client
(CLUSTER SLOTS) reaches every node through them; without one, the nodes' own ports.

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
import re
import secrets
import select
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import psutil

import toolchain
from data_prep.errors import SourceError
from data_prep.options import parse_ms
from processes import child_setup, process_id, started as _started

ROOT = Path(__file__).resolve().parent.parent

REDIS_LOG = re.compile(r"^\d+:[A-Z] (\d+ \w+ \d+ [\d:.]+) . (.*)$")  # 1234:M 24 Nov 2026 07:01:08.292 # text
FAILOVER_LINES = {"failing": re.compile(r"^Marking node \S+ as failing \(quorum reached\)"),
                  "delayed": re.compile(r"^Start of election delayed for (\d+) milliseconds"),
                  "forced": re.compile(r"^Forced failover user request accepted"),  # the keeper's
                  "won": re.compile(r"^Failover election won")}

PASSWORD_ENV = "IMGSTORE_REDIS_PASSWORD"
PORT_ENV = "IMGSTORE_REDIS_PORT"   # the first node's port (default 7100)
SLOTS = 16384


class ClusterError(SourceError):
    pass


_MADE_HERE = []  # [the password] once this process made one


def password():
    """The cluster's password: the environment's, or one made now for this process and its
    children (Caffe reads it from the same variable)."""
    if not os.environ.get(PASSWORD_ENV):
        os.environ[PASSWORD_ENV] = secrets.token_hex(16)
        _MADE_HERE.append(os.environ[PASSWORD_ENV])
    return os.environ[PASSWORD_ENV]


def _write_pid_file(path, pid, *words):
    """PID WORDS started=TICKS: what _read_pid_file reads back."""
    started = process_id(pid)
    path.write_text(" ".join([str(pid), *words] + ([f"started={started[1]}"] if started else [])) + "\n")


def _read_pid_file(path):
    """(pid, its start time or None, the other words) of a pid file. A file without a start time
    (written before they were kept) names a process that only its command line can vouch for."""
    words = Path(path).read_text().split()
    started = [int(w[len("started="):]) for w in words[1:] if w.startswith("started=")]
    return int(words[0]), (started or [None])[0], [w for w in words[1:] if not w.startswith("started=")]


def _dies_with_this_thread(death_signal):
    """A preexec_fn for a child that gets `death_signal` when this process exits, or None off the
    main thread: the signal comes when the *thread* that started the child exits."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return child_setup(death_signal=death_signal)


def _holder(port):
    """What listens on a loopback port, in words: the process and its working folder (a
    redis-server's is its node's data folder)."""
    for conn in psutil.net_connections(kind="tcp"):
        if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
            try:
                proc = psutil.Process(conn.pid)
                return f"{proc.name()} (pid {conn.pid}, working folder {proc.cwd()})"
            except psutil.Error:
                return f"pid {conn.pid}"
    return "another process"


class Cluster:
    """`nodes` masters, each with `replicas` replicas (their ports follow the masters'). The
    shape is kept in the cluster's folder (shape.json) once it has been formed, so that every
    later Cluster of that folder has it: a Cluster of another shape there is refused."""
    SHAPE = "shape.json"
    # who started the running servers with a password made for that process alone (it dies
    # with it): when that process is gone, no one can stop them by their password
    OWNER = "owner.json"

    DELAY_LEGS = {  # where the delay proxy puts an emulated round trip: (requests', replies') share
        "requests": (1.0, 0.0),  # the default: what a client host meets on a real network (delay_proxy.c)
        "both": (0.5, 0.5),      # half each way (until session 16 the only way)
    }

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

    external = False  # started and run by the project (data_prep.redis_external: one the user runs)

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

    # --- processes ---------------------------------------------------------------
    def _process(self, pidfile, ours):
        """The process `pidfile` names (a psutil.Process) if it is the one started there: alive,
        started when the file says, this user's, and `ours(process)` (a pid file outlives its
        process, and its number may be taken by another)."""
        try:
            pid, started, _ = _read_pid_file(pidfile)
            proc = psutil.Process(pid)
            if (started is not None and _started(pid) != started) or _zombie(pid) or \
                    proc.uids().real != os.getuid() or not ours(proc):  # a killed node lingers as a zombie
                return None
            return proc
        except (OSError, ValueError, IndexError, psutil.Error):
            return None

    def _server(self, i):
        return self._process(self.node_dir(i) / "redis.pid",
                             lambda p, d=self.node_dir(i): p.name() == "redis-server" and Path(p.cwd()) == d)

    def _proxy(self):
        return self._process(self.root / "proxy.pid", lambda p: p.cmdline()[:1] == [str(toolchain.DELAY_PROXY)])

    def _keeper(self):
        return self._process(self.root / "keeper.pid",
                             lambda p: p.cmdline()[1:4] == ["-m", "data_prep.redis_keeper", str(self.root)])

    def server_pids(self):
        return [proc and proc.pid for proc in map(self._server, range(len(self.node_ports())))]

    def proxy_pid(self):
        proc = self._proxy()
        return proc.pid if proc else None

    def proxy_source(self):
        """The source digest of the running proxy's build (the word after the pid in proxy.pid)."""
        try:
            return _read_pid_file(self.root / "proxy.pid")[2][0] if self.proxy_pid() else None
        except (OSError, ValueError, IndexError):
            return None

    def keeper_pid(self):
        proc = self._keeper()
        return proc.pid if proc else None

    def running(self):
        return all(self.server_pids())

    def proxy_delays(self):
        """The running proxy's delays in ms, (requests', replies') (its first argument), or None
        when clients reach the nodes directly."""
        pid = self.proxy_pid()
        try:
            spec = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1].decode() if pid else None
        except (OSError, IndexError):
            return None
        if spec is None:
            return None
        requests, _, replies = spec.partition("/")
        try:
            return float(requests), float(replies or requests)
        except ValueError:
            return None

    def rtt_asked_ms(self):
        """The round trip the running proxy adds, or None: direct."""
        delays = self.proxy_delays()
        return None if delays is None else sum(delays)

    def delays_for(self, rtt_ms):
        """The proxy's (requests', replies') delays for a round trip, on this cluster's legs."""
        return None if rtt_ms is None else tuple(rtt_ms * share for share in self.DELAY_LEGS[self.delay_legs])

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

    def _keep_owner(self, stops_with_caller):
        """Notes this process as the servers' owner when they stop with it or their password is
        one it made: when it is gone, what it left running is no one's."""
        path = self.root / self.OWNER
        made_here = password() in _MADE_HERE
        if made_here or stops_with_caller:
            tmp = path.with_suffix(".partial")
            tmp.write_text(json.dumps({"process": process_id(os.getpid()), "password_made_here": made_here,
                                       "stops_with_it": stops_with_caller}) + "\n")
            tmp.replace(path)
        else:
            path.unlink(missing_ok=True)

    def _owner(self):
        """{"process": [pid, start], "password_made_here", "stops_with_it"}, or None: the servers
        are whoever's knows their password (the command-line start's)."""
        try:
            owner = json.loads((self.root / self.OWNER).read_text())
        except (OSError, ValueError):
            return None
        if isinstance(owner, list):  # written before servers could stop with their owner: [pid, epoch seconds]
            try:
                alive = psutil.Process(owner[0]).create_time() == owner[1]
            except (psutil.Error, IndexError, TypeError):
                alive = False
            return {"process": process_id(owner[0]) if alive else [owner[0], None], "password_made_here": True,
                    "stops_with_it": False}
        return owner if isinstance(owner, dict) and owner.get("process") else None

    def _orphaned(self):
        """The servers' owner (see _keep_owner) has exited."""
        owner = self._owner()
        return bool(owner) and owner["process"] != process_id(owner["process"][0])

    def _stops_with_this_process(self):
        owner = self._owner()
        return bool(owner and owner["stops_with_it"] and owner["process"] == process_id(os.getpid()))

    def _why_left(self):
        """Why the cluster's processes are no one's now, or None: their owner exited without
        stopping them though they were to stop with it (its death signal could not act), or
        with the password only it knew."""
        if not self._orphaned():
            return None
        owner = self._owner()
        gone = f"the process that started them (pid {owner['process'][0]}) exited without stopping them"
        if owner["stops_with_it"]:
            return f"{gone}, and they were to stop with it"
        if owner["password_made_here"] and (not self.running() or self._password_refused()):
            return f"{gone}, and the password it made went with it"
        return None

    def _live_processes(self):
        """The cluster's processes running now, in words."""
        servers = [str(pid) for pid in self.server_pids() if pid]
        return ([f"redis-server pid{'s' * (len(servers) > 1)} {', '.join(servers)}"] if servers else []) + \
            [f"{what} pid {pid}" for what, pid in (("keeper", self.keeper_pid()), ("delay proxy", self.proxy_pid()))
             if pid]

    def stop_leftovers(self):
        """Stops what an owner that exited left running (see _why_left), saying so on stderr."""
        why = self._why_left()
        left = self._live_processes() if why else []
        if left:
            print(f"stopping the Redis cluster under {self.root} ({'; '.join(left)}): {why}", file=sys.stderr)
            self.stop()

    def _reach(self, delays, timeout):
        """Clients of the running cluster reach it directly (None) or through the proxy at
        `delays` (requests', replies' in ms): the nodes announce the ports (CONFIG SET,
        gossiped in well under a second), the proxy is started, changed or stopped."""
        if delays == self.proxy_delays() and (delays is None or self.proxy_source() == toolchain.delay_proxy_source()):
            return  # kept only when it is today's build: records name the build their delay ran through
        announced = self.node_ports() if delays is None else self.proxy_ports()
        if delays is not None:
            self._start_proxy(delays)
        for c, port in zip(self.nodes(), announced):
            c.config_set("cluster-announce-port", port)
        self._wait_converged(announced, timeout)
        if delays is None:
            self._stop(self._proxy())

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

    def _start_node(self, i, port):
        d = self.node_dir(i)
        d.mkdir(parents=True, exist_ok=True)
        pw = password()
        config = "\n".join([
            f"port {port}", "bind 127.0.0.1", "protected-mode yes",
            f"requirepass {pw}", f"masterauth {pw}",
            # Redis 7's defaults, stated: no DEBUG, no CONFIG SET of protected settings, no modules
            "enable-debug-command no", "enable-protected-configs no", "enable-module-command no",
            "cluster-enabled yes", "cluster-config-file nodes.conf", f"cluster-node-timeout {self.node_timeout_ms}",
            "cluster-announce-ip 127.0.0.1", f"cluster-announce-port {port}",
            f"cluster-announce-bus-port {port + 10000}",
            f"dir {d}", "dbfilename dump.rdb", 'save ""', "appendonly no",
            f"logfile {d / 'redis.log'}", "daemonize no",  # no pidfile: ours holds the start time too
            f"io-threads {self.io_threads or 1}", f"io-threads-do-reads {'yes' if (self.io_threads or 1) > 1 else 'no'}",
            ""])
        proc = subprocess.Popen(["redis-server", "-"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=self._death_signal(signal.SIGTERM))  # SIGTERM: it exits cleanly
        _write_pid_file(d / "redis.pid", proc.pid)
        proc.stdin.write(config.encode())
        proc.stdin.close()
        return proc

    def _death_signal(self, signal_number):
        """The preexec_fn of a process of this cluster: none, or, when its servers stop with this
        process, `signal_number` when it exits."""
        return _dies_with_this_thread(signal_number) if self._stops_with_this_process() else None

    def start_keeper(self):
        """With replicas: the keeper (data_prep/redis_keeper.py), which fails a master over to
        its replica as soon as its process has exited, rather than after Redis's own detection."""
        if not self.replicas or self.keeper_pid():
            return
        password()  # the keeper's clients read it from the environment it inherits
        with open(self.root / "keeper.log", "ab") as errors:
            proc = subprocess.Popen([sys.executable, "-m", "data_prep.redis_keeper", str(self.root),
                                     "--port", str(self.port)], cwd=ROOT, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=errors, start_new_session=True,
                                    preexec_fn=self._death_signal(signal.SIGKILL))
        _write_pid_file(self.root / "keeper.pid", proc.pid)

    def stop_keeper(self):
        """Leave a lost master to Redis Cluster's own failover (node timeout, gossip, election)."""
        self._stop(self._keeper())

    def running_io_threads(self):
        """The first answering node's io-threads (its I/O threads, the main one counted)."""
        for c in self.nodes():
            try:
                return int(c.config_get("io-threads")["io-threads"])
            except Exception:
                continue
        return None

    def node_client(self, i):
        return self._client(self.node_ports()[i])

    def _client(self, port, timeout=5):
        import redis
        return redis.Redis(host="127.0.0.1", port=port, password=password(), socket_timeout=timeout,
                           socket_connect_timeout=timeout, decode_responses=True)

    def nodes(self):
        """A client per node, on the node's own port."""
        return [self._client(p) for p in self.node_ports()]

    def _password_refused(self):
        import redis
        try:
            self._client(self.port).ping()
            return None
        except redis.AuthenticationError as e:
            return e

    def _check_password(self):
        e = self._password_refused()
        if e:
            raise ClusterError(f"the cluster at 127.0.0.1:{self.port} refuses this password ({e}): set "
                               f"{PASSWORD_ENV} to the one it was started with, or stop it "
                               f"(python -m data_prep.redis_cluster stop)") from None

    def _wait_ready(self, timeout, started):
        """Until every node answers PING; `started`: their processes (Popen), in node order."""
        import redis
        deadline = time.time() + timeout
        for i, port in enumerate(self.node_ports()):
            while True:
                try:
                    self._client(port).ping()
                    break
                except redis.BusyLoadingError:
                    pass
                except redis.ConnectionError as e:  # not listening yet, or exited
                    if started[i].poll() is not None:
                        log = self.node_dir(i) / "redis.log"
                        tail = log.read_text(errors="replace")[-600:] if log.exists() else ""
                        raise ClusterError(f"redis-server node {i} (127.0.0.1:{port}) exited: {e}\n{tail}") from None
                if time.time() > deadline:
                    raise ClusterError(f"redis-server node {i} (127.0.0.1:{port}) not ready after {timeout} s")
                time.sleep(0.05)

    def _form_cluster(self, timeout):
        """A new cluster: equal slot ranges, one per master, then MEET, then each replica
        follows its master (replica j of master i: node count * (j + 1) + i). A restarted one
        keeps its nodes.conf and needs nothing."""
        import redis
        clients = self.nodes()
        if any(int(c.execute_command("CLUSTER", "INFO").split("cluster_slots_assigned:")[1].split()[0])
               for c in clients):
            return
        self._keep_shape()
        for i, c in enumerate(clients[:self.count]):
            lo, hi = i * SLOTS // self.count, (i + 1) * SLOTS // self.count - 1
            c.execute_command("CLUSTER", "ADDSLOTSRANGE", lo, hi)
        for port in self.node_ports()[1:]:
            clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", port, port + 10000)
        deadline = time.time() + timeout
        for k, c in enumerate(clients[self.count:]):
            master = clients[k % self.count].execute_command("CLUSTER", "MYID")
            while True:  # a replica must know its master (gossip) before it can follow it
                try:
                    c.execute_command("CLUSTER", "REPLICATE", master)
                    break
                except redis.ResponseError as e:  # "Unknown node": not yet met
                    if time.time() > deadline:
                        raise ClusterError(f"replica node {self.count + k} cannot follow master {k % self.count}: {e}")
                    time.sleep(0.1)

    def masters_ports(self):
        """The ports of the nodes that serve slots now (after a failover, a former replica's)."""
        for c in self.nodes():
            try:
                return sorted({int(r[2][1]) for r in c.execute_command("CLUSTER", "SLOTS")})
            except Exception:
                continue
        return []

    def node_roles(self, among=None):
        """From the first of the nodes `among` (indices; default all) that answers CLUSTER NODES:
        node index -> (its id, its master's id or None, how many slots it serves); None when no
        node answers."""
        for i in range(len(self.node_ports())) if among is None else among:
            try:
                text = self._client(self.node_ports()[i], timeout=1).execute_command("CLUSTER", "NODES")
            except Exception:
                continue
            text = text.decode() if isinstance(text, bytes) else text
            return dict(self._node_role(line.split()) for line in text.splitlines() if line.strip())
        return None

    def _node_role(self, fields):
        """One CLUSTER NODES line: id, ip:port@bus, flags, master id or -, ping, pong, epoch,
        link, then the slots served ("0-5460", "5461"; "[slot-<-id]" while migrating)."""
        port = int(fields[1].split("@")[0].rsplit(":", 1)[1])  # its own, or its proxy's
        ranges = [s.split("-") for s in fields[8:] if not s.startswith("[")]
        slots = sum(int(r[-1]) - int(r[0]) + 1 for r in ranges)
        return (port - self.port) % 100, (fields[0], None if fields[3] == "-" else fields[3], slots)

    def failover_events(self, since, until):
        """What the nodes' own logs say happened in a failover between two datetimes: when the
        masters agreed a node failed ("failing"), the replica's election delay ("delayed", with
        its milliseconds), the keeper's CLUSTER FAILOVER FORCE reaching it ("forced") and its
        promotion ("won"); (datetime, node index, kind, value) in
        time order."""
        events = []
        for i in range(len(self.node_ports())):
            log = self.node_dir(i) / "redis.log"
            for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
                m = REDIS_LOG.match(line)
                if not m:
                    continue
                at = datetime.strptime(m.group(1), "%d %b %Y %H:%M:%S.%f")
                if not since <= at <= until:
                    continue
                for kind, pattern in FAILOVER_LINES.items():
                    found = pattern.search(m.group(2))
                    if found:
                        events.append((at, i, kind, int(found.group(1)) if found.groups() else None))
        return sorted(events)

    def wait_replicated(self, timeout=60):
        """Until every replica has every write its master took (replication is asynchronous)."""
        if not self.replicas:
            return
        deadline = time.time() + timeout
        for port in self.masters_ports():
            c = self._client(port)
            while True:
                info = c.info("replication")
                offset = info["master_repl_offset"]
                behind = [v for k, v in info.items() if k.startswith("slave") and isinstance(v, dict)
                          and (v.get("offset", -1) < offset or v.get("state") != "online")]
                if info.get("connected_slaves", 0) >= self.replicas and not behind:
                    break
                if time.time() > deadline:
                    raise ClusterError(f"the replicas of 127.0.0.1:{port} did not catch up in {timeout} s")
                time.sleep(0.05)

    def _check_ports_free(self):
        """Every node's client and bus port free on loopback, or an error naming the port and
        what holds it (another cluster, from another data folder, is the usual one)."""
        import socket
        for i, port in enumerate(self.node_ports()):
            for p, what in ((port, "client"), (port + 10000, "cluster bus")):
                with socket.socket() as s:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as redis-server: TIME_WAIT is no owner
                    try:
                        s.bind(("127.0.0.1", p))
                    except OSError:
                        raise ClusterError(f"node {i}'s {what} port 127.0.0.1:{p} is taken by {_holder(p)}; "
                                           f"stop that, or give this cluster other ports ({PORT_ENV})") from None

    def _wait_converged(self, announced, timeout):
        """Until every node says cluster_state:ok, all 16,384 slots are served, and only by the
        announced ports (in whatever ranges: a resharded cluster has many per node)."""
        deadline, want = time.time() + timeout, set(announced)
        while True:
            ok = True
            for c in self.nodes():
                info = c.execute_command("CLUSTER", "INFO")
                slots = c.execute_command("CLUSTER", "SLOTS")
                owners = {int(r[2][1]) for r in slots}
                served = sum(int(r[1]) - int(r[0]) + 1 for r in slots)
                followed = all(len(r) - 3 >= self.replicas for r in slots)  # each range's replicas
                ok &= "cluster_state:ok" in info and served == SLOTS and owners <= want and followed
            if ok:
                return
            if time.time() > deadline:
                raise ClusterError(f"the Redis cluster under {self.root} did not converge in {timeout} s "
                                   f"(node logs: {self.root}/node-*/redis.log)")
            time.sleep(0.1)

    def _start_proxy(self, delays):
        self._stop(self._proxy())
        maps = [f"{p}:{n}" for p, n in zip(self.proxy_ports(), self.node_ports())]
        log = self.root / "proxy.log"
        requests, replies = (f"{d:g}" for d in delays)
        spec = requests if requests == replies else f"{requests}/{replies}"  # one number: both ways, as any build reads it
        with open(log, "wb") as errors:  # not a pipe: nobody reads it while the proxy runs
            proc = subprocess.Popen([str(toolchain.delay_proxy()), spec] + maps, stdout=subprocess.PIPE,
                                    stderr=errors, start_new_session=True,
                                    preexec_fn=self._death_signal(signal.SIGKILL))
        if proc.stdout.readline().strip() != b"ready":
            proc.wait()
            raise ClusterError(f"delay proxy failed: {log.read_text(errors='replace').strip()}")
        _write_pid_file(self.root / "proxy.pid", proc.pid, toolchain.delay_proxy_source())

    @staticmethod
    def _stop(proc, timeout=10):
        """SIGTERM, then SIGKILL after `timeout` s, to `proc` (a psutil.Process: a pid and its
        start time) and to no other: the signals go through a pidfd opened while the pid was
        still that process, so a number that another process takes meanwhile is never signalled."""
        if proc is None:
            return
        try:
            fd = os.pidfd_open(proc.pid)
        except OSError:  # gone
            return
        try:
            if not proc.is_running():  # its number is another process's now
                return
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    signal.pidfd_send_signal(fd, sig)
                except (ProcessLookupError, PermissionError):
                    return
                if select.select([fd], [], [], timeout)[0]:  # readable: it exited (all its threads)
                    try:
                        os.waitpid(proc.pid, os.WNOHANG)  # our child: reap it
                    except ChildProcessError:
                        pass
                    return
        finally:
            os.close(fd)

    @staticmethod
    def _stop_pid(pid, timeout=10):
        """_stop for the process that has number `pid` now (one checked just before)."""
        try:
            Cluster._stop(psutil.Process(pid) if pid else None, timeout)
        except psutil.Error:
            pass

    def stop(self):
        """Stop the keeper, the proxy and every node (no save: see the module's docstring)."""
        self.stop_keeper()
        self._stop(self._proxy())
        for i in range(len(self.node_ports())):
            self._stop(self._server(i))

    # --- measurements ------------------------------------------------------------
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

    # --- resharding ----------------------------------------------------------------
    def slot_owners(self):
        """A function slot -> the index (in node_ports) of the node serving it, from one read of
        the first node's map."""
        ranges = [(int(lo), int(hi), (int(master[1]) - self.port) % 100)  # its own port, or its proxy's
                  for lo, hi, master, *_ in self.nodes()[0].execute_command("CLUSTER", "SLOTS")]

        def owner(slot):
            for lo, hi, index in ranges:
                if lo <= slot <= hi:
                    return index
            raise ClusterError(f"slot {slot} has no node in the cluster under {self.root}")
        return owner

    def migrate_slots(self, slots, to_node, finish=True):
        """Redis Cluster's resharding, step by step, as redis-cli --cluster reshard does it: each
        slot MIGRATING on its owner and IMPORTING on `to_node`, its keys MIGRATEd (only the first
        half when not finishing: the slot stays half moved, so readers meet ASK), then SETSLOT
        NODE on every node (readers meet MOVED). Returns how many slots had to move."""
        nodes = self.nodes()
        ids = [n.execute_command("CLUSTER", "MYID") for n in nodes]
        by_owner, owner_of = {}, self.slot_owners()
        for slot in slots:
            owner = owner_of(slot)
            if owner != to_node:
                by_owner.setdefault(owner, []).append(slot)
        for owner, owned in by_owner.items():
            src, dst = nodes[owner], nodes[to_node]
            for slot in owned:
                dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", ids[owner])
                src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to_node])
            for slot in owned:
                keys = src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 10_000)
                keys = keys if finish else keys[: len(keys) // 2]
                if keys:
                    src.execute_command("MIGRATE", "127.0.0.1", self.node_ports()[to_node], "", 0, 5000,
                                        "AUTH", password(), "KEYS", *keys)
            if finish:
                for slot in owned:
                    for n in nodes:
                        n.execute_command("CLUSTER", "SETSLOT", slot, "NODE", ids[to_node])
        return sum(len(v) for v in by_owner.values())

    def server_usage(self):
        """Per node: CPU seconds and resident memory of its redis-server process."""
        out = {}
        for port, pid in zip(self.node_ports(), self.server_pids()):
            try:
                p = psutil.Process(pid)
                t = p.cpu_times()
                out[str(port)] = {"cpu_seconds": round(t.user + t.system, 3), "rss_bytes": p.memory_info().rss}
            except (psutil.Error, TypeError):
                out[str(port)] = None
        return out

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

    def proxy_peak_rss(self):
        try:
            status = Path(f"/proc/{self.proxy_pid()}/status").read_text()
            return int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.M).group(1)) * 1024
        except (OSError, AttributeError):
            return None


def median_ms(call, samples=21):
    """The median time of `call()` over `samples` calls, in ms (a PING's round trip, say)."""
    times = []
    for _ in range(samples):
        t = time.perf_counter()
        call()
        times.append((time.perf_counter() - t) * 1000)
    return round(statistics.median(times), 3)


def _zombie(pid):
    """Exited, waiting to be reaped by a parent that is not us. A multi-threaded process shows
    its main thread as a zombie while the others still exit (its sockets still open): only
    a zombie with one thread left is gone."""
    try:
        status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status") if ":" in line)
        return status["State"].split()[0] == "Z" and int(status["Threads"]) <= 1
    except (OSError, KeyError, ValueError):
        return True


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
