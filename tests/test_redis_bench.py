"""benchmarks/redis_bench.py, what the Redis benchmarks share: their rounds, each cell's median
and spread, and their JSON result. Its clusters are the benchmarks' own tests' (test_redis_failover,
test_redis_cluster_changes, test_redis_foreign_keys)."""
import json

import pytest

from benchmarks import redis_bench


def test_the_rounds_take_every_cell_in_turn_even_cells_that_can_be_read_once():
    cells = (name for name in ("direct", "10 ms"))  # read once, as a generator is
    got = list(redis_bench.interleaved(2, cells))
    assert got == [(0, 0, "direct"), (0, 1, "10 ms"), (1, 0, "direct"), (1, 1, "10 ms")]


def test_a_cells_spread_is_its_median_and_range_of_the_values_measured():
    assert redis_bench.spread([3.0, None, 1.0, 2.5], 2) == "2.50 [1.00-3.00]"
    assert redis_bench.spread([12.25, 4.0], 1, 7) == "    8.1 [4.0-12.2]"  # 7 wide, as the tables align it
    assert redis_bench.spread([None, None]) == "-"


def test_the_result_is_written_whole_with_the_machine_last(tmp_path):
    path = tmp_path / "result.json"
    redis_bench.write_result(path, {"rounds": [{"pause_s": 1.5}], "args": {"rounds": "1"}})
    written = json.loads(path.read_text())
    assert list(written) == ["rounds", "args", "machine"] and written["rounds"] == [{"pause_s": 1.5}]
    assert written["machine"]["cpu_model"]
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]  # nothing partial left beside it


def test_a_result_that_cannot_be_written_leaves_the_one_there(tmp_path):
    path = tmp_path / "result.json"
    path.write_text('{"rounds": []}')
    (tmp_path / "result.json.partial").mkdir()  # where the new result would be written first
    with pytest.raises(IsADirectoryError):
        redis_bench.write_result(path, {"rounds": [1]})
    assert path.read_text() == '{"rounds": []}'
