"""Least privilege on a Redis Cluster the user runs: the ACL rules docs/redis-method.md states
(data_prep.redis_cluster.external READER_RULES, WRITER_RULES) are enough, and hold no @dangerous or
@admin command. A writer with only its rules prepares and cleans; a reader with only its rules
trains from the data (Caffe's REDIS reader and the run's warming), the servers' INFO recorded as
not available to it."""
import pytest

from conftest import redis_ports
from test_redis_foreign_keys import all_keys, as_user, user_cluster


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    from data_prep.redis_cluster import external as redis_external
    root = tmp_path_factory.mktemp("acl")
    users = {"imgstore-writer": redis_external.WRITER_RULES, "imgstore-reader": redis_external.READER_RULES}
    with redis_ports() as port, user_cluster(root, port, users) as found:
        yield found


def commands_of(rules):
    return [r[1:] for r in rules if r.startswith("+")]


def test_the_stated_rules_hold_no_dangerous_or_admin_command(lab):
    from data_prep.redis_cluster import external as redis_external
    cluster = lab[0]
    node = cluster.node_client(0)
    try:
        risky = {c for cat in ("dangerous", "admin") for c in node.execute_command("ACL", "CAT", cat)}
        assert {"info", "cluster|reset", "keys"} <= risky
        for rules in (redis_external.READER_RULES, redis_external.WRITER_RULES):
            assert rules[0] == "~imgstore:*" and not any(r.startswith(("~", "%", "&", "+@")) for r in rules[1:])
            assert all(r.startswith("+") for r in rules[1:]) and not risky & set(commands_of(rules))
    finally:
        node.close()


def test_prepare_run_and_clean_with_the_stated_rules_alone(lab, tmp_path):
    from experiments import record
    cluster, seeds, files = lab
    data, out = tmp_path / "data", tmp_path / "results"

    def as_(user, script, *args):
        return as_user(script, list(args), seeds, files[user], user, tmp_path)

    p = as_("imgstore-writer", "data_prep/prepare.py", "mnist", "redis", "--limit", "200", "--out", str(data),
            "--quiet")
    assert p.returncode == 0, p.stderr
    p = as_("imgstore-reader", "experiments/run.py", "mnist", "redis", "warm", "--iters", "10", "--data", str(data),
            "--out", str(out), "--quiet")
    assert p.returncode == 0, p.stderr[-3000:]
    r, = record.recorded(out, "mnist")
    assert r.ok and r.location["user"] == "imgstore-reader" and r.location["masters"] == 3
    assert r.location["versions"] is None and r.location["server"] is None and r.location["rtt_ms_measured"] > 0
    assert "INFO:" in r.location["not_available"][0] and "imgstore-reader" in r.location["not_available"][0]
    assert not r.measurement_errors
    p = as_("imgstore-reader", "data_prep/prepare.py", "clean", "mnist", "redis", "--out", str(data))
    assert p.returncode == 2 and "no permissions to run the 'unlink' command" in p.stderr, p.stderr  # a reader's
    assert "Traceback" not in p.stderr
    p = as_("imgstore-writer", "data_prep/prepare.py", "clean", "mnist", "redis", "--out", str(data))
    assert p.returncode == 0, p.stderr
    admin = cluster.client()
    try:
        assert all_keys(admin) == set()
    finally:
        admin.close()
