"""AU from a Caffe log, exactly: synthetic logs in the format Caffe writes (copied from
mnist/runs/20261123-213435-064f20/caffe.log of the catalogue's ci-2core-emulated-h100-calibrated), with
the timestamps and solver settings chosen here, so that the accelerator's work and the solver's
window are known by hand. The hand values are computed below from the numbers written into each
log, never from the code under test."""
from datetime import datetime, timedelta

import pytest

from experiments import caffe_log
from experiments.accelerators import Compute

TRAIN_MS, TEST_MS = 3.0, 1.5  # the emulated accelerator of these logs
EMULATED = Compute("emulated", "3ms", TRAIN_MS, TEST_MS, "a test")
START = datetime(2026, 11, 23, 21, 34, 36)


def _line(at, source, text, thread=10638):
    return f"I{at:%Y%m%d %H:%M:%S.%f} {thread} {source}] {text}"


def caffe_log_text(max_iter, display, test_interval, test_iter, window_s, done=True, late_s=(0, 0)):
    """A log of a run whose initial test pass and iteration 0 take their emulated time (plus
    late_s: what each overshot, which the emulated layers take back inside the window), then
    window_s from the first iteration's line to "Optimization Done"; iterations at even steps in
    between, a test pass wherever Caffe runs one (iteration 0, multiples of test_interval, and
    after the loop when it divides max_iter), and the final forward pass's loss line when
    display divides max_iter. done=False: the log of a run killed half way (it stops at
    max_iter // 2)."""
    tested = START + timedelta(seconds=0.1 + test_iter * TEST_MS / 1000 + late_s[0])
    first = tested + timedelta(seconds=TRAIN_MS / 1000 + late_s[1])
    at = lambda i: first + timedelta(seconds=window_s * i / max_iter)  # noqa: E731
    lines = [_line(START, "caffe.cpp:197", "Use CPU."),
             _line(START, "solver.cpp:45", "Initializing solver from parameters: "),
             f"test_iter: {test_iter}", f"test_interval: {test_interval}", "base_lr: 0.01",
             f"display: {display}", f"max_iter: {max_iter}", 'lr_policy: "inv"', "solver_mode: CPU",
             _line(START, "caffe.cpp:239", "Starting Optimization"),
             _line(START, "solver.cpp:289", "Solving lenet_train")]
    lines += _test_pass(0, START + timedelta(seconds=0.1), tested)
    last = max_iter if done else max_iter // 2
    for i in range(0, last):
        if i and i % test_interval == 0:
            lines += _test_pass(i, at(i) - timedelta(seconds=0.001), at(i))
        if i % display == 0:
            lines += [_line(at(i), "solver.cpp:239", f"Iteration {i} (943.396 iter/s, 0.106s/100 iters), loss = 0.28"),
                      _line(at(i), "solver.cpp:258", "    Train net output #0: loss = 0.28 (* 1 = 0.28 loss)"),
                      _line(at(i), "sgd_solver.cpp:112", f"Iteration {i}, lr = 0.01")]
    if not done:
        return "\n".join(lines) + "\n"
    end = at(max_iter)
    if max_iter % display == 0:
        lines.append(_line(end - timedelta(seconds=0.003), "solver.cpp:327", f"Iteration {max_iter}, loss = 0.26"))
    if max_iter % test_interval == 0:
        lines += _test_pass(max_iter, end - timedelta(seconds=0.002), end - timedelta(seconds=0.001))
    lines += [_line(end, "solver.cpp:332", "Optimization Done."), _line(end, "caffe.cpp:250", "Optimization Done.")]
    return "\n".join(lines) + "\n"


def _test_pass(i, start, end):
    return [_line(start, "solver.cpp:347", f"Iteration {i}, Testing net (#0)"),
            _line(end, "solver.cpp:414", "    Test net output #0: loss = 0.286059 (* 1 = 0.286059 loss)")]


def au_of(tmp_path, compute=EMULATED, **log):
    path = tmp_path / "caffe.log"
    path.write_text(caffe_log_text(**log))
    parsed = caffe_log.parse(path.read_text())
    return parsed, caffe_log.timing(parsed, compute, log=path)


def test_the_ordinary_case_counts_the_iterations_after_the_first_and_the_test_passes_after_start(tmp_path):
    # 200 iterations, display 30 (does not divide 200: no final forward), test passes at 0, 100, 200
    parsed, timed = au_of(tmp_path, max_iter=200, display=30, test_interval=100, test_iter=10, window_s=0.75)
    assert parsed["solver_seconds"] == 0.75
    assert caffe_log.timed_compute(parsed) == (199, 0, 2 * 10)
    hand_seconds = (199 * 3.0 + 2 * 10 * 1.5) / 1000  # 0.627 s
    assert EMULATED.seconds(caffe_log.timed_compute(parsed)) == pytest.approx(hand_seconds, rel=1e-12, abs=0)
    assert timed["au"] == round(hand_seconds / 0.75, 4) == 0.836


