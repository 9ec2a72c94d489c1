"""benchmarks/multihost.py end to end: server and client hosts in network namespaces, a cluster
of real redis-server processes on the servers' addresses, MNIST prepared into it, the capacity
sweep with the solvers spread over 1 and 2 client hosts; a table row per count with where the
CPU went, records that say their placement, the figure, and nothing of the hosts left."""
import os
import re
import subprocess

from conftest import ROOT

PY = str(ROOT / ".venv" / "bin" / "python")


def test_a_sweep_over_client_hosts_gives_a_row_per_count_and_leaves_no_host(tmp_path):
    """200 iterations a run: long enough for the solvers' threads to be sampled (every 0.5 s)."""
    from experiments import hosts, record
    out = tmp_path / "results"
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMGSTORE_REDIS")}
    p = subprocess.Popen([PY, str(ROOT / "benchmarks" / "multihost.py"), "mnist", "--hosts", "1,2", "--max", "2",
                          "--confirm", "1", "--iters", "200", "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    stdout, stderr = p.communicate(timeout=1200)
    assert p.returncode == 0, stderr[-3000:]
    rows = {line.split("|")[1].strip(): line for line in stdout.splitlines() if re.match(r"\| [12] \|", line)}
    assert set(rows) == {"1", "2"}
    for line in rows.values():
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert len(cells) == 5 and re.fullmatch(r"\d+\.\d / \d+\.\d", cells[4]), line  # solvers / servers, µs
    runs = record.recorded(out, "mnist")
    assert {r.concurrent["client_hosts"] for r in runs} == {1, 2} and all(r.ok for r in runs)
    assert all(r.location["seeds"].startswith(hosts.SUBNET) and r.location["masters"] == 3 for r in runs)
    # each master served its share of the reads in each run: its keyspace hits (GETs of the records
    # it holds) since the cache was set. The slots are split evenly, so each holds about a third of
    # the records; an idle master's CPU seconds grow too, and one given 1 slot of 16384 counted a
    # few hits (2-9 where another held the rest)
    for r in runs:
        hits = {name: (s or {}).get("keyspace_hits") or 0 for name, s in r.location["servers"].items()}
        assert len(hits) == 3 and min(hits.values()) >= 0.10 * sum(hits.values()), \
            f"run {r.run_id}: a master served under a tenth of the reads (keyspace hits by master: {hits})"
    spread = [r for r in runs if r.concurrent["client_hosts"] == 2 and r.concurrent["solvers"] == 2]
    assert spread and len({r.concurrent["host"] for r in spread}) == 2  # one solver on each client host
    assert not [n for n in hosts.namespaces() if hosts._owner(n) == p.pid]
    analysis = subprocess.run([PY, str(ROOT / "analysis" / "capacity.py"), str(out)], capture_output=True, text=True)
    assert analysis.returncode == 0 and (out / "report" / "fig_hosts_mnist.png").exists(), analysis.stderr
