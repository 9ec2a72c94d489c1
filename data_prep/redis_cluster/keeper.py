"""The keeper of a project-started Redis Cluster with replicas: a master whose redis-server has
exited is failed over to its replica at once, not after Redis's own failure detection.

Redis Cluster fails a master over once the other masters have not heard from it for
`cluster-node-timeout`, a majority of them agree, and the replica has waited its election delay:
5.5-8.5 s at the 5 s used here (README, "A master lost"). That wait is right between hosts, where
silence may be a slow network; on one host, a node whose process has exited is lost for certain.
The keeper (one process per cluster, started and stopped with it by data_prep.redis_cluster.cluster)
looks every 100 ms whether each node's redis-server is still alive; when a master's has exited,
it sends CLUSTER FAILOVER FORCE to a live replica of it. FORCE skips the handshake with the lost
master and Redis's check that the replica's data is recent, so the keeper makes that check
itself first (out_of_sync); the replica still needs the votes of a majority of masters, so the
cluster's epochs stay consistent. A node alive but slow or silent is left to Redis's detection.
What it did goes to ROOT/keeper.log (the failover's record reads it from the replica's log).

  python -m data_prep.redis_cluster.keeper ROOT --port PORT   (Cluster.start runs it; the password
                                                       comes in the environment)
"""
import argparse
import time
from datetime import datetime

from data_prep.redis_cluster.cluster import Cluster

PERIOD_SECONDS = 0.1
GONE_SECONDS = 5  # no node alive this long: the cluster was stopped without its keeper


def fail_over(cluster, lost, alive, log):
    """CLUSTER FAILOVER FORCE on a live replica of node `lost` if it was serving slots. Returns
    False when it should be tried again (no node answered, or the replica refused)."""
    roles = cluster.node_roles(among=alive)
    if roles is None:
        log(f"node {lost} exited and no other node answers; trying again")
        return False
    node_id, master_id, slots = roles[lost]
    if master_id or not slots:
        log(f"node {lost} exited; it served no slots (a replica, or failed over already)")
        return True
    replicas = [i for i in alive if roles.get(i, (None, None, 0))[1] == node_id]
    if not replicas:
        log(f"master node {lost} exited and has no live replica: its {slots} slots stay down")
        return True
    replica = replicas[0]
    why_not = out_of_sync(cluster, replica)
    if why_not:
        log(f"master node {lost} exited; its replica node {replica} {why_not}: left to Redis's own failover")
        return True
    try:
        cluster.node_client(replica).execute_command("CLUSTER", "FAILOVER", "FORCE")
    except Exception as e:
        log(f"master node {lost} exited; CLUSTER FAILOVER FORCE on node {replica} failed ({e}); trying again")
        return False
    log(f"master node {lost} (127.0.0.1:{cluster.node_ports()[lost]}) exited; CLUSTER FAILOVER FORCE sent "
        f"to its replica node {replica} (127.0.0.1:{cluster.node_ports()[replica]})")
    return True


def out_of_sync(cluster, replica):
    """Why the replica may hold stale data (FORCE skips Redis's own check of that), or None. As
    Redis's rule for its own failovers: the link to the master up, or down for no longer than
    cluster-replica-validity-factor (10) node timeouts + the replication ping period (10 s)."""
    try:
        info = cluster.node_client(replica).info("replication")
    except Exception as e:
        return f"does not answer ({e})"
    down = info.get("master_link_down_since_seconds", -1)
    if info.get("master_link_status") == "up" or 0 <= down <= 10 * cluster.node_timeout_ms / 1000 + 10:
        return None
    return "never synchronised with it since its start" if down < 0 else f"lost its master {down} s ago"


def keep(cluster, log, period=PERIOD_SECONDS):
    handled = set()  # nodes found exited and dealt with; forgotten when they run again
    gone_since = None
    while True:
        pids = cluster.server_pids()
        alive = [i for i, pid in enumerate(pids) if pid]
        if not alive:
            gone_since = gone_since or time.time()
            if time.time() - gone_since > GONE_SECONDS:
                log("no node of the cluster runs: the keeper stops")
                return
        else:
            gone_since = None
        handled &= {i for i, pid in enumerate(pids) if not pid}
        for lost in [i for i, pid in enumerate(pids) if not pid and i not in handled]:
            if alive and fail_over(cluster, lost, alive, log):
                handled.add(lost)
        time.sleep(period)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root", help="the cluster's folder (data/redis-cluster)")
    p.add_argument("--port", type=int, required=True, help="its first node's port")
    a = p.parse_args(argv)
    cluster = Cluster(a.root, port=a.port)

    said = [None]

    def log(text):
        if text == said[0]:  # a retry every 100 ms says it once
            return
        said[0] = text
        stamp = datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        with open(cluster.root / "keeper.log", "a") as f:
            f.write(f"{stamp} {text}\n")
    log(f"keeping the cluster under {cluster.root}: {cluster.count} masters, {cluster.replicas} replicas each")
    keep(cluster, log)


if __name__ == "__main__":
    main()