def test_the_final_forward_branch_adds_one_forward_pass_at_a_third_of_an_iteration(tmp_path):
    # display 100 divides 200: Caffe runs one more forward pass to log the final loss
    parsed, timed = au_of(tmp_path, max_iter=200, display=100, test_interval=100, test_iter=10, window_s=0.8)
    assert caffe_log.timed_compute(parsed) == (199, 1, 20)
    hand_seconds = (199 * 3.0 + 3.0 / 3 + 20 * 1.5) / 1000  # 0.628 s
    assert EMULATED.seconds(caffe_log.timed_compute(parsed)) == pytest.approx(hand_seconds, rel=1e-12, abs=0)
    assert timed["au"] == round(hand_seconds / 0.8, 4) == 0.785


def test_the_forward_share_is_what_the_final_forward_costs(tmp_path):
    """Only the final forward pass is charged at the forward share: a net whose iterations cost
    nothing shows it alone (test passes cost nothing either), 30 ms / 3 over 0.02 s."""
    compute = Compute("emulated", "30ms", 30.0, 0.0, "a test")
    parsed, timed = au_of(tmp_path, compute, max_iter=1, display=1, test_interval=1, test_iter=10, window_s=0.02)
    assert caffe_log.timed_compute(parsed) == (0, 1, 10)
    assert parsed["solver_seconds"] == 0.02
    assert timed["au"] == round((30.0 / 3 / 1000) / 0.02, 4) == 0.5


def test_an_au_of_exactly_one_is_one_and_a_microsecond_less_window_is_an_error(tmp_path):
    # 199 x 3 ms + 3/3 ms for the final forward + 1 test pass of 10 x 1.5 ms = 0.613 s
    window = (199 * 3.0 + 3.0 / 3 + 10 * 1.5) / 1000
    parsed, timed = au_of(tmp_path, max_iter=200, display=100, test_interval=200, test_iter=10, window_s=window)
    assert parsed["solver_seconds"] == 0.613 and timed["au"] == 1.0
    with pytest.raises(caffe_log.LogError, match=r"AU 1\.000002 > 1"):  # glog's resolution is a microsecond
        au_of(tmp_path, max_iter=200, display=100, test_interval=200, test_iter=10, window_s=window - 1e-6)


def test_what_the_emulated_layers_overshot_before_the_window_may_be_missing_from_it(tmp_path):
    """EmulatedCompute takes an overshoot back from its next wait: iteration 0 logged 2 ms late
    and the initial test pass 1 ms late, the window may hold up to 3 ms less than the compute
    counted (AU 1), not a microsecond more."""
    window = (199 * 3.0 + 3.0 / 3 + 10 * 1.5) / 1000  # 0.613 s of compute, as above
    layout = dict(max_iter=200, display=100, test_interval=200, test_iter=10, late_s=(0.001, 0.002))
    parsed, timed = au_of(tmp_path, window_s=window - 0.003, **layout)
    assert caffe_log.carried_in(parsed, EMULATED) == pytest.approx(0.003, abs=1e-12)
    assert timed["au"] == 1.0
    with pytest.raises(caffe_log.LogError, match=r"0\.613000 s of 3ms compute .* in a solver window of 0\.609999 s, "
                                                 r"0\.003000 s of it at most carried in"):
        au_of(tmp_path, window_s=window - 0.003001, **layout)


def test_compute_over_counted_is_an_error_naming_the_log_not_an_au_of_one(tmp_path):
    # 0.628 s of compute (as in the final-forward case) in a 0.6 s window: AU 1.0467 cannot be
    with pytest.raises(caffe_log.LogError, match=rf"^{tmp_path / 'caffe.log'}: AU 1\.046667 > 1"):
        au_of(tmp_path, max_iter=200, display=100, test_interval=100, test_iter=10, window_s=0.6)


def test_a_real_gpu_faster_than_its_ceiling_is_at_au_one(tmp_path):
    """A real H100's AU is measured against the h100 profile (accelerators.real), a fit on
    other runs: a run faster than that is fed, not wrongly counted."""
    ceiling = Compute("gpu", "h100", TRAIN_MS, TEST_MS, "ceiling for AU: a test")
    parsed, timed = au_of(tmp_path, ceiling, max_iter=200, display=100, test_interval=100, test_iter=10, window_s=0.6)
    assert ceiling.seconds(caffe_log.timed_compute(parsed)) / parsed["solver_seconds"] > 1.04 and timed["au"] == 1.0


def test_a_log_with_too_few_iterations_has_no_au(tmp_path):
    """A run killed half way logs no "Optimization Done": its window has no end, so no AU (not
    one over the iterations it logged), and its compute is None."""
    parsed, timed = au_of(tmp_path, max_iter=200, display=10, test_interval=100, test_iter=10, window_s=0.8,
                          done=False)
    assert parsed["last_iteration"] == 90 and not parsed["done"]
    assert caffe_log.timed_compute(parsed) is None and timed["au"] is None
    # Caffe stopped by a SIGINT logs "stopped early" and then its tool's "Done": no AU either
    text = caffe_log_text(max_iter=200, display=10, test_interval=100, test_iter=10, window_s=0.8)
    text = text.replace("solver.cpp:332] Optimization Done.", "solver.cpp:332] Optimization stopped early.")
    parsed = caffe_log.parse(text)
    assert parsed["stopped_early"] and caffe_log.timing(parsed, EMULATED)["au"] is None
