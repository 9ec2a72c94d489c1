"""A run flag is declared once, as a field of RunConfig (experiments/config.py): the command
line, the record and "the same setup" follow from that field alone."""
import json
from dataclasses import make_dataclass

import pytest

from experiments import config, resolved, run
from experiments.record import recorded


@pytest.fixture
def with_note_flag(monkeypatch):
    """RunConfig with one throw-away flag, --note, that no code reads."""
    noted = make_dataclass("RunConfig", [("note", str, config.flag(None, flag="--note", help="a throw-away run flag"))],
                           bases=(config.RunConfig,), frozen=True)
    monkeypatch.setattr(config, "RunConfig", noted)
    return noted


def test_a_new_run_flag_is_declared_in_one_place(with_note_flag, mnist_small, tmp_path):
    help_text = " ".join(run.parser(full=False).format_help().split())
    assert "--note NOTE a throw-away run flag" in help_text
    args = ["mnist", "lmdb", "warm", "--iters", "20", "--accelerator", "1ms", "--quiet",
            "--data", str(mnist_small.parent), "--out", str(tmp_path)]
    assert run.parse(args + ["--note", "a"]).note == "a"

    assert run.main(args + ["--note", "a"]) == 0
    [r] = recorded(tmp_path, "mnist")
    assert r.ok and r.config["note"] == "a" and r.config["iters"] == 20 and "data" not in r.config
    assert run.main(args + ["--note", "a"]) == 0 and len(recorded(tmp_path, "mnist")) == 1  # the same setup: skipped
    assert run.main(args + ["--note", "b"]) == 0 and len(recorded(tmp_path, "mnist")) == 2  # another: run
    assert [x.config["note"] for x in run.recorded_runs(run.parse(args + ["--note", "b"]))] == ["b"]


def test_a_record_without_a_config_has_every_new_flag_at_its_default(with_note_flag):
    args = ["mnist", "lmdb", "warm"]
    assert config.same_in_config(None, run.parse(args))
    assert not config.same_in_config(None, run.parse(args + ["--note", "a"]))
    assert config.same_in_config({"note": "a"}, run.parse(args + ["--note", "a"]))


def test_the_flags_other_record_fields_say_are_not_compared_in_the_config():
    """The setup is every field RunConfig declares part of it; records written before
    Record.config existed compare as they did: by iterations_setting, limits, compute, location,
    read options and concurrent (experiments.resolved.SAID_BY), not by the config."""
    assert [name for name, _ in config.compared_in_config()] == [
        "iters", "gpu", "cpu", "accelerator", "mem_limit", "mem_per_solver", "cpus", "cpu_quota", "riops", "rbps",
        "profile", "concurrent", "client_hosts", "options"]
    args = ["mnist", "lmdb", "warm", "--iters", "20", "--mem-limit", "1G", "--concurrent", "2"]
    assert config.same_in_config(None, run.parse(args), said_elsewhere=resolved.SAID_BY)
    assert not config.same_in_config(None, run.parse(args))


def test_the_same_setup_is_every_field_the_configs_declaration_makes_part_of_it(mnist_small, tmp_path):
    """What counts as recorded follows the declaration of the configuration asked (its class's
    fields), not a list written out by hand: a record that differs in a field declared part of
    the setup is another setup; one that differs in a field declared not part of it is the same."""
    noted = make_dataclass("NotedRunConfig", [
        ("note", str, config.flag(None, flag="--note", help="a throw-away setup field")),
        ("remark", str, config.flag(None, flag="--remark", setup=False, help="a throw-away field, not the setup")),
        ("said", str, config.flag(None, flag="--said", record="no_such_record_field", help="said by no comparison")),
    ], bases=(config.RunConfig,), frozen=True)
    asked = noted("mnist", "lmdb", "warm", iters=20, accelerator="1ms", quiet=True, data=str(mnist_small.parent),
                  out=str(tmp_path), note="a", remark="x", said="s")
    assert run.run(asked) == 0
    [r] = recorded(tmp_path, "mnist")
    assert (r.config["note"], r.config["remark"]) == ("a", "x")
    assert len(run.recorded_runs(asked)) == 1
    assert len(run.recorded_runs(asked.replace(remark="y"))) == 1  # not the setup: still recorded
    assert run.recorded_runs(asked.replace(note="b")) == []  # another setup
    assert run.recorded_runs(asked.replace(said="t")) == []  # no record field compares it: the config does
    assert run.run(asked.replace(note="b")) == 0 and len(recorded(tmp_path, "mnist")) == 2


