"""A Redis (or Valkey) Cluster on the server hosts of experiments.hosts, standing in for one a
lab runs on machines of its own: one master per server host, listening on that host's address
(not loopback), with an admin password and an ACL user limited to the project's keys, formed from
a client host. prepare.py and run.py reach it as they would reach the lab's, with --cluster and
the credentials in the environment (data_prep.redis_cluster.external).

  with hosts.Hosts(clients=2, servers=3) as net:
      lab = LabCluster(net, home).start()
      subprocess.run(net.command("client-0", [..., "--cluster", lab.seeds]), env=lab.env())

The servers stop with the hosts. Their configuration goes in on stdin, so no password is in an
argv; the password file is the user's alone (mode 600), as data_prep.redis_cluster.external asks.
"""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import processes
import toolchain
from data_prep.redis_cluster import external as redis_external

USER = "lab-reader"
PORT = 6379
SERVERS = ("redis", "valkey")


def server_program(kind):
    """redis: Debian's redis-server; valkey: Debian's valkey-server, unpacked into the cache by
    scripts/valkey.sh (Debian 12 has it in bookworm-backports only), fetched on first use."""
    if kind == "redis":
        return "redis-server"
    if kind == "valkey":
        # SIGTERM: the script's exit trap removes its half-unpacked folder
        p = subprocess.run([str(toolchain.ROOT / "scripts" / "valkey.sh")], capture_output=True, text=True,
                           preexec_fn=processes.child_setup(death_signal=signal.SIGTERM))
        if p.returncode != 0:
            raise LabError(f"scripts/valkey.sh could not fetch Debian's valkey-server: {p.stderr.strip()[-500:]}")
        return p.stdout.strip()
    raise LabError(f"no server {kind!r}: {', '.join(SERVERS)}")


class LabError(RuntimeError):
    pass


class LabCluster:
    def __init__(self, net, home, server="redis", user=USER):
        self.net, self.home, self.user = net, Path(home), user
        self.kind, self.server = server, server_program(server)
        self.servers = [h for h in net.names if h.startswith("server-")]
        self.client = next((h for h in net.names if h.startswith("client-")), None)
        if not self.client:
            raise LabError("a lab cluster is formed from a client host: make the hosts with clients >= 1")
        self.seeds = ",".join(f"{net.address(h)}:{PORT}" for h in self.servers)
        self.admin = "admin-" + os.urandom(12).hex()
        self.password_file = self.home / "password"

    def start(self, timeout=60):
        self.home.mkdir(parents=True, exist_ok=True, mode=0o700)
        secret = "lab-" + os.urandom(12).hex()
        fd = os.open(self.password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secret + "\n")
        for host in self.servers:
            self._start_server(host, secret)
        self._form(timeout)
        return self

    def _start_server(self, host, secret):
        home = self.home / host
        home.mkdir(exist_ok=True, mode=0o700)
        config = [f"port {PORT}", f"bind {self.net.address(host)}", "protected-mode yes",
                  f"requirepass {self.admin}", f"user {self.user} on >{secret} ~{redis_external.KEY_PREFIX}* +@all",
                  "cluster-enabled yes", f"cluster-config-file {home}/nodes.conf", f"dir {home}",
                  'save ""', "appendonly no", f"logfile {home}/server.log", ""]
        try:
            p = self.net.start(host, [self.server, "-"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        except FileNotFoundError:
            raise LabError(f"{self.server}: not found (make data-deps installs redis-server)") from None
        p.stdin.write("\n".join(config).encode())
        p.stdin.close()

    def _form(self, timeout):
        p = subprocess.run(self.net.command(self.client, [str(toolchain.PYTHON), "-m", "experiments.lab_cluster",
                                                          "form", self.seeds, str(timeout)]),
                           input=self.admin, capture_output=True, text=True, cwd=toolchain.ROOT, timeout=timeout + 30,
                           preexec_fn=processes.child_setup())
        if p.returncode != 0:
            logs = ", ".join(str(self.home / h / "server.log") for h in self.servers)
            raise LabError(f"the lab cluster at {self.seeds} did not form: {p.stderr.strip()[-500:]} (logs: {logs})")

    def env(self, base=None):
        """An environment for prepare.py / run.py: the ACL user and its password file (the seeds
        go on their command lines: --cluster)."""
        env = {k: v for k, v in (base or os.environ).items() if not k.startswith("IMGSTORE_REDIS")}
        env.update({redis_external.USER_ENV: self.user, redis_external.PASSWORD_FILE_ENV: str(self.password_file)})
        return env


def form(seeds, admin, timeout):
    """Inside a client host: every node answers, the slots are split evenly, the nodes meet, and
    the cluster says ok on every node."""
    import redis
    nodes = [redis.Redis(host=h, port=p, password=admin, socket_timeout=5) for h, p in redis_external.parse_seeds(seeds)]
    deadline = time.time() + timeout
    for node in nodes:
        while not _answers(node):
            if time.time() > deadline:
                raise LabError(f"{_address(node)} does not answer")
            time.sleep(0.1)
    per = 16384 // len(nodes)
    for i, node in enumerate(nodes):
        node.execute_command("CLUSTER", "ADDSLOTSRANGE", i * per, 16383 if i == len(nodes) - 1 else (i + 1) * per - 1)
    for node in nodes[1:]:
        nodes[0].execute_command("CLUSTER", "MEET", *_address(node).split(":"))
    while any(node.cluster("info").get("cluster_state") != "ok" for node in nodes):
        if time.time() > deadline:
            raise LabError(f"the cluster at {seeds} is not ok after {timeout} s")
        time.sleep(0.2)


def _answers(node):
    import redis
    try:
        return node.ping()
    except redis.ConnectionError:
        return False


def _address(node):
    kwargs = node.connection_pool.connection_kwargs
    return f"{kwargs['host']}:{kwargs['port']}"


if __name__ == "__main__" and sys.argv[1:2] == ["form"]:
    form(sys.argv[2], sys.stdin.read().strip(), float(sys.argv[3]))
