"""On a Redis Cluster the user runs, the project touches its own keys (imgstore:DATASET:PHASE)
and nothing else: a cluster of real redis-server processes stands in for the user's, holds keys
that are not this checkout's (unprefixed DATASET:* and DATASET-png:* as the project's own
cluster names them, another data set under imgstore:, names that merely start like the
project's, a key of the lab's own), and every command that can reach such a cluster runs
against it as an ACL user that may touch every key but send no @dangerous command: prepare, a
warm run, the read-only benchmarks,
the benchmarks that refuse it, and clean. Every foreign key is as it was afterwards. clean
removes only the data set this data folder wrote (its ~writer key) and its manifest describes."""
import os
import subprocess
from contextlib import contextmanager

import pytest

from conftest import ROOT, environment_kept, redis_ports

PY = str(ROOT / ".venv" / "bin" / "python")
USER = "lab-trainer"
# every key in reach (only the code keeps to imgstore:), and no @dangerous command (INFO, KEYS, FLUSHALL)
RULES = ("~*", "+@all", "-@dangerous")

FOREIGN = {
    "mnist:train:~complete": b"3 their-source", "mnist:train:~index": [b"00000000", b"00000001", b"00000002"],
    "mnist:train:00000000": b"not-ours-0", "mnist-png:train:00000000": b"not-ours-png",  # no marker
    "mnist-png:train:~index": [b"00000000"],
    "imgstore:cifar10:train:~complete": b"7 another-checkout", "imgstore:cifar10:train:00000001": b"theirs",
    "imgstore:mnistx:train:00000000": b"starts like ours", "imgstore:mnist:trainee": b"starts like ours too",
    "imgstore:mnist-png:training": b"and so does this", "other": b"the lab's own",
}


@contextmanager
def user_cluster(root, port, users):
    """A cluster standing in for one the user runs: the project's Cluster of redis-server
    processes on its own ports (its default user's password is the admin's), with ACL users
    {name: rules} set on every node. Yields (cluster, seeds, {name: a password file, mode 600}).
    IMGSTORE_REDIS_PASSWORD, which Cluster sets when it is unset, is put back as it was."""
    from data_prep.redis_cluster.cluster import Cluster
    from data_prep.redis_cluster.servers import PASSWORD_ENV
    cluster = Cluster(root / "redis-cluster", port=port)
    with environment_kept(PASSWORD_ENV):
        try:
            cluster.start()
            files = {}
            for name, rules in users.items():
                secret = f"{name}-" + os.urandom(8).hex()
                for i in range(len(cluster.node_ports())):
                    node = cluster.node_client(i)
                    node.execute_command("ACL", "SETUSER", name, "reset", "on", f">{secret}", *rules)
                    node.close()
                files[name] = root / f"{name}.password"
                files[name].write_text(secret + "\n")
                files[name].chmod(0o600)
            yield cluster, f"127.0.0.1:{cluster.port}", files
        finally:
            cluster.stop()


