"""The capacity sweep (benchmarks/capacity.py) and its analysis (analysis/capacity.py), on real
Caffe runs of several solvers at once on the emulated H100 (LeNet: 1.05 ms per iteration), where
warm MNIST image files starve even one solver (AU ~0.3) and LMDB feeds two (AU ~0.99)."""
from analysis import capacity
from benchmarks import capacity as sweep
from experiments.record import recorded


def test_each_backend_is_swept_on_its_own_runs(mnist_small, tmp_path):
    # images first: a sweep that counted another backend's runs would see them in lmdb's
    assert sweep.main(["mnist", "images,lmdb", "warm", "--max", "2", "--iters", "100", "--confirm", "2",
                       "--accelerator", "h100", "--data", str(mnist_small.parent), "--out", str(tmp_path)]) == 0
    records = recorded(tmp_path, "mnist")
    groups = {}
    for r in records:
        groups.setdefault((r.backend, capacity.solvers(r)), set()).add((r.concurrent or {}).get("group", r.run_id))
    # images: N = 1 fails, confirmed on a second run; lmdb: N = 1 and 2 hold, N = 2 confirmed
    assert {k: len(v) for k, v in groups.items()} == {("images", 1): 2, ("lmdb", 1): 1, ("lmdb", 2): 2}
    answers = {key[2]: capacity.largest_n(by_n) for key, by_n in capacity.curves(records).items()}
    assert answers["images"][0] == 0 and max(answers["images"][2]) < capacity.THRESHOLD
    assert answers["lmdb"][0] == 2 and min(answers["lmdb"][1]) >= capacity.THRESHOLD
    table = capacity.table(records)
    assert "| lmdb | warm | 2 (not bracketed) |" in table  # N = 3 never ran: not bracketed
    assert "| images | warm | 0 |" in table

    # superseded runs stay in the records and count nowhere: the sweep runs N = 2 again
    from experiments.supersede import supersede
    old = [r.run_id for r in records if r.backend == "lmdb" and capacity.solvers(r) == 2]
    assert supersede(tmp_path / "mnist" / "records.jsonl", old, "a test") == []
    assert sweep.main(["mnist", "lmdb", "warm", "--max", "2", "--iters", "100", "--confirm", "2",
                       "--accelerator", "h100", "--data", str(mnist_small.parent), "--out", str(tmp_path)]) == 0
    again = recorded(tmp_path, "mnist")
    assert sorted(r.run_id for r in again if r.superseded) == sorted(old) and len(old) == 4
    fresh = {r.concurrent["group"] for r in again if r.backend == "lmdb" and capacity.solvers(r) == 2
             and not r.superseded}
    assert len(fresh) == 2