# A run's record as run.py wrote it before the runner took the RunConfig itself (made once by
# that code, `run.py mnist lmdb,images warm --iters 20 --accelerator 1ms --quiet --seed 5 --cpu
# --lmdb-read coalesced`): every field a tiny run on this data makes alike on any machine.
EARLIER_RECORD_KEYS = {
    "artifact_footprint", "au", "backend", "cache", "cache_method", "cache_resident_fraction",
    "cache_resident_fraction_after", "cold_condition", "command", "compute", "concurrent", "config", "dataset",
    "environment", "final_loss", "finished", "first_loss", "gpu_id", "initial_test_seconds", "iterations",
    "iterations_per_second", "iterations_reason", "iterations_setting", "limits", "location", "measurement_errors",
    "monitor", "plan", "process", "read_options", "repeat", "returncode", "revised", "run_dir", "run_id",
    "shared_rings", "solver_seconds", "source", "source_fingerprint", "startup_seconds", "status", "test_accuracy",
    "test_iteration", "test_loss", "test_ms_per_iteration", "test_seconds", "train_footprint", "training_cpu_seconds",
    "wall_seconds"}
EARLIER_CONFIG = {
    "accelerator": "1ms", "again": False, "backend": "lmdb,images", "cache": "warm", "client_hosts": [],
    "cold_fallback": None, "concurrent": 1, "count": None, "cpu": True, "cpu_quota": None, "cpus": None,
    "dataset": "mnist", "gpu": None, "iters": 20, "iters_reason": None, "mem_limit": None, "mem_per_solver": None,
    "options": {"lmdb_read": "coalesced"}, "profile": None, "quiet": True, "rbps": None, "repeats": 1, "riops": None,
    "seed": 5, "test_interval": None}
EARLIER_LIMITS = {"applied": None, "cgroup": None, "cpu_quota": None, "cpu_throttling": None, "cpus": None,
                  "mem_bytes": None, "mem_per_solver_bytes": None, "modified_from": None, "profile": None,
                  "rbps": None, "riops": None, "throttled_reads": None}
EARLIER_COMPUTE = {"accelerator": "1ms", "mode": "emulated", "ms_per_iteration": 1.0,
                   "source": "given on the command line", "test_ms_per_iteration": 0.5208}


def test_a_run_records_what_it_recorded_before_the_runner_took_the_config(mnist_small, tmp_path):
    args = ["mnist", "lmdb,images", "warm", "--iters", "20", "--accelerator", "1ms", "--quiet", "--seed", "5",
            "--cpu", "--lmdb-read", "coalesced", "--data", str(mnist_small.parent), "--out", str(tmp_path)]
    assert run.main(args) == 0
    lines = [json.loads(line) for line in (tmp_path / "mnist" / "records.jsonl").read_text().splitlines()]
    assert [(r["backend"], r["plan"]) for r in lines] == [
        ("lmdb", {"cells": 2, "order": "interleaved", "position": 0}),
        ("images", {"cells": 2, "order": "interleaved", "position": 1})]
    for r in lines:
        assert set(r) == EARLIER_RECORD_KEYS, set(r) ^ EARLIER_RECORD_KEYS
        assert r["config"] == EARLIER_CONFIG
        assert (r["limits"], r["compute"]) == (EARLIER_LIMITS, EARLIER_COMPUTE)
        assert {k: r[k] for k in ("dataset", "cache", "repeat", "cache_method", "iterations_setting",
                                  "iterations_reason", "cold_condition", "gpu_id", "status", "returncode",
                                  "concurrent", "iterations", "shared_rings")} == {
            "dataset": "mnist", "cache": "warm", "repeat": 0, "cache_method": "read", "iterations_setting": 20,
            "iterations_reason": None, "cold_condition": None, "gpu_id": -1, "status": "ok", "returncode": 0,
            "concurrent": None, "iterations": 20, "shared_rings": None}
    assert [r["read_options"] for r in lines] == [{"lmdb_read": "coalesced"}, None]


