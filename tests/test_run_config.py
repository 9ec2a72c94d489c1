"""A run flag is declared once, as a field of RunConfig (experiments/config.py): the command
line, the record and "the same setup" follow from that field alone."""
from dataclasses import make_dataclass

import pytest

from experiments import config, run
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
    """Records written before Record.config existed compare as they did: by iterations_setting,
    limits, compute, location, read options and concurrent, not by the config."""
    assert config.compared_in_config() == []
    args = ["mnist", "lmdb", "warm", "--iters", "20", "--mem-limit", "1G", "--concurrent", "2"]
    assert config.same_in_config(None, run.parse(args))


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
