"""Figures people can read at page width: every figure the report, the capacity analysis and the
README's answer and the loaders' comparison (benchmarks/peers.py) draw from the committed records is drawn here, and no two of its tick labels
may overlap (their extents, as matplotlib's renderer lays them out)."""
import itertools
import json

import pytest
from matplotlib.figure import Figure

import catalogue
from analysis import answer, capacity, report
from benchmarks import peers
from experiments.record import load


def overlapping_tick_labels(fig):
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    found = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            labels = [t for t in axis.get_ticklabels(which="both") if t.get_visible() and t.get_text().strip()]
            boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in labels]
            found += [(a, b) for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2) if box_a.overlaps(box_b)]
    return found


@pytest.fixture
def drawn(monkeypatch):
    """Every figure saved while the test runs: (file name, overlapping tick labels)."""
    seen, original = [], Figure.savefig

    def checked(fig, path, *args, **kwargs):
        seen.append((str(path).rsplit("/", 1)[-1], overlapping_tick_labels(fig), fig.get_size_inches()[0] * fig.dpi))
        return original(fig, path, *args, **kwargs)
    monkeypatch.setattr(Figure, "savefig", checked)
    return seen


def test_no_tick_labels_overlap_in_the_report_the_capacity_figures_or_the_answer(drawn, tmp_path):
    for name in ("ci-2core-paper2016-calibrated", "ci-2core-emulated-h100-calibrated"):
        report.write_report(load([catalogue.folder(name)]), tmp_path / name)
    records = [r for r in load(catalogue.tracked_records("ci-2core-capacity")) if not r.superseded]
    for dataset in sorted({r.dataset for r in records}):
        capacity.figure(records, dataset, tmp_path)
        capacity.figure_per_core(records, dataset, tmp_path)
    answer.figure(answer.rows(), tmp_path / "answer.png")
    peers.report(json.loads((catalogue.folder("ci-2core-peers") / "peers.json").read_text()), tmp_path / "peers.png")
    names = {name for name, _, _ in drawn}
    assert {"fig_time_mnist.png", "fig_capacity_cifar10.png", "answer.png", "peers.png"} <= names
    assert [(name, overlaps) for name, overlaps, _ in drawn if overlaps] == []


def test_the_overlap_check_sees_overlapping_labels():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.bar(range(6), range(6))
    ax.set_xticks(range(6), ["in memory (Python)"] * 6)
    assert overlapping_tick_labels(fig)
    plt.close(fig)


def test_the_capacity_figures_name_each_curve_by_the_cache_its_runs_had(monkeypatch, tmp_path):
    """ImageNet in 1 GiB: its LMDB runs asked warm held less than a warm run needs (record.cache_state),
    so the legend says "partly warm" and never plain "warm" for them; MNIST's warm LMDB stays "warm"."""
    legends = {}
    monkeypatch.setattr(Figure, "savefig", lambda fig, path, *a, **k: legends.setdefault(
        str(path).rsplit("/", 1)[-1], [t.get_text() for legend in fig.legends for t in legend.get_texts()]))
    records = [r for r in load(catalogue.tracked_records("ci-2core-capacity")) if not r.superseded]
    for dataset in ("imagenet", "mnist"):
        capacity.figure(records, dataset, tmp_path)
    imagenet, mnist = legends["fig_capacity_imagenet.png"], legends["fig_capacity_mnist.png"]
    had = {(capacity.curve_of(r), r.cache_state) for r in records if r.ok and r.dataset == "imagenet" and r.backend == "lmdb"}
    assert any(state == "partly warm" for _, state in had)  # the records this test rests on
    assert "LMDB, partly warm" in imagenet and "LMDB, warm" not in imagenet, imagenet
    assert any(label.startswith("LMDB, warm (partly warm at N = ") for label in imagenet), imagenet
    assert "LMDB, warm" in mnist and not any("partly" in label for label in mnist), mnist


def test_the_per_core_bars_say_the_cache_their_runs_had(monkeypatch, tmp_path):
    """ImageNet in 1 GiB: the runs of some curves asked warm held less than a warm run needs
    (record.cache_state). Each such bar is hatched and says what its runs had beside it
    ("partly warm"); a bar whose runs were all warm says nothing and is not hatched."""
    drawn = {}
    monkeypatch.setattr(Figure, "savefig", lambda fig, path, *a, **k: drawn.setdefault("axes", fig.axes))
    records = [r for r in load(catalogue.tracked_records("ci-2core-capacity")) if not r.superseded]
    capacity.figure_per_core(records, "imagenet", tmp_path)
    ax = drawn["axes"][0]
    missed = {capacity.curve_of(r) for r in records if r.ok and r.dataset == "imagenet" and r.cache_state != r.cache}
    asked = {capacity.curve_of(r) for r in records if r.dataset == "imagenet"}
    assert missed and asked - missed  # the records this test rests on: some curves missed, some did not
    said = [t.get_text() for t in ax.texts]
    assert len(said) == len(missed) and all("partly warm" in text for text in said), said
    hatched = [bar for bar in ax.patches if bar.get_hatch()]
    assert len(hatched) == len(missed), (len(hatched), len(missed))