def test_every_run_flag_names_its_type_default_and_help():
    for name, default, f in config.flags():
        assert f.flag == name or f.flag == "--" + name.replace("_", "-"), name
        assert f.hidden or f.positional or f.help or name == "repeats", name
    assert run.parse(["mnist", "lmdb", "warm", "--client-hosts", "a,b"]).client_hosts == ("a", "b")
    assert run.parse(["mnist", "lmdb", "warm", "--prefetch-depth", "4"]).options == {"prefetch_depth": "4"}
    assert config.read_choice(run.parse(["mnist", "redis", "warm", "--prefetch-depth", "4", "--rtt", "2ms"])) == (
        {"prefetch_depth": 4}, {"rtt_ms": 2.0})


def test_a_config_reads_back_as_the_command_line_that_asks_it():
    args = ["mnist", "lmdb,images", "all", "--iters", "20", "--client-hosts", "a,b", "--quiet", "--lmdb-read", "shared"]
    assert config.command_line(run.parse(args)) == " ".join(args)
    assert run.parse(config.command_line(run.parse(args)).split()) == run.parse(args)


def test_a_make_targets_config_is_the_datasets_sizing_with_the_users_flags_over_it():
    from data_prep import datasets
    from experiments import matrix
    c = matrix.configuration("imagenet", "all", ["--iters", "50", "--repeats", "1", "--lmdb-read", "coalesced"])
    assert (c.backend, c.cache, c.repeats, c.iters, c.count, c.mem_limit) == ("all", "all", 1, 50, 12800, "1G")
    assert c.options == {"lmdb_read": "coalesced"} and c.iters_reason  # the sizing says why
    quick = datasets.get("mnist").quick_iters
    assert matrix.configuration("mnist", "quick", []) == config.RunConfig("mnist", "all", "all", repeats=1, iters=quick,
                                                                          test_interval=quick)


def test_a_multihost_sweep_runs_on_the_config_of_its_cluster_and_hosts_over_the_users_flags(tmp_path):
    """benchmarks/multihost.py's capacity sweep: the user's flags, then the RunConfig of the
    cluster, client hosts and folders it made, which stand over them."""
    from benchmarks import capacity, multihost
    words = multihost.sweep_arguments("mnist", ["--max", "4", "--accelerator", "titanx2016", "--out", "elsewhere"],
                                      "10.0.0.5:6379", ["ns-0", "ns-1"], tmp_path / "data", tmp_path / "out")
    sweep, run_flags = capacity.parser().parse_known_args(words)
    assert (sweep.dataset, sweep.backends, sweep.cache, sweep.max) == ("mnist", "redis", "warm", 4)
    asked = run.parse([sweep.dataset, sweep.backends, sweep.cache, *run_flags])
    assert asked == config.RunConfig("mnist", "redis", "warm", accelerator="titanx2016", client_hosts=("ns-0", "ns-1"),
                                     data=str(tmp_path / "data"), out=str(tmp_path / "out"),
                                     options={"seeds": "10.0.0.5:6379"})


def test_a_datasets_matrix_sizing_is_run_config_values_that_read_back_from_the_command_line():
    """A dataset's matrix_config holds RunConfig fields of their flags' types (the datasets layer
    declares it as data; run.py and the matrix apply it with RunConfig.replace)."""
    from data_prep import datasets
    sized = [ds for ds in datasets.REGISTRY.values() if ds.matrix_config]
    assert [ds.name for ds in sized] == ["imagenet"]
    for ds in sized:
        c = config.RunConfig(ds.name, "all", "all").replace(**ds.matrix_config)
        assert run.parse(config.arguments(c)) == c, ds.name
    assert config.flag_words({"quiet": False, "again": True, "client_hosts": ("a", "b"), "iters": 5}) == [
        "--again", "--client-hosts", "a,b", "--iters", "5"]
