"""The project's Redis servers as processes: their pid files, who owns them, starting and
stopping them, the password they require, and the keeper started beside them.

A pid file holds the pid and the process's start time (`PID [SOURCE] started=TICKS`): only the
process that was started there is ever signalled, never another that got its number later.
The password is IMGSTORE_REDIS_PASSWORD (generated for this process when unset); it is handed to
redis-server on stdin and to Caffe in the environment, so no file the project writes holds it.
Servers started for a caller that stops them when it is done die with it (a death signal;
owner.json says whose they are); whatever a killed owner still left running is stopped by the
next start, which says so on stderr.
"""
import json
import os
import secrets
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from data_prep.errors import SourceError
from processes import child_setup, process_id, started as _started

ROOT = Path(__file__).resolve().parents[2]

PASSWORD_ENV = "IMGSTORE_REDIS_PASSWORD"
PORT_ENV = "IMGSTORE_REDIS_PORT"   # the first node's port (default 7100)
KEEPER_MODULE = "data_prep.redis_cluster.keeper"
# a keeper started by an older checkout runs under the module's former name: a cluster it keeps
# is still this project's to stop
KEEPER_MODULES = (KEEPER_MODULE, "data_prep.redis_keeper")


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


def _zombie(pid):
    """Exited, waiting to be reaped by a parent that is not us. A multi-threaded process shows
    its main thread as a zombie while the others still exit (its sockets still open): only
    a zombie with one thread left is gone."""
    try:
        status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status") if ":" in line)
        return status["State"].split()[0] == "Z" and int(status["Threads"]) <= 1
    except (OSError, KeyError, ValueError):
        return True


def _wait_exec(proc, is_it, timeout=5.0):
    """Until a child just started shows its own command line: between fork and exec it shows
    none (or the parent's), and a check in that moment would not know it for ours (a keeper
    "not running" would then be left running by stop_keeper)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if is_it(psutil.Process(proc.pid).cmdline()):
                return
        except psutil.Error:
            pass
        time.sleep(0.01)


def is_keeper_command(cmdline, root):
    """Whether a command line (argv) is the keeper of the cluster under `root`, started by this
    checkout or an older one (KEEPER_MODULES)."""
    return any(cmdline[1:4] == ["-m", module, str(root)] for module in KEEPER_MODULES)


class ServersMixin:
    """The redis-server processes and the keeper of a Cluster (data_prep.redis_cluster.cluster)."""
    # who started the running servers with a password made for that process alone (it dies
    # with it): when that process is gone, no one can stop them by their password
    OWNER = "owner.json"

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

    def _keeper(self):
        return self._process(self.root / "keeper.pid", lambda p: is_keeper_command(p.cmdline(), self.root))

    def server_pids(self):
        return [proc and proc.pid for proc in map(self._server, range(len(self.node_ports())))]

    def keeper_pid(self):
        proc = self._keeper()
        return proc.pid if proc else None

    def running(self):
        return all(self.server_pids())

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
        """With replicas: the keeper (data_prep/redis_cluster/keeper.py), which fails a master over to
        its replica as soon as its process has exited, rather than after Redis's own detection."""
        if not self.replicas or self.keeper_pid():
            return
        password()  # the keeper's clients read it from the environment it inherits
        with open(self.root / "keeper.log", "ab") as errors:
            proc = subprocess.Popen([sys.executable, "-m", KEEPER_MODULE, str(self.root),
                                     "--port", str(self.port)], cwd=ROOT, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=errors, start_new_session=True,
                                    preexec_fn=self._death_signal(signal.SIGKILL))
        _wait_exec(proc, lambda argv: is_keeper_command(argv, self.root))
        _write_pid_file(self.root / "keeper.pid", proc.pid)

    def stop_keeper(self):
        """Leave a lost master to Redis Cluster's own failover (node timeout, gossip, election)."""
        self._stop(self._keeper())

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
                               f"(python -m data_prep.redis_cluster.cluster stop)") from None

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
            ServersMixin._stop(psutil.Process(pid) if pid else None, timeout)
        except psutil.Error:
            pass

    def stop(self):
        """Stop the keeper, the proxy and every node (no save: see the module's docstring)."""
        self.stop_keeper()
        self._stop(self._proxy())
        for i in range(len(self.node_ports())):
            self._stop(self._server(i))

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

