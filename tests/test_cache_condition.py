"""A run is called warm or cold only when the residency measured before its clock bears the label
out (experiments/record.py cache_state); tables and figures group and label runs by what they
had, never by the ask alone."""
import pytest

from analysis import answer, report
from experiments.record import COLD_AT_MOST, WARM_AT_LEAST, Record, cache_state


@pytest.mark.parametrize("asked, resident, had", [
    ("warm", 1.0, "warm"), ("warm", WARM_AT_LEAST, "warm"), ("warm", 0.9499, "partly warm"), ("warm", 0.6, "partly warm"),
    ("cold", 0.0, "cold"), ("cold", COLD_AT_MOST, "cold"), ("cold", 0.0501, "not cold"), ("cold", 1.0, "not cold"),
    ("warm", None, "warm")])
def test_the_label_follows_the_measured_residency(asked, resident, had):
    assert cache_state(asked, resident) == had


def test_data_in_a_servers_memory_keeps_the_state_its_location_set():
    """Redis's cold is its servers restarted: the recorded residency (1.0) is no page cache's."""
    redis_cold = Record("r", "mnist", "redis", "cold", status="ok", cache_resident_fraction=1.0,
                        location={"kind": "redis-cluster"})
    assert redis_cold.cache_state == "cold"
    described_failed = Record("r", "mnist", "redis", "cold", status="ok", cache_resident_fraction=1.0, location=None)
    assert described_failed.cache_state == "cold"  # the backend's location says so when the record cannot
    local = Record("l", "mnist", "lmdb", "cold", status="ok", cache_resident_fraction=0.4, location={"kind": "local"})
    assert local.cache_state == "not cold"


def _runs(resident, cache="warm", n=3, seconds=100.0):
    return [Record(f"{cache}{resident}{i}", "imagenet", "images", cache, status="ok", wall_seconds=seconds + i,
                   cache_resident_fraction=resident, location={"kind": "local"}, monitor={}, process={})
            for i in range(n)]


def test_tables_label_a_partly_warm_cell_and_never_show_it_as_warm(tmp_path):
    records = _runs(0.6) + _runs(0.0, "cold", seconds=200.0)
    stats = report.cell_stats(records)
    assert ("imagenet", "images", "warm") not in stats and stats[("imagenet", "images", "partly warm")]["n"] == 3
    assert report._cache_cell(stats, "imagenet", "images", "warm").startswith("partly warm: 101.00")
    assert report._cache_cell(stats, "imagenet", "images", "cold").startswith("201.00")
    line = report.not_as_labelled_line(records)
    assert "imagenet images partly warm (60%-60% resident, n = 3)" in line and "left out of the figures" in line
    md, _ = report.write_report(records, tmp_path)
    assert "| imagenet | images | partly warm: 101.00" in md.read_text()
    assert report.not_as_labelled_line(_runs(1.0)) is None


def test_the_answer_shows_a_partly_warm_cell_labelled():
    cells = {("imagenet", "images", "partly warm"): (649.0, 3, 0.01), ("imagenet", "images", "cold"): (688.0, 3, 0.0)}
    warm, cold = (answer._as_had(cells, ("imagenet", "images", c)) for c in ("warm", "cold"))
    assert answer._seconds(warm, None) == "649 (partly warm)" and answer._seconds(cold, None) == "688"
    assert answer._as_had({}, ("imagenet", "images", "warm")) is None
