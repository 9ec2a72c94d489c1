"""The training process's own CPU in its training window (Record.training_cpu_seconds), on a real
Caffe run: the runner keeps it apart from the start-up and the initial test pass, so that the
stoppers judge the cores on training alone (analysis/capacity.py _processes_cpu)."""
from experiments import runner


def test_a_run_records_its_cpu_in_the_training_window_apart_from_its_startup(mnist_small, tmp_path):
    r = runner.run(runner.RunSpec("mnist", "lmdb", "warm", iters=300, accelerator="4ms", data_root=mnist_small.parent,
                                  results=tmp_path, progress=False), log=lambda *_: None)
    whole = r.process["cpu_seconds"]
    assert r.ok and r.training_cpu_seconds is not None, r.training_cpu_seconds
    # the start-up (libraries, the nets, opening the data) and the test pass at iteration 0 used CPU too
    assert 0 < r.training_cpu_seconds < whole, (r.training_cpu_seconds, whole)
    # no more than every core for the whole window
    assert r.training_cpu_seconds <= r.solver_seconds * r.environment["cpu_cores"] + 0.05, r