def as_user(script, args, seeds, password_file, user, tmp_path):
    """One of the project's commands, as the ACL user, with a run lock of its own (no waiting for
    others' runs), the cluster named as the command takes it: prepare.py and run.py --cluster, the
    benchmarks (which take no --cluster) in the environment, as a user's script would export it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMGSTORE_REDIS")}
    env.update(IMGSTORE_REDIS_USER=user, IMGSTORE_REDIS_PASSWORD_FILE=str(password_file),
               IMGSTORE_LOCK=str(tmp_path / "run.lock"))
    if script.startswith("benchmarks/"):
        env.update(IMGSTORE_REDIS_CLUSTER=seeds)
    else:
        args = [*args, "--cluster", seeds]
    return subprocess.run([PY, str(ROOT / script), *args], capture_output=True, text=True, env=env, timeout=300)


def all_keys(admin):
    return {k.decode() for k in admin.scan_iter(match="*", count=1000, target_nodes=admin.ALL_NODES)}


def seed_foreign(admin):
    for key, value in FOREIGN.items():
        if isinstance(value, list):
            admin.rpush(key, *value)
        else:
            admin.set(key, value)
    return {key: admin.dump(key) for key in FOREIGN}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("foreign")
    with redis_ports() as port, user_cluster(root, port, {USER: RULES}) as (c, seeds, files):
        yield c, seeds, files[USER]


@pytest.fixture
def admin(lab):
    """The cluster's admin client, the foreign keys seeded (and removed after, with whatever the
    test left)."""
    client = lab[0].client()
    yield client
    for key in all_keys(client):
        client.delete(key)
    client.close()


def test_no_command_touches_a_key_outside_its_own_on_a_cluster_the_user_runs(lab, admin, tmp_path):
    from experiments import record
    cluster, seeds, password_file = lab
    before = seed_foreign(admin)
    data, out = tmp_path / "data", tmp_path / "results"

    def run(script, *args):
        return as_user(script, list(args), seeds, password_file, USER, tmp_path)

    p = run("data_prep/prepare.py", "mnist", "lmdb,redis", "--limit", "200", "--out", str(data), "--quiet")
    assert p.returncode == 0, p.stderr
    ours = all_keys(admin) - set(FOREIGN)
    assert len(ours) == 2 * (200 + 3) and all(k.startswith("imgstore:mnist:t") for k in ours)

    # a warm run: INFO is @dangerous, so the servers' versions and usage are recorded as not available
    p = run("experiments/run.py", "mnist", "redis", "warm", "--iters", "10", "--data", str(data), "--out", str(out),
            "--quiet")
    assert p.returncode == 0, p.stderr[-3000:]
    r, = record.recorded(out, "mnist")
    assert r.ok and r.location["masters"] == 3 and r.location["versions"] is None
    assert r.location["not_available"] and r.location["not_available"][0].startswith("INFO:")
    assert USER in r.location["not_available"][0] and set(r.location["servers"].values()) == {None}

    # the read-only benchmarks read imgstore:mnist:train; redis_path's PNG copy is its own prefix, removed after
    p = run("benchmarks/redis_path.py", "--datasets", "mnist", "--depths", "1", "--seconds", "0.2", "--data",
            str(data))
    assert p.returncode == 0, p.stderr[-3000:]
    assert "mnist/png/direct/1/in" in p.stderr and "direct (" in p.stdout
    p = run("benchmarks/redis_reader.py", "--datasets", "mnist", "--rounds", "1", "--records", "200",
            "--redis-io", "thread", "--data", str(data))
    assert p.returncode == 0, p.stderr[-3000:]
    assert "mnist/direct thread" in p.stdout

    refusals = {  # what each would do to a cluster it did not start
        ("benchmarks/redis_failover.py",): "is not the project's to fail over",
        ("benchmarks/redis_migration.py",): "is not the project's to move slots in",
        ("benchmarks/delay_proxy.py", "--against", PY): "is not the project's to put a delay proxy in front of",
        ("benchmarks/multihost.py", "mnist"): "is not used: this benchmark starts a cluster of its own",
        ("benchmarks/redis_path.py", "--rtts", "10", "--data", str(data)): "is measured direct only",
        ("benchmarks/redis_reader.py", "--rtt", "10", "--data", str(data)): "is read directly only",
    }
    for (script, *args), words in refusals.items():
        p = run(script, *args)
        said = p.stderr.strip().splitlines()
        assert p.returncode != 0 and said == [said[-1]] and said[-1].startswith(f"{script}: a cluster you run "
                                                                                  "(IMGSTORE_REDIS_CLUSTER)"), p.stderr
        assert words in said[-1]

    p = run("data_prep/prepare.py", "clean", "mnist", "redis", "--out", str(data))
    assert p.returncode == 0, p.stderr
    assert all_keys(admin) == set(FOREIGN)
    assert {key: admin.dump(key) for key in FOREIGN} == before


def test_clean_removes_only_the_data_set_its_manifest_describes(lab, admin, tmp_path):
    """Two checkouts (data folders) share the cluster: the second overwrote the first's data set
    with --force, so the first's clean finds another writer and marker than its own, says whose
    data it is and removes nothing; the second's clean removes it. No data set folder, or no
    manifest with keys there: one line, nothing removed; --force removes the latter."""
    cluster, seeds, password_file = lab
    before = seed_foreign(admin)
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"

    def prepare(*args):
        return as_user("data_prep/prepare.py", list(args), seeds, password_file, USER, tmp_path)

    assert prepare("mnist", "redis", "--limit", "120", "--out", str(mine), "--quiet").returncode == 0
    p = prepare("mnist", "redis", "--limit", "80", "--out", str(theirs), "--quiet")
    assert p.returncode == 2 and "already holds a complete data set imgstore:mnist:train" in p.stderr
    assert prepare("mnist", "redis", "--limit", "80", "--out", str(theirs), "--quiet", "--force").returncode == 0
    held = {k: admin.dump(k) for k in all_keys(admin)}

    p = prepare("clean", "mnist", "redis", "--out", str(mine))
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "holds imgstore:mnist:train as 80 records of source" in p.stderr and "+limit80" in p.stderr
    assert "describes 120 of" in p.stderr and "+limit120" in p.stderr and "another checkout's" in p.stderr
    assert {k: admin.dump(k) for k in all_keys(admin)} == held and (mine / "mnist" / "redis" / "manifest.json").exists()

    p = prepare("clean", "mnist", "redis", "--out", str(tmp_path / "nowhere"))
    assert p.returncode == 2 and "Traceback" not in p.stderr and "no folder" in p.stderr, p.stderr
    (tmp_path / "empty" / "mnist").mkdir(parents=True)
    p = prepare("clean", "mnist", "redis", "--out", str(tmp_path / "empty"))
    assert p.returncode == 2 and "no manifest at" in p.stderr and "--force" in p.stderr, p.stderr
    assert {k: admin.dump(k) for k in all_keys(admin)} == held

    assert prepare("clean", "mnist", "redis", "--out", str(theirs)).returncode == 0
    assert all_keys(admin) == set(FOREIGN)
    assert prepare("mnist", "redis", "--limit", "50", "--out", str(tmp_path / "lost"), "--quiet").returncode == 0
    (tmp_path / "lost" / "mnist" / "redis" / "manifest.json").unlink()  # its folder lost: --force is the way out
    assert prepare("clean", "mnist", "redis", "--out", str(tmp_path / "lost")).returncode == 2
    p = prepare("clean", "mnist", "redis", "--out", str(tmp_path / "lost"), "--force")
    assert p.returncode == 0, p.stderr
    assert all_keys(admin) == set(FOREIGN) and {key: admin.dump(key) for key in FOREIGN} == before
