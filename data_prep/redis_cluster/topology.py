"""The project's Redis Cluster as a cluster: its nodes' clients, forming it and waiting until it
converges, slots and their owners, slot migration, the nodes' roles, replication and what the
nodes' logs say of a failover.
"""
import re
import time
from datetime import datetime

from data_prep.redis_cluster.servers import ClusterError, password

REDIS_LOG = re.compile(r"^\d+:[A-Z] (\d+ \w+ \d+ [\d:.]+) . (.*)$")  # 1234:M 24 Nov 2026 07:01:08.292 # text
FAILOVER_LINES = {"failing": re.compile(r"^Marking node \S+ as failing \(quorum reached\)"),
                  "delayed": re.compile(r"^Start of election delayed for (\d+) milliseconds"),
                  "forced": re.compile(r"^Forced failover user request accepted"),  # the keeper's
                  "won": re.compile(r"^Failover election won")}
SLOTS = 16384


class TopologyMixin:
    """A Cluster's (data_prep.redis_cluster.cluster) nodes as one Redis Cluster."""

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

