"""The numbers in the prose of README.md and docs/*.md, recomputed from the committed records.

A page marks a claim by putting `<!-- claim: NAME -->` right after it (never at the start of a
line with text after it: Markdown would take that line as raw HTML). The function NAME below
reads the records under results/ and returns the text as the records make it read: a string, or
a tuple of strings that must stand in that order in the claim's span (from the previous marker or
the start of its paragraph, to the marker; a marker alone on its line spans the table or
paragraph above it). Whitespace and line breaks do not count. tests/test_claims_numbers.py checks every marker of
every page, and that every function here has one.

    python analysis/claims.py          # print each claim's text as the records make it read
"""
import functools
import json
import statistics
from pathlib import Path

import catalogue
from experiments import machines
from experiments.record import MISSED, load

ROOT = Path(__file__).resolve().parents[1]

PAPER2016 = catalogue.relative("ci-2core-paper2016-calibrated")
H100 = catalogue.relative("ci-2core-emulated-h100-calibrated")
PEERS = f"{catalogue.relative('ci-2core-peers')}/peers.json"
CAFFE_ROWS = f"{catalogue.relative('ci-2core-peers')}/caffe-rows.json"
DECODE_THREADS = catalogue.relative("ci-2core-decode-threads-0022")
DECODE_THREADS_0021 = catalogue.relative("ci-2core-decode-threads")
TRANSFORM_THREADS = catalogue.relative("ci-2core-transform-threads")
LABELS = {"mnist": "MNIST", "cifar10": "CIFAR-10", "imagenet": "ImageNet"}


# -- how the prose writes numbers ---------------------------------------------------------------

def times(x):
    """A ratio as the prose writes it: 18x, 6.4x, and two decimals near 1 (1.06x, 0.86x)."""
    return f"{x:.0f}" if x >= 9.95 else f"{x:.1f}" if x >= 1.195 else f"{x:.2f}"


def span(values, fmt=times):
    """'lo-hi' of the values as `fmt` writes them, one value where both read the same."""
    lo, hi = fmt(min(values)), fmt(max(values))
    return lo if lo == hi else f"{lo}-{hi}"


def thousands(x):
    return f"{round(x, -3):,.0f}"


def count(x):
    return f"{x:,.0f}"


def percents(values, digits=0):
    """'lo-hi%' of shares (103-104%)."""
    return span([100 * v for v in values], lambda x: f"{x:.{digits}f}") + "%"


# -- the records ---------------------------------------------------------------------------------

@functools.cache
def runs(folder):
    """The ok runs of a results folder (superseded ones are not ok)."""
    return tuple(r for r in load([ROOT / folder]) if r.ok)


def paper2016_runs(dataset, backend):
    """The runs of a cell under the 2016 profile's disk (earlier steps of its fit left out)."""
    riops = machines.get("paper2016").limits["riops"]
    return [r for r in runs(PAPER2016) if (r.dataset, r.backend) == (dataset, backend)
            and (r.limits or {}).get("riops") == riops and not r.concurrent and not r.read_options]


def as_had(records, asked):
    """(runs, state): of each cell among `records` (dataset, backend, setup), the runs whose cache was
    as `asked` (warm | cold) by the residency measured before the clock (record.cache_state); where
    none was, those that asked for it and missed, and then the state is theirs ("partly warm", "not
    cold"), as the answer table takes them. Claims select runs here, never by the cache asked alone,
    so that none calls a partly warm run warm."""
    cells, state = {}, asked
    for r in records:
        if r.cache_state in (asked, MISSED[asked]):
            cells.setdefault((r.dataset, r.backend, r.setup()), []).append(r)
    found = []
    for cell in cells.values():
        bore = [r for r in cell if r.cache_state == asked]
        found += bore or cell
        state = state if bore else MISSED[asked]
    return found, state


def state_of(records, asked):
    """The state said for the runs of `records` that asked for `asked` (as_had)."""
    return as_had(records, asked)[1]


def had(records, asked):
    """The runs of as_had (the state they had aside)."""
    return as_had(records, asked)[0]


def asked_for(records, cache):
    """The runs that asked for `cache`, whatever they had (for the residency they found)."""
    return [r for r in records if r.cache_state in (cache, MISSED[cache])]


def labelled(state):
    """' (partly warm)' after a number from runs that missed their cache state, else ''."""
    return f" ({state})" if state in MISSED.values() else ""


def mean_wall(dataset, backend, cache):
    """Mean wall seconds of a 2016 cell, by the cache its runs had (as_had: the answer table's cell)."""
    return statistics.mean(r.wall_seconds for r in had(paper2016_runs(dataset, backend), cache))


def state_2016(dataset, cache, *backends):
    """The cache state the 2016 cells of `backends` that asked for `cache` had: warm | cold where all
    bore it out, else "partly warm" | "not cold" (as_had)."""
    states = {as_had(paper2016_runs(dataset, b), cache)[1] for b in backends}
    return states.pop() if len(states) == 1 else MISSED[cache]


@functools.cache
def peers_medians(path=PEERS):
    """{(dataset, loader, form, threads, cache): {images_per_s, images_per_cpu_s, n}} of a peers run,
    as benchmarks/peers.py tabulates it (medians of the cells not left out)."""
    from analysis import peers
    from data_prep import datasets
    found = json.loads((ROOT / path).read_text())
    cells = found["cells"]
    plan = list(dict.fromkeys((c["loader"], c["form"], c["threads"]) for c in cells))
    caches = list(dict.fromkeys(c["cache"] for c in cells))
    out = {}
    for name in dict.fromkeys(c["dataset"] for c in cells):
        table, _ = peers.summarise(cells, datasets.get(name), plan, caches)
        out.update({(name, *row, cache): v for (row, cache), v in table.items() if v["n"]})
    return out


def peer(dataset, loader, form, threads, cache="warm", what="images_per_cpu_s", path=PEERS):
    return peers_medians(path)[(dataset, loader, form, threads, cache)][what]


def lmdb_over_files(dataset, loader, threads, cache="warm"):
    """How many times cheaper (per CPU-second) one loader reads the LMDB than the PNG files."""
    return peer(dataset, loader, "lmdb", threads, cache) / peer(dataset, loader, "images", threads, cache)


def decode_threads_au(folder, dataset, accelerator, cache, threads):
    """(median, lo, hi) AU of the decode-threads runs of one row."""
    aus = sorted(r.au for r in runs(folder) if (r.dataset, r.compute.get("accelerator"), r.cache_state)
                 == (dataset, accelerator, cache) and (r.read_options or {}).get("decode_threads", 1) == threads)
    return statistics.median(aus), aus[0], aus[-1]


def decode_threads_rows():
    """(dataset, accelerator, cache) of every row of the decode-threads runs, in the table's order."""
    keys = {(r.dataset, r.compute.get("accelerator"), r.cache_state) for r in runs(DECODE_THREADS)}
    order = {"h100": 0, "titanx2016": 1}, list(LABELS), {"warm": 0, "cold": 1}
    return sorted(keys, key=lambda k: (order[0][k[1]], order[1].index(k[0]), order[2][k[2]]))


def batch(dataset):
    from data_prep import datasets
    return datasets.get(dataset).model.batch


def paper_ratio(finding):
    """A finding's ratio as the paper states it (analysis/paper_reference.json)."""
    from analysis.report import REFERENCE
    return next(f["paper_ratio"] for f in REFERENCE["findings"] if f["id"] == finding)


def decode_gains(accelerator):
    return [decode_threads_au(DECODE_THREADS, d, a, c, 2)[0] / decode_threads_au(DECODE_THREADS, d, a, c, 1)[0]
            for d, a, c in decode_threads_rows() if a == accelerator]


CLAIMS = {}


def claim(f):
    """Registers a claim's function under its name, the NAME of its markers."""
    CLAIMS[f.__name__] = f
    return f


# -- README.md -----------------------------------------------------------------------------------

@claim
def readme_imagenet_files_2016():
    """ImageNet's PNG files on the emulated 2016 machine: paced reads, training time, prefetch."""
    mine = paper2016_runs("imagenet", "images")
    n = min(len(had(mine, c)) for c in ("warm", "cold"))
    reads = [r.limits["throttled_reads"]["read_ios"] for r in mine]
    return (f"each of n = {n} runs per cache made {span(reads, thousands)} paced reads in "
            f"{span([r.solver_seconds for r in mine], count)} s of training, the prefetch thread "
            f"{percents([r.prefetch_share() for r in mine])} busy")


@claim
def readme_imagenet_files_h100():
    mine = [r for r in runs(H100) if (r.dataset, r.backend) == ("imagenet", "images")]
    return f"that thread {percents([r.prefetch_share() for r in mine])} busy in all {len(mine)} runs"


@claim
def readme_decode_threads_gain():
    two = lambda x: f"{x:.2f}"  # noqa: E731
    return (f"raises the AU {span(decode_gains('h100'), two)}x on an emulated H100 "
            f"({span(decode_gains('titanx2016'), two)}x on the 2016 machine")


def lmdb_over_files_warm(alone=False):
    """Warm, LMDB over PNG files per CPU-second, for every loader and parallelism that read both
    (alone: with one thread or no worker)."""
    return [lmdb_over_files(d, loader, t) for d, loader, form, t, cache in peers_medians()
            if form == "lmdb" and cache == "warm" and (d, loader, "images", t, "warm") in peers_medians()
            and (not alone or t == (0 if loader == "torch" else 1))]


def transform_threads_runs(accelerator, threads, cache="warm"):
    return [r for r in had(runs(TRANSFORM_THREADS), cache) if r.compute.get("accelerator") == accelerator
            and (r.read_options or {}).get("transform_threads", 1) == threads]


# (accelerator, cache) of the transform-threads runs, in the order docs/peers.md's table gives them
TRANSFORM_SETTINGS = (("h100", "warm"), ("h100", "cold"), ("titanx2016", "warm"), ("titanx2016", "cold"),
                      ("30ms", "warm"))
TRANSFORM_LABELS = {"h100": "H100", "titanx2016": "Titan X", "30ms": "30 ms"}


def transform_threads_au(accelerator, cache, threads):
    return statistics.median(r.au for r in transform_threads_runs(accelerator, threads, cache))


def transform_threads_cpu(accelerator, cache):
    """The data path's CPU per image at 2 transform threads over 1."""
    from analysis import capacity
    one, two = (capacity.images_per_core_second(transform_threads_runs(accelerator, n, cache)) for n in (1, 2))
    return one / two


@claim
def readme_transform_threads_gain():
    """ImageNet LMDB warm at 2 transform threads over 1: the AU (medians) and the data path's CPU
    per image, where one thread cannot keep up (an emulated 30 ms per iteration)."""
    gain = transform_threads_au("30ms", "warm", 2) / transform_threads_au("30ms", "warm", 1)
    return (f"raises the AU {gain:.2f}x where one thread cannot keep up (ImageNet LMDB warm at an emulated "
            f"30 ms per iteration, n = {len(transform_threads_runs('30ms', 1))} each",
            f"for {transform_threads_cpu('30ms', 'warm'):.2f}x the CPU per image")


@claim
def readme_transform_threads_elsewhere():
    """Where one thread kept up or the reads held the accelerator: the emulated H100 cold, the Titan X."""
    one, two = (transform_threads_au("h100", "cold", n) for n in (1, 2))
    titanx = [transform_threads_au("titanx2016", c, n) for c in ("warm", "cold") for n in (1, 2)]
    return (f"cold a second raised the AU {two / one:.2f}x ({one:.2f} to {two:.2f})",
            f"(AU {span(titanx, lambda x: f'{x:.2f}')})")


@claim
def peers_transform_threads_host():
    """The transform-threads runs' CPU probe and how many runs each row has."""
    rs = [r for a, c in TRANSFORM_SETTINGS for n in (1, 2) for r in transform_threads_runs(a, n, c)]
    probes = [r.environment["cpu_probe"]["images_per_second"] for r in rs]
    sizes = {len(transform_threads_runs(a, n, c)) for a, c in TRANSFORM_SETTINGS for n in (1, 2)}
    ms = {a: {r.compute["ms_per_iteration"] for r in rs if r.compute["accelerator"] == a} for a, _ in TRANSFORM_SETTINGS}
    cold = [r.cache_resident_fraction for r in rs if r.cache_state == "cold"]
    return (f"CPU probe {span(probes, lambda x: f'{x:.0f}')} images/s per core",
            f"n = {span(sizes, str)} per row", f"cold runs {max(cold):.1%} resident",
            f"the H100's {span(ms['h100'], lambda x: f'{x:g}')} ms per iteration, the Titan X's "
            f"{span(ms['titanx2016'], lambda x: f'{x:g}')} ms",
            f"accelerator of {span(ms['30ms'], lambda x: f'{x:g}')} ms per iteration")


@claim
def peers_transform_threads_table():
    """The rows of docs/peers.md's transform-threads table (ci-2core-transform-threads): AU,
    the prefetch thread's CPU over the solver's time and the data path's images per CPU second."""
    from analysis import capacity
    rows = []
    for accelerator, cache in TRANSFORM_SETTINGS:
        one = transform_threads_au(accelerator, cache, 1)
        for n in (1, 2):
            rs = transform_threads_runs(accelerator, n, cache)
            aus = sorted(r.au for r in rs)
            label = f"{TRANSFORM_LABELS[accelerator]}, {cache}" if n == 1 else ""
            rows.append(f"| {label} | {n} | {statistics.median(aus):.3f} ({aus[0]:.3f}-{aus[-1]:.3f}) | "
                        f"{statistics.median(aus) / one:.2f}x | {statistics.median(r.prefetch_share() for r in rs):.0%} | "
                        f"{capacity.images_per_core_second(rs):,.0f} |")
    return rows


@claim
def peers_transform_threads_says():
    """What a second transform thread bought where one thread kept up, cold on the H100 (and the
    other load beside those runs), and where one thread was too slow."""
    from analysis.decode_threads import other_load
    titanx = [statistics.median(r.prefetch_share() for r in transform_threads_runs("titanx2016", 1, c))
              for c in ("warm", "cold")]
    cold = [transform_threads_runs("h100", n, "cold") for n in (1, 2)]
    kept_up = [transform_threads_cpu(a, c) for a, c in TRANSFORM_SETTINGS if transform_threads_au(a, c, 1) >= 0.90]
    one, two = (transform_threads_au("h100", "cold", n) for n in (1, 2))
    three = lambda x: f"{x:.3f}"  # noqa: E731
    superseded = [r for r in load([ROOT / TRANSFORM_THREADS]) if r.status == "superseded" and r.cache_state == "cold"
                  and r.compute.get("accelerator") == "h100" and other_load(r) is not None]
    superseded_load = [other_load(r) for r in superseded]
    (slow,) = {r.compute["ms_per_iteration"] for r in transform_threads_runs("30ms", 1)}
    return (f"its prefetch thread {percents(titanx)} busy",
            f"a second thread raised the AU {two / one:.2f}x (medians {one:.3f} to {two:.3f}; one thread's runs "
            f"{span([r.au for r in cold[0]], three)}, two threads' {span([r.au for r in cold[1]], three)})",
            "the prefetch thread {} busy with one, {} with two".format(
                *(percents([statistics.median(r.prefetch_share() for r in cold[n])]) for n in (0, 1))),
            f"other load {percents([other_load(r) for r in cold[0] + cold[1]])} of the two cores",
            f"with {percents(superseded_load)} other load",
            f"too slow ({slow:g} ms), a second feeds it for {transform_threads_cpu('30ms', 'warm'):.2f}x the CPU per "
            "image",
            f"the second costs {span(kept_up, lambda x: f'{x:.2f}')}x the CPU per image for nothing")


@claim
def readme_records_cheaper():
    every, alone = span(lmdb_over_files_warm()), span(lmdb_over_files_warm(alone=True))
    return f"{every}x warm ({alone}x with one thread or no worker)"


@claim
def readme_files_over_kv_imagenet_2016():
    """The paper's headline on the emulated 2016 machine: ImageNet's files over its key-value stores."""
    stores = ("lmdb", "leveldb")
    ratios = {c: [mean_wall("imagenet", "images", c) / mean_wall("imagenet", kv, c) for kv in stores]
              for c in ("cold", "warm")}
    n = min(len(had(paper2016_runs("imagenet", b), c)) for b in ("images", *stores) for c in ratios)
    said = [f"{span(ratios[c], lambda x: f'{x:.0f}')}x {state_2016('imagenet', c, 'images', *stores)}" for c in ratios]
    return f"holds there ({', '.join(said)}, n = {n})"


@claim
def readme_emulation_same_host():
    """Real against emulated on the lent GPU hosts (the fidelity's same-host table): the cells that
    predict, as analysis/fidelity.py counts them (a cell a parameter was fitted on is no evidence)."""
    from analysis import fidelity
    rows = same_host_predictions()
    within = [fidelity.verdict(r, 1.15).startswith("within") for r in rows]
    data = [w for w, r in zip(within, rows) if r["bound"] == "data path"]
    outside = [r["ratio"] for w, r in zip(within, rows) if not w]
    return (f"within 15% in {sum(within)} of the {len(rows)} cells not fitted on, {sum(data)} of {len(data)} where "
            "the data path limits", ", ".join(f"{x:.2f}" for x in outside) + ")")


@claim
def readme_emulation_power():
    """How many same-host cells not fitted on their runs decide (the difference against the arms' own
    spread, analysis/fidelity.py against_spread), and the spreads of those they leave undecided."""
    from analysis import fidelity
    rows = same_host_predictions()
    said = [r["power"][2] for r in rows]
    undecided = [r for r in rows if r["power"][2] == fidelity.UNDECIDED]
    ns = [n for r in undecided for n in (r["reference_n"], r["ours_n"])]
    return (f"the runs decide only {len(rows) - len(undecided)} of the {len(rows)} "
            f"({said.count(fidelity.WITHIN_SPREAD)} within the arms' own spread, "
            f"{said.count(fidelity.BEYOND_SPREAD)} beyond it); the other {len(undecided)} are undecided, their arms "
            f"spreading {span([r['power'][1] * 100 for r in undecided], lambda x: f'{x:.0f}')}% at n = {span(ns, count)}")


@claim
def readme_emulation_cross_host():
    """The emulated H100 on this project's VM against the GPU steps' real runs: judged and within, by bound."""
    from analysis import fidelity
    rows = [r for r in fidelity.cross_host_rows(fidelity.gpu_step_folders(), GPU_STEP_CELLS)
            if r["ratio"] is not None and not r["use"].startswith("fitted")]
    compute = [r for r in rows if r["bound"] == "compute"]
    data = [r for r in rows if r["bound"] == "data path"]
    judged = [r for r in data if fidelity.verdict(r, 1.15) != "host CPU unknown"]
    within = sum(fidelity.verdict(r, 1.15).startswith("within") for r in compute)
    judged_within = sum(fidelity.verdict(r, 1.15).startswith("within") for r in judged)
    return (f"{within} of {len(compute)} compute-bound cells within 15%; {len(judged)} of the {len(data)} "
            f"data-path-bound cells judged so far, {judged_within} of them within 15%")


# -- docs/peers.md ------------------------------------------------------------------------------

@claim
def peers_machine():
    found = json.loads((ROOT / PEERS).read_text())
    machine = found["machine"]
    return (f"{machine['cpu_cores']}-core development VM of", f"({machine['cpu_model']}, "
            f"{machine['memory_bytes'] / 2**30:.0f} GiB, CPU probe {machine['cpu_probe']['images_per_second']:.0f} "
            f"images/s per core), n = {found['rounds']}")


PEER_ROWS = (("caffe", "lmdb", 1, "caffe lmdb"), ("dali", "lmdb", 1, "dali lmdb, 1 thread"),
             ("torch", "lmdb", 0, "torch lmdb, 0 workers"), ("torch", "lmdb", 2, "torch lmdb, 2 workers"),
             ("caffe", "images", 1, "caffe images, 1 thread"), ("dali", "images", 1, "dali images, 1 thread"),
             ("torch", "images", 0, "torch images, 0 workers"))


@claim
def peers_warm_table():
    """The warm images per CPU-second table, row by row (the best of each column in bold)."""
    best = {d: max(peer(d, *row[:3]) for row in PEER_ROWS) for d in LABELS}
    cell = lambda d, v: f"**{v:,.0f}**" if v == best[d] else f"{v:,.0f}"  # noqa: E731
    return tuple(f"| {label} | " + " | ".join(cell(d, peer(d, loader, form, t)) for d in LABELS) + " |"
                 for loader, form, t, label in PEER_ROWS)


@claim
def peers_records_beat_files():
    one = {(d, loader): lmdb_over_files(d, loader, 0 if loader == "torch" else 1) for d in LABELS
           for loader in ("caffe", "dali", "torch")}
    workers = [lmdb_over_files(d, "torch", w) for d in LABELS for w in (1, 2)]
    dali2 = [lmdb_over_files(d, "dali", 2) for d in LABELS]
    cold = [lmdb_over_files(d, loader, 1, "cold") for d in LABELS for loader in ("caffe", "dali")
            if (d, loader, "images", 1, "cold") in peers_medians()]
    return (f"{span(lmdb_over_files_warm())}x more cheaply",
            f"{span(one.values())}x with one thread or no worker (Caffe {times(one['mnist', 'caffe'])}x on MNIST, "
            f"{times(one['imagenet', 'caffe'])}x on ImageNet; DALI {times(one['mnist', 'dali'])}x / "
            f"{times(one['imagenet', 'dali'])}x; the DataLoader {times(one['mnist', 'torch'])}x / "
            f"{times(one['imagenet', 'torch'])}x)",
            f"{span(workers)}x for the DataLoader with 1-2 workers and {span(dali2[:2])}x for DALI with 2 threads "
            f"(ImageNet: {span(workers[4:])}x and {times(dali2[2])}x)",
            f"Cold, {span(cold)}x")


@claim
def peers_caffe_cheapest_lmdb():
    over_dali = [peer(d, "caffe", "lmdb", 1) / peer(d, "dali", "lmdb", 1) for d in LABELS]
    over_torch = [peer(d, "caffe", "lmdb", 1) / max(peer(d, "torch", "lmdb", w) for w in (0, 1, 2)) for d in LABELS]
    return (f"{times(over_dali[0])}x DALI's images per CPU-second on MNIST, {times(over_dali[1])}x on CIFAR-10, "
            f"{times(over_dali[2])}x on ImageNet; {span(over_torch)}x the DataLoader's best")


@claim
def peers_dataloader_workers():
    cheaper = [peer("mnist", "torch", "lmdb", 0) / peer("mnist", "torch", "lmdb", w) for w in (1, 2)]
    rate = lambda w: peer("mnist", "torch", "lmdb", w, what="images_per_s")  # noqa: E731
    return (f"workers is about {span(cheaper, lambda x: f'{x:.0f}')}x cheaper than 1 or 2",
            f"(MNIST {rate(2):,.0f} against {rate(0):,.0f})")


@claim
def peers_coalesced_warm():
    row = lambda d, form: peer(d, "caffe", form, 1, path=CAFFE_ROWS)  # noqa: E731
    dearer = {d: row(d, "lmdb") / row(d, "lmdb-coalesced") for d in LABELS}
    return (f"cost {span([dearer['mnist'], dearer['cifar10']])}x the stock path's CPU per image on small records "
            f"({times(dearer['imagenet'])}x on ImageNet)",
            f"MNIST {row('mnist', 'lmdb-coalesced'):,.0f} against {row('mnist', 'lmdb'):,.0f} images per "
            f"CPU-second, CIFAR-10 {row('cifar10', 'lmdb-coalesced'):,.0f} against {row('cifar10', 'lmdb'):,.0f}, "
            f"ImageNet {row('imagenet', 'lmdb-coalesced'):,.0f} against {row('imagenet', 'lmdb'):,.0f}",
            f"below DALI's on CIFAR-10 "
            f"({row('cifar10', 'lmdb-coalesced') / peer('cifar10', 'dali', 'lmdb', 1):.2f}x)")


@claim
def peers_decoding_pngs():
    caffe = [peer(d, "caffe", "images", 1) for d in LABELS]
    dali = [c / peer(d, "dali", "images", 1) for c, d in zip(caffe, LABELS)]
    torch = [c / peer(d, "torch", "images", 0) for c, d in zip(caffe, LABELS)]
    return (f"{span(dali[:2])}x DALI's `decoders.image` on MNIST and CIFAR-10, {times(dali[2])}x on ImageNet; "
            f"{times(torch[0])}x, {times(torch[1])}x and {times(torch[2])}x Pillow's")


@claim
def peers_more_threads():
    rate = lambda d, loader, form, t: peer(d, loader, form, t, what="images_per_s")  # noqa: E731
    caffe = {d: rate(d, "caffe", "images", 2) / rate(d, "caffe", "images", 1) for d in LABELS}
    dali = {(d, f): rate(d, "dali", f, 2) / rate(d, "dali", f, 1) for d in LABELS for f in ("lmdb", "images")}
    return (f"gives {times(caffe['mnist'])}x (MNIST, {rate('mnist', 'caffe', 'images', 2):,.0f} images/s), "
            f"{times(caffe['cifar10'])}x (CIFAR-10) and {times(caffe['imagenet'])}x (ImageNet, "
            f"{rate('imagenet', 'caffe', 'images', 2):,.0f})",
            f"ImageNet ({times(dali['imagenet', 'lmdb'])}x LMDB, {times(dali['imagenet', 'images'])}x PNG)",
            f"(MNIST LMDB {times(dali['mnist', 'lmdb'])}x)")


@claim
def peers_cold():
    rate = lambda d, loader, form, t, c: peer(d, loader, form, t, c, what="images_per_s")  # noqa: E731
    caffe_cost = [rate(d, "caffe", "images", 1, "warm") / rate(d, "caffe", "images", 1, "cold")
                  for d in ("mnist", "cifar10")]
    return (f"(Caffe MNIST {rate('mnist', 'caffe', 'lmdb', 1, 'cold'):,.0f} images/s against "
            f"{rate('mnist', 'caffe', 'lmdb', 1, 'warm'):,.0f} warm)",
            f"ImageData {times(caffe_cost[0])}x on MNIST and {times(caffe_cost[1])}x on CIFAR-10",
            f"(MNIST {rate('mnist', 'dali', 'images', 1, 'cold'):,.0f} against "
            f"{rate('mnist', 'dali', 'images', 1, 'warm'):,.0f} warm)",
            f"({rate('mnist', 'dali', 'images', 1, 'cold'):,.0f} against "
            f"{rate('mnist', 'caffe', 'images', 1, 'cold'):,.0f})",
            f"({rate('mnist', 'caffe', 'images', 2, 'cold'):,.0f})")


PEERS_CLOCK = f"{catalogue.relative('ci-2core-peers')}/clock-2026-11-26/cold.json"
LMDB_THREADS = f"{catalogue.relative('ci-2core-peers')}/lmdb-threads.json"


@claim
def peers_lmdb_threads():
    """ImageNet LMDB warm, images/s: each loader's two threads (workers) over one."""
    rate = lambda loader, t: peer("imagenet", loader, "lmdb", t, what="images_per_s", path=LMDB_THREADS)  # noqa: E731
    gain = {loader: rate(loader, 2) / rate(loader, 1) for loader in ("caffe", "dali", "torch")}
    return (f"(Caffe {gain['caffe']:.2f}x, DALI {gain['dali']:.2f}x, the\nDataLoader {gain['torch']:.2f}x over one "
            "worker)")


@claim
def peers_decode_threads_cold():
    most = max(r.cache_resident_fraction for r in had(runs(DECODE_THREADS), "cold"))
    return f"cold runs verified {most:.1%}\nresident"


@claim
def peers_warm_reads_on():
    """How long a warm peers cell reads at least (its min_seconds)."""
    cells = json.loads((ROOT / PEERS).read_text())["cells"]
    return f"a warm cell reads on for at least {max(c.get('min_seconds') or 0 for c in cells):g} s"


@claim
def peers_missed_cell():
    """A cell of the check at the clock that missed its cache state, as its record's error reads."""
    cells = json.loads((ROOT / PEERS_CLOCK).read_text())["cells"]
    return next(c["error"].split(" (")[0] for c in cells if c.get("error", "").startswith("not cold"))



@claim
def peers_cold_at_the_clock():
    """The second cold run, checked at the clock: how much of each row's data was resident there."""
    cells = json.loads((ROOT / PEERS_CLOCK).read_text())["cells"]
    at = lambda keep: [100 * c["resident_at_clock"] for c in cells if keep(c)]  # noqa: E731
    quoted = at(lambda c: (c["dataset"], c["loader"], c["form"]) in {  # the cold paragraph's rows
        ("mnist", "caffe", "lmdb"), ("mnist", "caffe", "images"), ("cifar10", "caffe", "images"),
        ("mnist", "dali", "images")})
    torch_small, torch_imagenet = (at(lambda c: (c["loader"], c["form"]) == ("torch", "lmdb") and "error" not in c
                                      and (c["dataset"] == "imagenet") == imagenet) for imagenet in (False, True))
    coalesced = at(lambda c: c["form"] == "lmdb-coalesced" and c["dataset"] != "imagenet")
    imagenet_lmdb = at(lambda c: c["form"] == "lmdb" and c["dataset"] == "imagenet" and "error" in c)
    one = lambda x: f"{x:.1f}"  # noqa: E731
    whole = lambda x: f"{x:.0f}"  # noqa: E731
    caffe = peer("mnist", "caffe", "lmdb", 1, "cold", "images_per_s", PEERS_CLOCK)
    return (f"each at most {max(quoted):.1f}% resident at its clock, and the DataLoader's LMDB rows at "
            f"{span(torch_small, one)}% (ImageNet {span(torch_imagenet, one)}%)",
            f"({span(coalesced, whole)}% resident", f"{span(imagenet_lmdb, whole)}% resident",
            f"Caffe LMDB MNIST cold {caffe:,.0f} images/s")


@claim
def peers_first_batches():
    """The first-batch check: the largest |difference| from Caffe LMDB's batch, per run and dataset."""
    def checked(path):
        found = json.loads((ROOT / path).read_text())["first_batch_max_difference"]
        return {d: max(rows.values()) for d, rows in found.items() if rows}
    clock, first = checked(PEERS_CLOCK), checked(PEERS)
    words = lambda found: " and ".join(LABELS[d] for d in LABELS if d in found)  # noqa: E731
    count = {2: "two", 3: "three"}.get(len(clock), len(clock))
    return (f"the largest difference is {max(clock.values()):g} for every row of all {count} datasets",
            f"(the second run, above; the first compared {words(first)}, {max(first.values()):g} too)")


@claim
def peers_storage_or_decoding():
    """The split of the files' gap: the 2-core VM's data path (images/s) and the 2016 machine's training."""
    rows = []
    for d in LABELS:
        rate = lambda form, c: peer(d, "caffe", form, 1, c, what="images_per_s")  # noqa: E731
        decode, storage = rate("lmdb", "warm") / rate("images", "warm"), rate("images", "warm") / rate("images", "cold")
        rows.append((d, decode, storage, decode * storage, ""))  # benchmarks/peers.py leaves out cells that missed
    for d in LABELS:
        decode = mean_wall(d, "images", "warm") / mean_wall(d, "lmdb", "warm")
        storage = mean_wall(d, "images", "cold") / mean_wall(d, "images", "warm")
        rows.append((d, decode, storage, decode * storage, labelled(state_2016(d, "warm", "images", "lmdb"))))
    return tuple(f"| {LABELS[d]} | {times(a)}x{said} | {times(b)}x{said} | {times(c)}x |" for d, a, b, c, said in rows)


@claim
def peers_imagenet_2016_storage():
    """What the 2016 machine's ImageNet image-file runs that asked for a warm cache measured: the
    state they had, the paced reads and the time those take at the profile's IOPS against the
    training's, the prefetch thread's share, and what cold added."""
    mine = paper2016_runs("imagenet", "images")
    warm, state = as_had(mine, "warm")
    riops = machines.get("paper2016").limits["riops"]
    reads = [r.limits["throttled_reads"]["read_ios"] for r in warm]
    cold_over_warm = mean_wall("imagenet", "images", "cold") / mean_wall("imagenet", "images", "warm")
    return (f"the runs asked to be warm were {state}, {percents([r.cache_resident_fraction for r in warm])} of the "
            "files resident before the clock",
            f"each made {span(reads, count)} paced reads, at least {min(reads) / riops:.0f} s at {riops} a second, "
            f"in {span([r.solver_seconds for r in warm], count)} s of training",
            f"the prefetch thread {percents([r.prefetch_share() for r in warm])} busy",
            f"cold adds only {100 * (cold_over_warm - 1):.0f}%")


@claim
def peers_lmdb_on_the_h100():
    """LMDB's mean AU on the emulated H100 (the README's table), by the cache its runs had."""
    from analysis.capacity import au_percent

    def said(dataset, cache):
        mine, state = as_had([r for r in runs(H100) if (r.dataset, r.backend) == (dataset, "lmdb")
                              and not r.concurrent and not r.read_options], cache)
        return f"{au_percent(statistics.mean(r.au for r in mine))} {state}"
    return ", ".join(f"{LABELS[d]} {said(d, 'warm')} and {said(d, 'cold')}" for d in LABELS)


@claim
def peers_decode_threads_table():
    """The decode-threads table's numbers, row by row: median AU (range), 1 and 2 threads, and 2 / 1."""
    out = []
    for d, accelerator, cache in decode_threads_rows():
        one, two = (decode_threads_au(DECODE_THREADS, d, accelerator, cache, t) for t in (1, 2))
        bold = "**" if two[0] >= 0.90 else ""
        out.append(f"| {dataset_label(d)} | {accelerator_label(accelerator)} | {cache} | "
                   f"{one[0]:.3f} ({one[1]:.3f}-{one[2]:.3f}) | {bold}{two[0]:.3f}{bold} "
                   f"({two[1]:.3f}-{two[2]:.3f}) | {two[0] / one[0]:.2f}x |")
    return tuple(out)


def dataset_label(dataset):
    """The table's dataset, with its iterations where they are not the others' (ImageNet's 150)."""
    settings = {r.dataset: r.iterations_setting for r in runs(DECODE_THREADS)}
    usual = statistics.mode(settings.values())
    return LABELS[dataset] + (f" ({settings[dataset]:,} iterations)" if settings[dataset] != usual else "")


def accelerator_label(name):
    return {"h100": "H100", "titanx2016": "Titan X (2016)"}[name]


@claim
def peers_decode_threads_h100():
    return f"nearly doubles what image files give an H100 ({span(decode_gains('h100'), lambda x: f'{x:.2f}')}x)"


@claim
def peers_decode_threads_same_work():
    """Images per data-path CPU-second of MNIST's files warm (H100), one thread and two."""
    from analysis import capacity
    rates = [capacity.images_per_core_second([r for r in runs(DECODE_THREADS) if (
        r.dataset, r.compute.get("accelerator"), r.cache_state, (r.read_options or {}).get("decode_threads", 1))
        == ("mnist", "h100", "warm", t)]) for t in (1, 2)]
    return f"(MNIST {rates[0]:,.0f} / {rates[1]:,.0f} warm)"


@claim
def peers_transform_spread():
    """The H100's AU from image files warm, decoding alone spread (patch 0015's first version) against
    the transform spread too (patch 0015 as it is now)."""
    parts = []
    for d in LABELS:
        before = decode_threads_au(DECODE_THREADS_0021, d, "h100", "warm", 2)[0]
        after = decode_threads_au(DECODE_THREADS, d, "h100", "warm", 2)[0]
        parts.append(f"{before:.3f}" + (" (decoding alone spread, [results.md](results.md))" if d == "mnist"
                                        else "") + f" to {after:.3f}")
    return tuple(parts)


@claim
def peers_two_cores_arithmetic():
    """The median MNIST warm run on 2 threads (H100): the data path's cores while the solver ran."""
    from experiments import proctrack
    mine = sorted((r for r in runs(DECODE_THREADS) if (r.dataset, r.compute.get("accelerator"), r.cache_state,
                   (r.read_options or {}).get("decode_threads")) == ("mnist", "h100", "warm", 2)), key=lambda r: r.au)
    median = mine[len(mine) // 2]
    threads = median.process["thread_cpu_seconds"]
    data_path = sum(s for name, s in threads.items() if name in (proctrack.PREFETCH, *proctrack.READERS))
    cores = data_path / median.solver_seconds
    images = median.iterations * batch("mnist")
    return (f"(AU {median.au:.3f}, run {median.run_id})", f"used {cores:.2f} of the 2 cores",
            f"({data_path:.2f} CPU-seconds in {median.solver_seconds:.2f} s; {images / data_path:,.0f} images per "
            f"CPU-second)", f"0.90 / {median.au:.3f} x {cores:.2f} = {0.90 / median.au * cores:.2f} cores")


# -- docs/results.md ----------------------------------------------------------------------------

H100_BEFORE = catalogue.relative("ci-2core-emulated-h100")  # the matrices before the calibration (the Intel Xeon VM)


def h100_runs(dataset, backend, cache, folder=H100):
    return had([r for r in runs(folder) if (r.dataset, r.backend) == (dataset, backend)
                and not r.concurrent and not r.read_options], cache)


def mean_sd(values):
    return f"{statistics.mean(values):.2f} +- {statistics.stdev(values):.2f}"


def h100_cell(dataset, backend, cache, sep=" | ", folder=H100):
    """'mean +- sd | AU' of a cell of the emulated H100's matrix (wall seconds, mean AU)."""
    mine = h100_runs(dataset, backend, cache, folder)
    return f"{mean_sd([r.wall_seconds for r in mine])}{sep}{statistics.mean(r.au for r in mine):.0%}"


def present(folder_runs, dataset):
    from data_prep import backends
    return [b for b in backends.REGISTRY if any(r.dataset == dataset and r.backend == b for r in folder_runs)]


@claim
def results_h100_matrix():
    """The MNIST and CIFAR-10 matrix of the calibrated emulated H100, row by row."""
    return tuple(f"{h100_cell(d, b, 'warm')} | {h100_cell(d, b, 'cold')} |"
                 for d in ("mnist", "cifar10") for b in present(runs(H100), d))


# The cells of the 2016 machine's MNIST and CIFAR-10 tables that show their AU (ImageNet's: every one, to a tenth)
AU_SHOWN = {("lmdb", "warm"), ("hdf5", "warm"), ("images", "warm"), ("images", "cold")}


def paper2016_cells(dataset):
    """Each cell's mean and (range) of wall seconds on the emulated 2016 machine, row by row, with the
    AU (range) where the table shows it; MNIST's HDF5 row ends with the paper's ratio to cppmem."""
    tenth = lambda x: f"{x:.1f}".removesuffix(".0")  # noqa: E731
    out = []
    for b in present(runs(PAPER2016), dataset):
        for cache in ("warm", "cold"):
            mine = had(paper2016_runs(dataset, b), cache)
            wall = [r.wall_seconds for r in mine]
            out += [f"{statistics.mean(wall):.1f}", f"({min(wall):.1f}-{max(wall):.1f}"]
            if dataset == "imagenet":
                out.append(f"AU {span([100 * r.au for r in mine], tenth)}%")
            elif (b, cache) in AU_SHOWN:
                out.append(f"AU {percents([r.au for r in mine])}")
        if (dataset, b) == ("mnist", "hdf5"):
            out.append(f"({paper_ratio('mnist-hdf5'):.2f}x cppmem)")
    return tuple(out)


@claim
def results_h100_says():
    """What the calibrated emulated H100's matrix says: HDF5 against LMDB here and on the real H100,
    the image files' and Redis's AU (Redis against the matrix before the calibration)."""
    au = lambda d, b, folder=H100: statistics.mean(r.au for r in h100_runs(d, b, "warm", folder))  # noqa: E731
    wall = lambda d, b: statistics.mean(r.wall_seconds for r in h100_runs(d, b, "warm"))  # noqa: E731
    real = {r.backend: r.solver_seconds for r in had(runs(catalogue.relative("h100")), "warm") if r.dataset == "mnist"}
    return (f"hold the H100 at {au('mnist', 'hdf5'):.0%}, {wall('mnist', 'hdf5') / wall('mnist', 'lmdb'):.1f}x LMDB's "
            f"time, as on the real H100 ({real['hdf5']:.1f} s against {real['lmdb']:.1f} s solver time)",
            f"(AU {au('mnist', 'images'):.0%})", f"(AU {au('mnist', 'images', H100_BEFORE):.0%})",
            f"(MNIST AU {au('mnist', 'redis'):.0%} against {au('mnist', 'redis', H100_BEFORE):.0%})",
            f"its reader's CPU per record is {span(redis_reader_cost())}x\nLMDB's")


def redis_reader_cost():
    """MNIST and CIFAR-10 warm on the calibrated emulated H100: the prefetch thread's CPU per image from
    Redis over that from LMDB."""
    from experiments import data_path_cpu
    def rate(dataset, backend):
        return data_path_cpu.images_per_core_second(h100_runs(dataset, backend, "warm"), data_path_cpu.prefetch_cpu)
    return [rate(d, "lmdb") / rate(d, "redis") for d in ("mnist", "cifar10")]


@claim
def results_h100_cold_verified():
    """The most of its data a cold run of a local backend had resident at its clock (the calibrated H100's matrix)."""
    most = max(r.cache_resident_fraction for r in had(runs(H100), "cold") if (r.location or {}).get("kind") == "local")
    return f"verified cold ({most:.1%} resident"


@claim
def results_imagenet_h100_says():
    """ImageNet on the emulated H100: files over LMDB before the calibration; as calibrated, the
    prefetch thread's CPU in the image-file runs, Redis's AU, and what the cold LMDB runs read."""
    files = [r for c in ("warm", "cold") for r in h100_runs("imagenet", "images", c)]
    cpu = [r.process["thread_cpu_seconds"]["data prefetch"] for r in files]
    redis = {c: statistics.mean(r.au for r in h100_runs("imagenet", "redis", c)) for c in ("warm", "cold")}
    lmdb = h100_runs("imagenet", "lmdb", "cold")
    gib = [r.monitor["read_bytes_total"] / 2**30 for r in lmdb]
    whole, one = (lambda x: f"{x:.0f}"), (lambda x: f"{x:.1f}")  # noqa: E731
    before = [statistics.mean(r.wall_seconds for r in h100_runs("imagenet", b, "warm", H100_BEFORE))
              for b in ("images", "lmdb")]
    seconds = [r.wall_seconds for r in files]
    return (f"{before[0] / before[1]:.1f}x before the calibration",
            f"({span(cpu, whole)} CPU-s of the prefetch thread in a {span(seconds, whole)} s "
            "run)", f"keeps the H100 at {redis['warm']:.0%} warm and {redis['cold']:.0%} cold",
            f"read {span(gib, one)} GiB from the disk for a {lmdb[0].train_footprint['allocated_bytes'] / 2**30:.1f} "
            "GiB database")


@claim
def results_paper2016_mnist():
    return paper2016_cells("mnist")


@claim
def results_paper2016_cifar10():
    return paper2016_cells("cifar10")


def imagenet_table_runs():
    """The ImageNet table's runs of local data: the emulated H100 before and after the calibration,
    the 2016 machine at 188 and 287 IOPS."""
    return [r for folder in (PAPER2016, H100, H100_BEFORE) for r in runs(folder)
            if r.dataset == "imagenet" and (r.location or {}).get("kind") == "local"
            and (r.limits or {}).get("riops") in (None, 188, 287)]


@claim
def results_imagenet_memory():
    """ImageNet in a 1 GiB cgroup: the training's anonymous memory, what it left to the page cache,
    the data over that, and how much of it a warm run found resident (every ImageNet table's runs)."""
    shown = imagenet_table_runs()
    calibrated = [r for r in shown if r in runs(PAPER2016) or r in runs(H100)]
    gib = lambda values: span([v / 2**30 for v in values], lambda x: f"{x:.2f}")  # noqa: E731
    over = {b: span([r.data_over_cache_room() for r in calibrated if r.backend in b], lambda x: f"{x:.1f}")
            for b in (("images",), ("lmdb", "leveldb"))}
    resident = percents([r.cache_resident_fraction for r in asked_for(shown, "warm")])
    return (f"holds {gib([r.process['peak_anon_bytes'] for r in calibrated])} GiB of anonymous memory",
            f"so {gib([r.cache_room_bytes() for r in calibrated])} GiB is left for the page cache: the PNG files are "
            f"{over[('images',)]}x that, the LMDB and LevelDB {over[('lmdb', 'leveldb')]}x",
            f"({resident}, measured per run)")


@claim
def results_imagenet_table():
    """ImageNet: the calibrated emulated H100's rows, then the calibrated 2016 machine's."""
    h100 = [h100_cell("imagenet", b, c, sep=" s, AU ", folder=folder) for folder in (H100, H100_BEFORE)
            for b in present(runs(folder), "imagenet") for c in ("warm", "cold")]
    earlier = [r for r in runs(PAPER2016) if r.dataset == "imagenet" and r.limits.get("riops") == 287]
    at_287 = [f"{r.wall_seconds:.1f} s, AU {r.au:.0%}" for b in present(earlier, "imagenet") for c in ("warm", "cold")
              for r in had([r for r in earlier if r.backend == b], c)]
    resident = percents([r.cache_resident_fraction for r in asked_for(imagenet_table_runs(), "warm")])
    state = as_had(imagenet_table_runs(), "warm")[1]
    return (f"{state} ({resident} resident)", *h100, *paper2016_cells("imagenet"), *at_287)


@claim
def results_before_calibration():
    """The MNIST and CIFAR-10 matrices before the calibration: mean wall seconds and AU."""
    wall = lambda d, b, c: statistics.mean(r.wall_seconds for r in h100_runs(d, b, c, H100_BEFORE))  # noqa: E731
    au = lambda d, b: statistics.mean(r.au for r in h100_runs(d, b, "warm", H100_BEFORE))  # noqa: E731
    ms = {d: r.compute["ms_per_iteration"] for r in runs(H100_BEFORE) for d in [r.dataset]}
    return (f"{ms['mnist']:g} / {ms['cifar10']:g} ms",
            f"LMDB at {wall('mnist', 'lmdb', 'warm'):.2f} s (MNIST) and {wall('cifar10', 'lmdb', 'warm'):.2f} s "
            f"(CIFAR-10), HDF5 at {wall('mnist', 'hdf5', 'warm'):.2f} and {wall('cifar10', 'hdf5', 'warm'):.2f} "
            f"(AU {au('mnist', 'hdf5'):.0%} and {au('cifar10', 'hdf5'):.0%}), image files at "
            f"{wall('mnist', 'images', 'warm'):.2f} / {wall('mnist', 'images', 'cold'):.2f} s (MNIST warm / cold) and "
            f"{wall('cifar10', 'images', 'warm'):.2f} / {wall('cifar10', 'images', 'cold'):.2f} s (CIFAR-10)")


@claim
def results_imagenet_headline():
    """ImageNet's files over its LMDB on the calibrated 2016 machine and on the emulated H100."""
    files = {c: mean_wall("imagenet", "images", c) for c in ("warm", "cold")}
    lmdb = {c: mean_wall("imagenet", "lmdb", c) for c in ("warm", "cold")}
    paper = paper_ratio("imagenet-kv")
    h100_state = {c: state_of([r for b in ("images", "lmdb") for r in h100_runs("imagenet", b, c)], c)
                  for c in ("warm", "cold")}
    h100 = {c: (statistics.mean(r.wall_seconds for r in h100_runs("imagenet", "images", c)),
                statistics.mean(r.wall_seconds for r in h100_runs("imagenet", "lmdb", c))) for c in ("warm", "cold")}
    files_runs = paper2016_runs("imagenet", "images")
    reads = {c: statistics.mean(r.limits["throttled_reads"]["read_ios"] for r in had(files_runs, c)) for c in ("warm", "cold")}
    images = statistics.mean(r.iterations_setting for r in paper2016_runs("imagenet", "images")) * batch("imagenet")
    resident = max(r.cache_resident_fraction for r in asked_for(paper2016_runs("imagenet", "images"), "warm"))

    def headline(folder, riops):  # files over LMDB, cold and warm, at an earlier disk; and the stores' AU
        mine = [r for r in runs(folder) if r.dataset == "imagenet" and r.limits.get("riops") == riops]
        def wall(backend, cache):
            return statistics.mean(r.wall_seconds for r in had([r for r in mine if r.backend == backend], cache))
        stores = [r.au for r in mine if r.backend in ("lmdb", "leveldb")]
        return [wall("images", c) / wall("lmdb", c) for c in ("cold", "warm")], stores, state_of(
            [r for r in mine if r.backend in ("images", "lmdb")], "warm")
    at_287, _, _ = headline(PAPER2016, 287)
    at_150, stores_150, state_150 = headline(catalogue.relative("ci-2core-paper2016"), 150)
    return (f">= {paper:.0f}x slower than the key-value stores",
            f"{files['cold'] / lmdb['cold']:.1f}x cold ({files['cold']:.1f} / {lmdb['cold']:.1f} s) and "
            f"{files['warm'] / lmdb['warm']:.1f}x {state_2016('imagenet', 'warm', 'images', 'lmdb')} "
            f"({files['warm']:.1f} / {lmdb['warm']:.1f} s)",
            f"{min(files[c] / lmdb[c] for c in files) / paper:.2f}x the paper's figure",
            f"it was {at_287[0]:.1f}x / {at_287[1]:.1f}x",
            f"~{thousands(reads['cold'])} throttled reads cold and ~{thousands(reads['warm'])} "
            f"{state_2016('imagenet', 'warm', 'images')}",
            f"{images:,.0f} images: {reads['cold'] / images:.1f} and {reads['warm'] / images:.1f} per image",
            f"({resident:.0%} of the files resident at the start)",
            f"it was {at_150[0]:.1f}x cold and {at_150[1]:.1f}x {state_150}",
            f"is {percents(stores_150, 1)} for LMDB and LevelDB",
            f"{h100['warm'][0] / h100['warm'][1]:.1f}x {h100_state['warm']} ({h100['warm'][0]:.2f} / {h100['warm'][1]:.2f} s) and "
            f"{h100['cold'][0] / h100['cold'][1]:.1f}x cold")


@claim
def results_paper2016_findings():
    """The 2016 machine's findings against the paper's stated seconds (MNIST and CIFAR-10)."""
    from analysis.answer import paper_seconds
    paper = paper_seconds()
    ours = lambda d, b, c: mean_wall(d, b, c)  # noqa: E731
    cold_reads = {d: statistics.mean(r.limits["throttled_reads"]["read_ios"]
                                     for r in had(paper2016_runs(d, "images"), "cold")) for d in ("mnist", "cifar10")}
    files = {d: paper2016_runs(d, "images")[0].artifact_footprint["files"] for d in ("mnist", "cifar10")}
    per_file = {d: cold_reads[d] / files[d] for d in files}
    ratio = lambda mine, theirs: f"{mine:.2f}x ({theirs:.2f}x)"  # noqa: E731
    files_over_leveldb = ours("cifar10", "images", "cold") / ours("cifar10", "leveldb", "cold")
    paper_over_leveldb = paper_ratio("cifar-cold-images")
    # a file read cold on the paper's disk: its cold seconds less its fastest backend's, per file
    fastest = {d: min(v for (dd, _, _), v in paper.items() if dd == d) for d in ("mnist", "cifar10")}
    per_paper_file = {d: (paper[d, "images", "cold"] - round(fastest[d])) / files[d] for d in files}
    return (f"cold / warm image files is {ours('mnist', 'images', 'cold') / ours('mnist', 'images', 'warm'):.1f}x "
            f"(paper ~{paper_ratio('mnist-cold-images'):.0f}x",
            f"reproduced at {ours('mnist', 'images', 'cold') / paper['mnist', 'images', 'cold']:.2f}x",
            f"take {ours('cifar10', 'images', 'cold'):.1f} s against {paper['cifar10', 'images', 'cold']} "
            f"({ours('cifar10', 'images', 'cold') / paper['cifar10', 'images', 'cold']:.2f}x",
            f"cold files / cold LevelDB {files_over_leveldb:.1f}x against {paper_over_leveldb:.1f}x "
            f"({files_over_leveldb / paper_over_leveldb:.2f}x)",
            f"make {span(per_file.values(), lambda x: f'{x:.2f}')} reads per PNG for both data sets "
            f"({round(cold_reads['cifar10'], -2):,.0f} for CIFAR-10's {files['cifar10']:,} files, "
            f"{round(cold_reads['mnist'], -2):,.0f} for MNIST's {files['mnist']:,})",
            f"about {per_paper_file['cifar10'] / per_paper_file['mnist']:.2f}x an\nMNIST one "
            f"(({paper['cifar10', 'images', 'cold']} - "
            f"{fastest['cifar10']:.0f}) / {files['cifar10']:,} against ({paper['mnist', 'images', 'cold']} - "
            f"{fastest['mnist']:.0f}) / {files['mnist']:,} s",
            f"/ LMDB is {ours('cifar10', 'images', 'warm') / ours('cifar10', 'lmdb', 'warm'):.2f}x "
            f"(paper {paper_ratio('cifar-warm-images'):.1f}x)",
            "HDF5 / LevelDB warm " + ratio(ours("cifar10", "hdf5", "warm") / ours("cifar10", "leveldb", "warm"),
                                           paper["cifar10", "hdf5", "warm"] / paper["cifar10", "leveldb", "warm"]),
            "HDF5 cold / warm " + ratio(ours("cifar10", "hdf5", "cold") / ours("cifar10", "hdf5", "warm"),
                                        paper["cifar10", "hdf5", "cold"] / paper["cifar10", "hdf5", "warm"]),
            "LevelDB cold / warm " + ratio(ours("cifar10", "leveldb", "cold") / ours("cifar10", "leveldb", "warm"),
                                           paper["cifar10", "leveldb", "cold"] / paper["cifar10", "leveldb", "warm"]),
            f"cppmem cold - warm {ours('cifar10', 'cppmem', 'cold') - ours('cifar10', 'cppmem', 'warm'):.1f} s")


def decode_threads_0021_rows(cache):
    """The rows of benchmarks/decode_threads.py's table of the runs with decoding alone spread (MNIST and CIFAR-10)."""
    from argparse import Namespace
    from analysis import decode_threads
    a = Namespace(backend="images", cache=cache, accelerator="h100", iters=2000, out=ROOT / DECODE_THREADS_0021)
    return tuple(decode_threads.table(a, ["mnist", "cifar10"], [1, 2]).splitlines()[4:])


@claim
def results_decode_threads_warm():
    return decode_threads_0021_rows("warm")


@claim
def results_decode_threads_cold():
    return decode_threads_0021_rows("cold")


@claim
def results_decode_threads_imagenet():
    from analysis import capacity
    mine = [r for r in runs(DECODE_THREADS_0021) if r.dataset == "imagenet"]
    one, two = (decode_threads_au(DECODE_THREADS_0021, "imagenet", "h100", "warm", t) for t in (1, 2))
    rates = [capacity.images_per_core_second([r for r in mine if (r.read_options or {}).get("decode_threads", 1) == t])
             for t in (1, 2)]
    return (f"{mine[0].iterations_setting} iterations, n = {len(mine) // 2}",
            f"AU {one[0]:.3f} ({one[1]:.3f}-{one[2]:.3f}) with one decoding thread, {two[0]:.3f} "
            f"({two[1]:.3f}-{two[2]:.3f}) with two, {two[0] / one[0]:.2f}x; {rates[0]:,.0f} and {rates[1]:,.0f} images "
            "per data-path CPU second")


@claim
def results_decode_threads_says():
    """What the runs with decoding alone spread say: the second thread's gain, cold's share of warm's AU,
    the prefetch thread."""
    keys = [(d, c) for d in LABELS for c in ("warm", "cold")
            if any((r.dataset, r.cache_state) == (d, c) for r in runs(DECODE_THREADS_0021))]
    au = {(d, c, t): decode_threads_au(DECODE_THREADS_0021, d, "h100", c, t)[0] for d, c in keys for t in (1, 2)}
    gains = [au[d, c, 2] / au[d, c, 1] for d, c in keys]
    cold = [au[d, "cold", t] / au[d, "warm", t] for d, c in keys if c == "cold" for t in (1, 2)]
    two = [r.prefetch_share() for r in runs(DECODE_THREADS_0021) if (r.read_options or {}).get("decode_threads") == 2
           and r.cache_state == "warm"]
    return (f"raises the AU {span(gains)}x, warm and cold, on all three datasets",
            f"(cold keeps {span(cold, lambda x: f'{x:.2f}')}x of warm's AU either way)",
            f"(busy {percents(two)} of the solver's time, warm, two threads)")


@claim
def results_footprints():
    """Our train splits' footprint beside the paper's Table 2: apparent MiB, allocated MiB, files."""
    from data_prep import backends
    seen = {(r.dataset, r.backend): r.train_footprint or r.artifact_footprint for r in runs(PAPER2016)}
    return tuple(f"| {fp['apparent_bytes'] / 2**20:,.1f} | {fp['allocated_bytes'] / 2**20:,.1f} | {fp['files']:,} |"
                 for d in LABELS for b in backends.REGISTRY if (fp := seen.get((d, b))))


def real_h100_cells(folder, dataset, backend):
    """'| warm | cold |' wall seconds of one run per cell on the real H100 (blank where not run)."""
    mine = [r for r in runs(folder) if (r.dataset, r.backend) == (dataset, backend)]
    wall = {c: f"{r.wall_seconds:.1f}{labelled(state)}" for c in ("warm", "cold") for state in [as_had(mine, c)[1]]
            for r in as_had(mine, c)[0]}
    return f"| {wall.get('warm', '')} | {wall.get('cold', 'not run')}".replace("|  |", "| |")


@claim
def results_real_h100():
    """The real H100's table, row by row: no limits, then the 2016 profile (150 IOPS), then 1,000 IOPS."""
    from data_prep import backends
    folders = (catalogue.relative("h100"), catalogue.relative("h100-paper2016"), catalogue.relative("h100-paper2016-riops1000"))
    rows = []
    for folder in folders:
        for d in LABELS:
            for b in backends.REGISTRY:
                if any((r.dataset, r.backend) == (d, b) for r in runs(folder)):
                    rows.append(real_h100_cells(folder, d, b))
                    if (folder, d, b) == (folders[0], "mnist", "hdf5"):
                        rows.append(f"({paper_ratio('mnist-hdf5'):.2f}x cppmem)")
    return tuple(rows)


@claim
def results_real_h100_cold():
    most = max(r.cache_resident_fraction for r in had(runs(catalogue.relative("h100")), "cold"))
    return f"({most:.0%} of\nthe artifact resident"


@claim
def results_real_h100_says():
    """The real H100's runs (one per cell): MNIST's files cold against warm, at 1,000 IOPS against
    LMDB, and CIFAR-10's files against LMDB warm."""
    def wall(folder, *cell):  # the one run of (dataset, backend, cache)
        dataset, backend, cache = cell
        return next(r.wall_seconds for r in had(runs(folder), cache) if (r.dataset, r.backend) == (dataset, backend))
    files = [wall(catalogue.relative("h100"), "mnist", "images", c) for c in ("cold", "warm")]
    slow = [wall(catalogue.relative("h100-paper2016-riops1000"), "mnist", b, "cold") for b in ("images", "lmdb")]
    cifar = [wall(catalogue.relative("h100"), "cifar10", b, "warm") for b in ("images", "lmdb")]
    real = catalogue.relative("h100")
    over_lmdb = [wall(real, "mnist", b, "warm") / wall(real, "mnist", "lmdb", "warm") for b in ("images", "hdf5")]
    from experiments import accelerators
    profiles = accelerators.profiles()
    faster = [profiles["titanx2016"][net]["train_ms"] / profiles["h100"][net]["train_ms"]
              for net in ("lenet", "cifar10_quick", "caffenet")]
    return (f"(image files {files[0]:.0f} s cold vs {files[1]:.0f} s warm)",
            f"({slow[0]:.0f} s vs {slow[1]:.0f} s for LMDB at 1,000 IOPS, {slow[0] / slow[1]:.1f}x",
            f"cost {span(over_lmdb)}x over LMDB (MNIST)", f"takes {span(faster)}x less time per training iteration",
            f"({cifar[0]:.0f} s against {cifar[1]:.0f} s from LMDB)")


@claim
def results_png_decoding():
    """The data path's CPU per MNIST PNG in the calibrated H100 matrix (image files warm)."""
    from analysis import fidelity
    us = fidelity.prefetch_us_per_image(H100, "mnist", "images", "warm")[0]
    return f"PNG decoding {us:.0f} us per MNIST image"


@claim
def results_earlier_steps():
    """The 2016 profile's runs at the fit's step before (287 IOPS): CIFAR-10's files cold, cppmem cold - warm."""
    mine = [r for r in runs(PAPER2016) if r.dataset == "cifar10" and r.limits.get("riops") == 287]
    at = {(r.backend, c): r.wall_seconds for c in ("warm", "cold") for r in had(mine, c)}
    return (f"CIFAR-10 image files cold {at['images', 'cold']:.1f} s and cppmem's gap "
            f"{at['cppmem', 'cold'] - at['cppmem', 'warm']:.1f} s")


@claim
def results_decode_threads_host():
    """The decode-threads runs with decoding alone spread (patch 0021 of the earlier series): their host's
    CPU probe and the cold runs' residency."""
    from monitor import cpu_probe
    mine = runs(DECODE_THREADS_0021)
    cold = [r.cache_resident_fraction for r in asked_for(mine, "cold")]
    return (f"CPU probe {span([cpu_probe.rate(r.environment) for r in mine], lambda x: f'{x:.0f}')} images/s per core",
            f"cold runs verified {100 * max(cold):.1f}% resident")


@claim
def results_gpu_time():
    """The real H100's compute ceiling, `caffe time` on constant data (benchmarks/gpu_time.py)."""
    nets = json.loads((ROOT / f"{catalogue.relative('h100')}/benchmarks/gpu_time.json").read_text())["nets"]
    ms = {d: nets[d]["ms_per_iteration"] for d in nets}
    return (f"LeNet {ms['mnist']:.2f} ms, cifar10_quick {ms['cifar10']:.2f} ms, CaffeNet {ms['imagenet']:.1f} ms per "
            f"iteration (CaffeNet's {nets['imagenet']['stock_iterations']:,} iterations: "
            f"{nets['imagenet']['stock_seconds']:.0f} s)")


# -- docs/lmdb.md -------------------------------------------------------------------------------

LMDB_SHARED = catalogue.relative("ci-2core-lmdb-shared")


@claim
def lmdb_shared_data_path():
    """The three read paths with N solvers, data path alone (analysis/lmdb_shared.py's rows)."""
    from analysis import lmdb_shared
    return tuple(row for name in ("unlimited.json", "imagenet-mem2500M-ra128.json")
                 for row in lmdb_shared.benchmark_rows(ROOT / LMDB_SHARED / name))


@claim
def lmdb_shared_data_limits():
    """The data and limits of the data-path table's rows, under it (analysis/lmdb_shared.py's caption)."""
    from analysis import lmdb_shared
    return (lmdb_shared.benchmark_caption(ROOT / LMDB_SHARED / name
                                          for name in ("unlimited.json", "imagenet-mem2500M-ra128.json")),)


@claim
def lmdb_shared_training():
    """The three read paths in training, group AU per N and cache (analysis/lmdb_shared.py's rows)."""
    from analysis import lmdb_shared
    return tuple(lmdb_shared.training_rows(ROOT / LMDB_SHARED / "training-2")[2:])


@claim
def lmdb_shared_imagenet_2016():
    """ImageNet cold on the emulated 2016 machine: group AU per N, coalesced and shared."""
    from analysis import lmdb_shared
    out = []
    for row in lmdb_shared.training_rows(ROOT / LMDB_SHARED / "imagenet-2016")[2:]:
        n, _, _, *paths = [c.strip() for c in row.strip("|").split("|")]  # N, cache, mmap (none), coalesced, shared
        out.append(f"| {n} |")
        for cell in paths:  # "0.926 (0.922-0.969, n = 3)": the page leaves n to its caption
            median, rest = cell.split(" ", 1)
            out += [median, rest.split(", n = ")[0] + ")"]
    return tuple(out)

def lmdb_shared_cells():
    """{(table, dataset, N, path): (device bytes / data, CPU-ms per 1,000 records, records/s)} as
    analysis/lmdb_shared.py's rows show them; table "limited" is ImageNet in 2.44 GiB."""
    from analysis import lmdb_shared
    out = {}
    for table, name in (("unlimited", "unlimited.json"), ("limited", "imagenet-mem2500M-ra128.json")):
        for row in lmdb_shared.benchmark_rows(ROOT / LMDB_SHARED / name):
            data, n, *columns = [c.strip() for c in row.strip("|").split("|")]
            values = [[float(v.replace(",", "")) for v in column.split(", ")] for column in columns]
            for i, path in enumerate(lmdb_shared.PATHS):
                out[table, data.split(" ")[0], int(n), path] = tuple(v[i] for v in values)
    return out


@claim
def lmdb_shared_says():
    c = lmdb_shared_cells()
    tables = (("unlimited", "cifar10"), ("unlimited", "imagenet"), ("limited", "imagenet"))
    def ratio(t, d, path, i, n=16, m=1, other=None):  # column i of (t, d, n, path) over that of (t, d, m, other)
        return c[t, d, n, path][i] / c[t, d, m, other or path][i]
    shared_bytes = [ratio(t, d, "shared", 0) for t, d in tables]
    shared_cpu = [ratio(t, d, "shared", 1) for t, d in tables]
    coalesced_cpu = [ratio(t, d, "coalesced", 1, n, n, "shared") for t, d in tables for n in (4, 16)]
    return (f"at N = 16 the group reads {span(shared_bytes, lambda x: f'{x:.2f}')}x of what one solver reads "
            "(CIFAR-10, ImageNet, and ImageNet in 2.44 GiB), and spends "
            + ", ".join(f"{x:.2f}x" for x in shared_cpu[:2]) + f" and {shared_cpu[2]:.2f}x",
            f"reads ImageNet **{c['limited', 'imagenet', 16, 'coalesced'][0]:.1f}x**",
            f"costs {span(coalesced_cpu, lambda x: f'{x:.2f}' if x < 1.195 else f'{x:.1f}')}x SHARED's CPU",
            f"({span([c[t, d, 16, 'mmap'][0] / c[t, d, 1, 'mmap'][0] for t, d in tables], lambda x: f'{x:.2f}')}x "
            "at N = 16, even in 2.44 GiB)",
            f"{c['unlimited', 'cifar10', 16, 'mmap'][1]} CPU-ms per 1,000 against SHARED's "
            f"{c['unlimited', 'cifar10', 16, 'shared'][1]} at N = 16",
            f"({c['limited', 'imagenet', 16, 'shared'][2]:,.0f} against {c['limited', 'imagenet', 16, 'mmap'][2]:,.0f} "
            f"records/s; CPU {ratio('limited', 'imagenet', 'shared', 1, 16, 16, 'mmap'):.2f}x)")


@claim
def lmdb_shared_training_says():
    """The training table's medians at 8 and 12 solvers, warm and cold together."""
    from analysis import lmdb_shared
    medians = {}
    for row in lmdb_shared.training_rows(ROOT / LMDB_SHARED / "training-2")[2:]:
        n, _, *cells = [c.strip() for c in row.strip("|").split("|")]
        for path, cell in zip(lmdb_shared.PATHS, cells):
            medians.setdefault((int(n), path), []).append(float(cell.split(" ")[0]))
    au = lambda n, path: span(medians[n, path], lambda x: f"{x:.2f}")  # noqa: E731
    return (f"at 8 solvers it holds AU {au(8, 'shared')} where the coalesced path's eight walkers leave "
            f"{au(8, 'coalesced')} and the stock cursor {au(8, 'mmap')}; at 12, {au(12, 'shared')} against "
            f"{au(12, 'coalesced')} and {au(12, 'mmap')}")


LMDBIO = catalogue.relative("ci-2core-paper2016-lmdbio")


def seconds_text(x):
    return f"{x:.2f}" if x < 100 else f"{x:.1f}"


def lmdbio_runs(backend, read, cache, memory_gib, solvers=None):
    return [r for r in had(runs(LMDBIO), cache) if (r.backend, (r.read_options or {}).get("lmdb_read")) ==
            (backend, read) and r.limits["mem_bytes"] == memory_gib * 2**30
            and (r.concurrent or {}).get("solvers") == solvers]


@claim
def lmdb_lmdbio_memory():
    """LMDBIO's coalesced path against Caffe's mmap, 128 KB readahead, the 2016 machine emulated in 1.5 GiB."""
    out = []
    for read in ("coalesced", "mmap"):
        warm, cold = (lmdbio_runs("lmdb", read, c, 1.5)[0] for c in ("warm", "cold"))
        said = f", {warm.cache_state}" if warm.cache_state != "warm" else ""
        out += [f"{seconds_text(warm.solver_seconds)} ({warm.au:.1%}{said}) | {seconds_text(cold.solver_seconds)} "
                f"({cold.au:.1%})", f"{cold.solver_seconds / warm.solver_seconds:.3f}"]
    return tuple(out)


@claim
def lmdb_lmdbio_one_pass():
    """One solver against four on one cold pass in 6 GiB: each one's solver seconds, AU, bytes read."""
    out = []
    for backend, read in (("lmdb", "coalesced"), ("lmdb", "mmap"), ("images", None)):
        one, four = lmdbio_runs(backend, read, "cold", 6)[0], lmdbio_runs(backend, read, "cold", 6, solvers=4)
        seconds = [r.solver_seconds for r in four]
        out += [f"{seconds_text(one.solver_seconds)} ({one.au:.1%}) | {span(seconds, seconds_text)} "
                f"({percents([r.au for r in four], 1)}) | ",
                f"{max(seconds) / one.solver_seconds:.2f}",
                f"{four[0].concurrent['device_read_bytes'] / one.monitor['read_bytes_total']:.2f} |"]
    return tuple(out)


@claim
def lmdb_lmdbio_four():
    """Four solvers on one cold pass in 6 GiB against one: the device bytes, the time, the host's idle share."""
    grow, longer, idle = {}, {}, []
    for read in ("mmap", "coalesced"):
        one, four = lmdbio_runs("lmdb", read, "cold", 6)[0], lmdbio_runs("lmdb", read, "cold", 6, solvers=4)
        grow[read] = four[0].concurrent["device_read_bytes"] / one.monitor["read_bytes_total"] - 1
        longer[read] = max(r.solver_seconds for r in four) / one.solver_seconds
        idle += [r.monitor["cpu_idle_mean"] / 100 for r in four]
    return (f"(device bytes grow by {percents(grow.values())})", f"take {longer['mmap']:.2f}x as long",
            f"{longer['coalesced']:.2f}x", f"({percents(idle)} idle)")


@claim
def lmdb_lmdbio_stock_au():
    return f"at {percents([lmdbio_runs('lmdb', 'mmap', c, 1.5)[0].au for c in ('warm', 'cold')])} AU"


@claim
def lmdb_shared_stagger():
    """The seconds apart the staggered solvers started (benchmarks/lmdb_shared.py --stagger, as recorded)."""
    def apart(name):
        command = json.loads((ROOT / LMDB_SHARED / name).read_text())["command"]
        return float(command[command.index("--stagger") + 1])
    return (f"started {apart('imagenet-mem2500M-ra128-stagger1-2passes.json'):g} s apart",
            f"Started {apart('imagenet-mem2500M-ra128-stagger2.json'):g} s")


@claim
def lmdb_shared_imagenet_2016_room():
    """The 2016 machine's ImageNet runs of the shared reader: the data over what the memory left to the page cache."""
    rs = [r for r in runs(f"{LMDB_SHARED}/imagenet-2016") if r.data_over_cache_room()]
    return f"is {span([r.data_over_cache_room() for r in rs])}x what is left for the page cache"


@claim
def lmdb_lmdbio_says():
    mmap = [lmdbio_runs("lmdb", "mmap", c, 1.5)[0].au for c in ("warm", "cold")]
    coalesced = [lmdbio_runs("lmdb", "coalesced", c, 1.5)[0].au for c in ("warm", "cold")]
    return (f"feeds the emulated Titan X at {percents(mmap)} AU", f"the coalesced path at {percents(coalesced)}")


# -- docs/redis.md ------------------------------------------------------------------------------

REDIS_LEAN = catalogue.relative("ci-2core-emulated-h100-redis-lean")
REDIS_IO_THREAD = catalogue.relative("ci-2core-emulated-h100-redis-iothread")


def warm_cell(folder, dataset, backend, depth=None, io=None, rtt_ms=None):
    """(runs, state) of a training cell asked warm (as_had): Redis by prefetch_depth, redis_io and the
    delay proxy's round trip."""
    return as_had([r for r in runs(folder) if (r.dataset, r.backend) == (dataset, backend)
                   and (r.read_options or {}).get("prefetch_depth") == depth and (r.read_options or {}).get("redis_io") == io
                   and (r.location or {}).get("rtt_ms_asked") == rtt_ms], "warm")


def median_au(folder, dataset, backend, depth=None, io=None, rtt_ms=None):
    """Median AU of a training cell asked warm (warm_cell)."""
    return statistics.median(r.au for r in warm_cell(folder, dataset, backend, depth, io, rtt_ms)[0])


def median_au_said(*cell):
    """median_au as the prose writes it: '99.2%', with ' (partly warm)' where its runs were."""
    return f"{median_au(*cell):.1%}{labelled(warm_cell(*cell)[1])}"


REDIS_FIRST = catalogue.relative("ci-2core-emulated-h100-redis")


def redis_first_runs(dataset):
    """{round trip asked (None: direct; "lmdb": the LMDB reference): the run} of the first Redis training runs."""
    return {(r.location or {}).get("rtt_ms_asked") if r.backend == "redis" else "lmdb": r
            for r in runs(REDIS_FIRST) if r.dataset == dataset}


@claim
def redis_first_training_table():
    """Wall seconds and AU (as re-derived) of the first Redis training runs, by round trip."""
    cell = lambda r: f"{r.wall_seconds:.1f} s, AU {r.au:.0%}{labelled(r.cache_state)}" if r else ""  # noqa: E731
    rtts = sorted(k for k in redis_first_runs("cifar10") if k not in (None, "lmdb"))
    rows = ["| LMDB | Redis direct | " + " | ".join(f"{k:g} ms" for k in rtts) + " |"]
    for d in ("cifar10", "imagenet"):
        mine = redis_first_runs(d)
        depth = mine[None].read_options["prefetch_depth"]
        rows.append(f"| {LABELS[d]}, {depth:,} in flight | "
                    + " | ".join(cell(mine.get(k)) for k in ("lmdb", None, 10.0, 50.0, 100.0)) + " |")
    return tuple(rows)


@claim
def redis_first_training_says():
    mine = redis_first_runs("cifar10")
    delayed = [mine[k].au for k in (10.0, 50.0, 100.0)]
    from analysis import capacity
    redis = [capacity.prefetch_cpu(r) for k, r in mine.items() if k != "lmdb"]
    return (f"({span(delayed, lambda x: f'{100 * x:.0f}')}% at 10-100 ms against {mine[None].au:.0%}\ndirect)",
            f"spent {span(redis, lambda x: f'{x:.1f}')} CPU-s reading CIFAR-10 from Redis against "
            f"{capacity.prefetch_cpu(mine['lmdb']):.1f} from LMDB")


@claim
def redis_lean_training():
    """The lean reader's training table: LMDB, Redis direct, Redis at 10 ms (median AU)."""
    rtt = max(r.location["rtt_ms_asked"] or 0 for r in runs(REDIS_LEAN) if r.backend == "redis")
    rows = [f"| Redis direct | Redis {rtt:g} ms |"]
    for dataset, depth in (("cifar10", 16384), ("imagenet", 1024)):
        rows.append(f"{depth:,} in flight")
        rows += [median_au_said(REDIS_LEAN, dataset, "lmdb"), median_au_said(REDIS_LEAN, dataset, "redis", depth),
                 median_au_said(REDIS_LEAN, dataset, "redis", depth, None, 10.0)]
    return tuple(rows)


@claim
def redis_io_thread_training():
    """The I/O thread's training table: LMDB, and Redis direct and at 10 ms, thread / inline (median AU)."""
    rtt = max(r.location["rtt_ms_asked"] or 0 for r in runs(REDIS_IO_THREAD) if r.backend == "redis")
    rows = [f"Redis {rtt:g} ms, thread / inline"]
    for dataset, depth in (("cifar10", 16384), ("imagenet", 128), ("imagenet", 1024)):
        rows.append(f"{depth:,} in flight")
        if depth != 1024:
            rows.append(median_au_said(REDIS_IO_THREAD, dataset, "lmdb"))
        for rtt in (None, 10.0):
            rows.append(" / ".join(f"{median_au(REDIS_IO_THREAD, dataset, 'redis', depth, io, rtt):.1%}"
                                   for io in ("thread", "inline")))
    return tuple(rows)


@claim
def redis_io_thread_lmdb_resident():
    """The I/O thread's LMDB reference on ImageNet: the cache state its runs had, and how much of the
    database was resident before the clock."""
    mine, state = warm_cell(REDIS_IO_THREAD, "imagenet", "lmdb")
    return (f"ImageNet's LMDB runs were {state}, {percents([r.cache_resident_fraction for r in mine])} of the "
            "database resident before the clock")


@claim
def redis_io_thread_goal():
    """ImageNet at 10 ms against LMDB, the I/O thread's runs: how far below, and which cell met the 5% goal."""
    lmdb = median_au(REDIS_IO_THREAD, "imagenet", "lmdb")
    cells = {(depth, io): median_au(REDIS_IO_THREAD, "imagenet", "redis", depth, io, 10.0)
             for depth in (128, 1024) for io in ("thread", "inline")}
    below = {k: (lmdb - au) / lmdb for k, au in cells.items()}
    met = [k for k, b in below.items() if b <= 0.05]
    thread = [b for (depth, io), b in below.items() if io == "thread"]
    cifar10 = median_au(REDIS_IO_THREAD, "cifar10", "redis", 16384, "thread", 10.0) / median_au(REDIS_IO_THREAD, "cifar10", "lmdb")
    return (f"The Redis AU goal at 10 ms: CIFAR-10 {'met' if 1 - cifar10 <= 0.05 else 'not met'}",
            f"ImageNet {span(cells.values(), lambda x: f'{x:.1%}'[:-1])}% against "
            f"{median_au_said(REDIS_IO_THREAD, 'imagenet', 'lmdb')}, "
            f"{span(below.values(), lambda x: f'{x:.1%}'[:-1])}% below: met by {'one' if len(met) == 1 else len(met)} "
            f"inline cell ({met[0][0]} in flight, {cells[met[0]]:.1%}), not with the I/O thread "
            f"({span(thread, lambda x: f'{x:.0%}'[:-1])}% below)")


@claim
def redis_migration_stall():
    """16 slots moved under a reading net (benchmarks/redis_migration.py): median stalls and their
    share of a round trip per slot moved, through the proxy at 10 ms and on loopback."""
    def median(dataset, rtt_ms, key):
        rounds = json.loads((ROOT / f"{catalogue.relative('ci-2core-redis-migration')}/{dataset}-3.json").read_text())["rounds"]
        return statistics.median(r[key] for r in rounds if r["rtt_ms_asked"] == rtt_ms)
    far = [median(d, 10.0, "pause_ms") for d in ("cifar10", "imagenet")]
    per_slot = [median(d, 10.0, "pause_per_slot_rtt") for d in ("cifar10", "imagenet")]
    near = [median(d, None, "pause_ms") for d in ("cifar10", "imagenet")]
    return (f"the longest stall is {far[0]:.0f} ms (CIFAR-10) and {far[1]:.0f} ms (ImageNet), {per_slot[0]:.2f}x and "
            f"{per_slot[1]:.2f}x of a round trip per slot moved",
            f"on loopback the stalls ({span(near, lambda x: f'{x:.0f}')} ms)")


@claim
def redis_failover_pause():
    """A master SIGKILLed mid-pass (benchmarks/redis_failover.py): the reader's pause, median [range]."""
    rounds = json.loads((ROOT / f"{catalogue.relative('ci-2core-redis-failover')}/cifar10.json").read_text())["rounds"]

    def pause(by, rtt_ms):
        values = sorted(r["pause_s"] for r in rounds if (r["failed_over_by_asked"], r["rtt_ms_asked"]) == (by, rtt_ms))
        return f"{statistics.median(values):.2f} s [{values[0]:.2f}-{values[-1]:.2f}]"
    goal = {r["goal_s"] for r in rounds}.pop()
    return (f"the reader's pause is {pause('keeper', None)} direct and {pause('keeper', 10.0)} at 10 ms with the "
            f"keeper, {pause('redis', None)} with Redis's own failover",
            f"= {goal:g} s) is met with the keeper")


@claim
def redis_proxy_goal():
    """ImageNet at 10 ms against LMDB on the host of the proxy runs (the reader's defaults)."""
    folder = catalogue.relative("ci-2core-emulated-h100-redis-proxy")
    redis, lmdb = median_au(folder, "imagenet", "redis", rtt_ms=10.0), median_au(folder, "imagenet", "lmdb")
    return (f"ImageNet at 10 ms **{redis:.1%}** against LMDB's {median_au_said(folder, 'imagenet', 'lmdb')} "
            f"({(lmdb - redis) / lmdb:.1%} below")


# -- docs/running.md ----------------------------------------------------------------------------

@claim
def running_reclaimer():
    """MNIST's files cold at 287 IOPS on the 2016 profile: the run the host's reclaimer reached, and
    the run whose memory cgroup was kept from it (a DAMON filter in `limits.applied`)."""
    def kept(r):
        return any(k.startswith("damon") for k in r.limits["applied"])
    mine = [r for r in had(runs(PAPER2016), "cold") if (r.dataset, r.backend) == ("mnist", "images")
            and r.limits.get("riops") == 287 and r.limits.get("throttled_reads")]
    reached, safe = (next(r for r in mine if kept(r) == k) for k in (False, True))
    per_file = lambda r: r.limits["throttled_reads"]["read_ios"] / r.artifact_footprint["files"]  # noqa: E731
    idle = {p["idle_seconds_at_least"] for p in safe.environment.get("proactive_reclaim") or ()}
    return (f"(file pages idle >= {span(idle, lambda x: f'{x:g}')} s)",
            f"made {per_file(reached):.2f} reads per file instead of {per_file(safe):.2f} and took "
            f"{reached.wall_seconds:.0f} s instead of {safe.wall_seconds:.0f}")


# -- docs/capacity.md and docs/capacity-method.md -------------------------------------------------

CAPACITY = catalogue.relative("ci-2core-capacity")
CAPACITY_HOST2 = catalogue.relative("ci-2core-capacity-host2")
CAPACITY_THREADS = catalogue.relative("ci-2core-capacity-transform-threads")
CAPACITY_CONTROL = catalogue.relative("ci-2core-capacity-control")
ONE_GIB = "1 GiB"
PER_SOLVER = "1 GiB + 0.78125 GiB per further solver"  # --mem-per-solver 800M
NO_LIMITS, PAPER2016_PROFILE = "no limits", "paper2016 profile"


@functools.cache
def capacity_records(folder):
    """A sweep folder's records as analysis/capacity.py tabulates them (superseded ones left out)."""
    return tuple(r for r in load([ROOT / folder]) if not r.superseded)


@functools.cache
def capacity_curves(folder=CAPACITY):
    """{(dataset, accelerator, limits, backend, cache): (its runs, {N: group AUs}, the Ns that lost a solver)}."""
    from analysis import capacity
    records = capacity_records(folder)
    lost = capacity.lost(records)
    of_curve = {}
    for r in records:  # one pass: curve_of is not cheap
        of_curve.setdefault(capacity.curve_of(r), []).append(r)
    out = {}
    for key, by_n in capacity.curves(records).items():
        dataset, setup, backend, cache = key
        out[(dataset, setup[1].removeprefix("emulated "), setup[2], backend, cache)] = (of_curve[key], by_n,
                                                                                       lost.get(key, set()))
    return out


def capacity_answer(dataset, accelerator, limits, backend, cache, folder=CAPACITY):
    """(largest N, median group AU at N, at N + 1: None where not run) of one curve."""
    from analysis import capacity
    _, by_n, lost = capacity_curves(folder)[(dataset, accelerator, limits, backend, cache)]
    n, at, above = capacity.largest_n(by_n, lost)
    return n, at and statistics.median(at), above and statistics.median(above)


def largest(*curve, folder=CAPACITY):
    return capacity_answer(*curve, folder=folder)[0]


def au_above(*curve, folder=CAPACITY, digits=2):
    """The median group AU at N + 1 (at N = 1 where none held)."""
    return f"{capacity_answer(*curve, folder=folder)[2]:.{digits}f}"


def curve_had(*curve, folder=CAPACITY):
    """A capacity curve's cache as its runs had it (capacity.cache_had): "warm", "partly warm", ..."""
    from analysis import capacity
    mine = capacity_curves(folder)[curve][0]
    return capacity.cache_had(mine, capacity.curve_of(mine[0]))


def warm_cold(dataset, accelerator, limits, backend, folder=CAPACITY, what=largest):
    """'warm / cold' of one backend's curves, each labelled where none of its runs had its cache
    ("0.60 (partly warm)"); a curve that missed only at some N (not its answer's) is not."""
    def value(cache):
        had = curve_had(dataset, accelerator, limits, backend, cache, folder=folder)
        return f"{what(dataset, accelerator, limits, backend, cache, folder=folder)}{labelled(had)}"
    return " / ".join(value(c) for c in ("warm", "cold"))


def had_note(had, cache):
    """', partly warm' after a figure whose runs did not have the cache they asked for, else ''."""
    return "" if had == cache else f", {had}"


def cpu_allows(*curve, folder=CAPACITY):
    """(N the data path's CPU allows, the one thread's share) of one curve."""
    from analysis import capacity
    return capacity.cpu_allows(capacity_curves(folder)[curve][0])


def allows_against(*curve_but_cache, folder=CAPACITY):
    """'allows warm / cold against answers warm / cold', and the ratios of the allowed to the answer."""
    allowed = [cpu_allows(*curve_but_cache, c, folder=folder)[0] for c in ("warm", "cold")]
    answers = [largest(*curve_but_cache, c, folder=folder) for c in ("warm", "cold")]
    return (f"{allowed[0]:.1f} / {allowed[1]:.1f} against {answers[0]} / {answers[1]}",
            [a / n for a, n in zip(allowed, answers)])


def per_core(dataset, accelerator, limits, backend, cache, folder=CAPACITY):
    from analysis import capacity
    return capacity.images_per_core_second(capacity_curves(folder)[(dataset, accelerator, limits, backend, cache)][0])


def hundreds(x):
    return f"{round(x, -2):,.0f}"


def capacity_stop(*curve, folder=CAPACITY):
    """(the N that held, the N that failed, the figures of each: the held one None where N = 0 held) of one curve."""
    from analysis import capacity
    mine, by_n, lost = capacity_curves(folder)[curve]
    held, failed = capacity.largest_n(by_n, lost)[0], capacity.first_failed(by_n, lost)
    at = lambda k: capacity.figures_of([r for r in mine if capacity.solvers(r) == k], ROOT / folder)  # noqa: E731
    return held, failed, at(held) if held else None, at(failed)


def both_at(figure, *curve, folder=CAPACITY):
    """'97% at 19, 97% at 18': one figure at the N that failed and at the N that held."""
    held, failed, before, after = capacity_stop(*curve, folder=folder)
    return f"{getattr(after, figure):.0%} at {failed}, {getattr(before, figure):.0%} at {held}"


def runs_losing_solvers(*curve, folder=CAPACITY):
    """'at N in k of n runs': the first N a run lost a solver at, and in how many of its runs."""
    from analysis import capacity
    mine, _, lost = capacity_curves(folder)[curve]
    n = min(lost)
    groups = capacity.group_aus([r for r in mine if capacity.solvers(r) == n]).values()
    return f"at {n} in {sum(1 for _, failed in groups if failed)} of {len(groups)}"


def leveldb_stops():
    """'2 on its lock' where every LevelDB curve that held one solver failed at 2 on its lock (else the words found)."""
    from analysis import capacity
    found = set()
    for curve in (k for k in capacity_curves() if k[3] == "leveldb" and largest(*k) >= 1):
        mine, by_n, lost = capacity_curves()[curve]
        failed = capacity.first_failed(by_n, lost)
        at = lambda n: [r for r in mine if capacity.solvers(r) == n]  # noqa: E731
        words = capacity.stopped_by(at(failed), ROOT / CAPACITY, at(failed - 1))
        found.add(f"{failed} on its lock" if words.startswith("a lock") else f"{failed} on {words}")
    return "; ".join(sorted(found))


@claim
def capacity_stoppers():
    """The stoppers the summary under "Stopped by" names, with the figures at both N."""
    files = ("cifar10", "titanx2016", NO_LIMITS, "images")
    files_2016 = ("cifar10", "titanx2016", PAPER2016_PROFILE, "images", "warm")
    _, failed, _, cold = capacity_stop(*files, "cold")
    cores = lambda *curve: both_at("cores", *curve)  # noqa: E731
    return (f"LevelDB stops at {leveldb_stops()} wherever one solver held",
            "CIFAR-10 pymem warm on the emulated H100 "
            f"{runs_losing_solvers('cifar10', 'h100', NO_LIMITS, 'pymem', 'warm')} runs, MNIST pymem on the 2016 profile "
            f"{runs_losing_solvers('mnist', 'titanx2016', PAPER2016_PROFILE, 'pymem', 'cold')}",
            f"the cores ran out at {capacity_stop(*files, 'warm')[1]} ({cores(*files, 'warm')})",
            f"*not found* at {capacity_stop(*files_2016)[1]} (cores {cores(*files_2016)})",
            f"cold, *not found* at {failed} (the prefetch thread {cold.thread:.0%})",
            f"(MNIST LMDB warm on the emulated H100: {cores('mnist', 'h100', NO_LIMITS, 'lmdb', 'warm')}; "
            f"CIFAR-10 LMDB cold on the emulated Titan X: {cores('cifar10', 'titanx2016', NO_LIMITS, 'lmdb', 'cold')})",
            f"(MNIST Redis cold on the\nemulated H100: {cores('mnist', 'h100', NO_LIMITS, 'redis', 'cold')}; "
            "ImageNet LMDB cold on the emulated Titan X: "
            f"{cores('imagenet', 'titanx2016', PER_SOLVER, 'lmdb', 'cold')})")


@claim
def capacity_stopper_2016_lmdb():
    """MNIST LMDB cold on the 2016 profile: its figures at the N that failed and the N that held."""
    held, failed, before, after = capacity_stop("mnist", "titanx2016", PAPER2016_PROFILE, "lmdb", "cold")
    return (f"MNIST LMDB cold on the 2016 profile at {failed} is *not found*: in training the reads ran at "
            f"{after.paced:.0%} of the IOPS limit ({before.paced:.0%} at {held}) and the processes used "
            f"{after.cores:.0%} of the cores ({before.cores:.0%} at {held}) while the host monitor saw "
            f"{after.monitor:.0%} "
            f"({before.monitor:.0%} at {held})")


RECHECK_2016_LMDB = catalogue.relative("ci-2core-paper2016-lmdb-cold-recheck")


@claim
def capacity_stopper_2016_lmdb_recheck():
    """The same cell swept again on one probed host: its answer and its figures in the training window."""
    from analysis import capacity
    curve = ("mnist", "titanx2016", PAPER2016_PROFILE, "lmdb", "cold")
    n, at, above = capacity_answer(*curve, folder=RECHECK_2016_LMDB)
    held, failed, before, after = capacity_stop(*curve, folder=RECHECK_2016_LMDB)
    mine = capacity_curves(RECHECK_2016_LMDB)[curve][0]
    runs = lambda k: len(capacity.group_aus([r for r in mine if capacity.solvers(r) == k]))  # noqa: E731
    probe = round(statistics.median(r.environment["cpu_probe"]["images_per_second"] for r in mine if r.ok))
    figure = lambda name: f"{getattr(after, name):.0%} ({getattr(before, name):.0%} at {held})"  # noqa: E731
    return (f"probe {probe}, `{RECHECK_2016_LMDB}`), with the processes' CPU in the training window, "
            f"the same cell held N = {n} (AU {capacity.au_text(at)} at {n}, {capacity.au_text(above)} at {n + 1}, "
            f"n = {runs(n)} and {runs(n + 1)}) and is still *not found* at {failed}: cores {figure('cores')}, "
            f"IOPS limit {figure('paced')}, device {figure('device')}")


@claim
def capacity_hdf5_not_found():
    """HDF5's cells: their solver thread's share at N = 1 (where none held)."""
    from analysis import capacity
    at_one = lambda mine: [r for r in mine if capacity.solvers(r) == 1]  # noqa: E731
    shares = [capacity.figures_of(at_one(mine), ROOT / CAPACITY).thread
              for k, (mine, _, _) in capacity_curves().items() if k[3] == "hdf5"]
    return f"(its solver thread {percents(shares)} busy at N = 1)"


@claim
def capacity_hosts_differ():
    """The same ImageNet LMDB Titan X cell on the faster host and on the slower one, and the faster one's rate."""
    cell = ("imagenet", "titanx2016", PER_SOLVER, "lmdb")
    rates = [per_core(*cell, c) for c in ("warm", "cold")]
    slower = [per_core(*cell, c) / per_core(*cell, c, folder=CAPACITY_HOST2) for c in ("warm", "cold")]
    return (f"held {largest(*cell, 'warm')} solvers warm / {largest(*cell, 'cold')} cold on one 2-core VM and "
            f"{warm_cold(*cell, folder=CAPACITY_HOST2)} on another", f"per-thread CPU {span(slower)}x slower",
            f"(LMDB ~{span(rates, hundreds)} images per core-second)")


@claim
def capacity_method_cores_example():
    """The method's example of a figure printed at both N: the cores, MNIST LMDB on the emulated H100, warm."""
    curve = ("mnist", "h100", NO_LIMITS, "lmdb", "warm")
    n = largest(*curve)
    at = [capacity_figures(curve, m).cores for m in (n, n + 1)]
    return f"{at[1]:.0%} at {n + 1}, {at[0]:.0%} at {n}"


@claim
def capacity_method_minority_example():
    """The method's example of a class found in a minority of runs (CIFAR-10 pymem, emulated H100, warm),
    as analysis/capacity.py words it."""
    from analysis import capacity
    curve = ("cifar10", "h100", NO_LIMITS, "pymem", "warm")
    n = largest(*curve)
    return capacity.stopped_by(at_n(curve, n + 1), ROOT / CAPACITY, at_n(curve, n))


@claim
def capacity_lmdb_shares():
    h100 = lambda d, c: largest(d, "h100", NO_LIMITS, "lmdb", c)  # noqa: E731
    cifar10 = {h100("cifar10", c) for c in ("warm", "cold")}
    return (f"{h100('mnist', 'warm')} emulated H100s on LeNet warm ({h100('mnist', 'cold')} cold), "
            f"{' / '.join(map(str, sorted(cifar10)))} on cifar10_quick",
            f"{warm_cold('mnist', 'titanx2016', NO_LIMITS, 'lmdb')} emulated Titan X on LeNet and "
            f"{warm_cold('cifar10', 'titanx2016', NO_LIMITS, 'lmdb')} on cifar10_quick")


def in_memory_curves():
    """The curves of the backends whose data the solver holds in its memory (MemoryData readers)."""
    from data_prep import backends
    return [k for k in capacity_curves() if k[2] == NO_LIMITS and backends.get(k[3]).layer == "MemoryData"]


@claim
def capacity_in_memory():
    """The in-memory backends' answers where N + 1 was run, and the first N at which the OOM killer took solvers."""
    from analysis import capacity
    bracketed = [largest(*k) for k in in_memory_curves() if capacity.bracketed(*capacity_curves()[k][1:])]
    killed = [min(capacity_curves()[k][2]) for k in in_memory_curves() if capacity_curves()[k][2]]
    return (f"hold {span(bracketed, str)} solvers and more", f"from {span(killed, str)} solvers on")


@claim
def capacity_redis_lean():
    h100 = [largest(d, "h100", NO_LIMITS, "redis", c) for d in ("mnist", "cifar10") for c in ("warm", "cold")]
    lenet = [largest("mnist", "titanx2016", NO_LIMITS, "redis", c) for c in ("warm", "cold")]
    quick = [largest("cifar10", "titanx2016", NO_LIMITS, "redis", c) for c in ("warm", "cold")]
    return (f"feeds {span(h100, str)} emulated H100s and {span(lenet, str)} emulated Titan X (LeNet; "
            f"{span(quick, str)} on")


@claim
def capacity_imagenet_one_gib():
    """ImageNet on the emulated H100 in 1 GiB: who fed one, at which AU, who fed none, and the OOM killer at 2."""
    cell = ("imagenet", "h100", ONE_GIB)
    fed = [capacity_answer(*cell, b, "cold")[1] for b in ("lmdb", "leveldb")]
    redis = [capacity_answer(*cell, "redis", c)[2] for c in ("warm", "cold")]
    files = [capacity_answer(*cell, "images", c)[2] for c in ("warm", "cold")]
    two = [r for r in capacity_curves()[(*cell, "lmdb", "cold")][0] if (r.concurrent or {}).get("solvers") == 2]
    two_f = lambda x: f"{x:.2f}"  # noqa: E731
    over = max(r.data_over_cache_room() or 0 for r in capacity_curves()[(*cell, "lmdb", "warm")][0])
    return (f"from LMDB or LevelDB cold ({span(fed, two_f)})",
            f"(LMDB {au_above(*cell, 'lmdb', 'warm')}{had_note(curve_had(*cell, 'lmdb', 'warm'), 'warm')})",
            f"warming {over:.1f}x more data than the cgroup can cache",
            f"Redis {span(redis, two_f)} and image files {span(files, two_f)}",
            f"the OOM killer took {sum(not r.ok for r in two)} of {len(two)}")


@claim
def capacity_titanx_imagenet():
    from data_prep import datasets
    from experiments import accelerators
    cell = ("imagenet", "titanx2016", PER_SOLVER)
    model = datasets.get("imagenet").model
    eats = model.batch * 1000 / accelerators.from_profile("titanx2016", model).ms_per_iteration
    return (f"~{hundreds(eats)} images/s each",
            f"LMDB {largest(*cell, 'lmdb', 'warm')} warm / {largest(*cell, 'lmdb', 'cold')} cold, "
            f"Redis {warm_cold(*cell, 'redis')}, "
            f"LevelDB {span([largest(*cell, 'leveldb', c) for c in ('warm', 'cold')], str)} (its lock), "
            f"image files none ({au_above(*cell, 'images', 'warm')})",
            f"(LMDB ~{span([per_core(*cell, 'lmdb', c) for c in ('warm', 'cold')], hundreds)} images per core-second)")


@claim
def capacity_titanx_cifar10():
    cell = ("cifar10", "titanx2016", NO_LIMITS)
    n = lambda b, c: largest(*cell, b, c)  # noqa: E731
    both = lambda b: span([n(b, c) for c in ("warm", "cold")], str)  # noqa: E731
    return (f"LMDB feeds {both('lmdb')}, Redis {both('redis')}, image files {n('images', 'warm')} warm "
            f"({n('images', 'cold')} cold), LevelDB {both('leveldb')}, HDF5 none ({au_above(*cell, 'hdf5', 'warm')}",
            f"cppmem {both('cppmem')} warm and cold", f"pymem {n('pymem', 'cold')} cold",
            f"at least {n('pymem', 'warm')} warm")


@claim
def capacity_h100_imagenet_per_solver():
    """ImageNet on the emulated H100 with --mem-per-solver: every backend's AU at N = 1, warm / cold."""
    cell = ("imagenet", "h100", PER_SOLVER)
    au = lambda b: warm_cold(*cell, b, what=au_above)  # noqa: E731
    n = {len(capacity_curves()[(*cell, b, c)][1][1])
         for b in ("lmdb", "leveldb", "redis", "images") for c in ("warm", "cold")}
    return (f"(LMDB {au('lmdb')}, LevelDB {au('leveldb')}, Redis {au('redis')}, image files {au('images')} at N = 1, "
            f"n = {span(n, str)})")


@claim
def capacity_cpu_imagenet_lmdb():
    """ImageNet LMDB, the N the CPU allows against the answer, on both hosts; image files' one-thread shares."""
    cell = ("imagenet", "titanx2016", PER_SOLVER, "lmdb")
    shares = [cpu_allows(*k)[1] for k in capacity_curves() if k[3] == "images" and largest(*k) == 0]
    return (f"Titan X {allows_against(*cell)[0]} (the faster host), {allows_against(*cell, folder=CAPACITY_HOST2)[0]} "
            f"on the slower host's", f"({span(shares, lambda x: f'{x:.2f}')} of it)",
            f"{largest('cifar10', 'titanx2016', NO_LIMITS, 'images', 'warm')} on CIFAR-10's Titan X warm where the CPU "
            f"allows {cpu_allows('cifar10', 'titanx2016', NO_LIMITS, 'images', 'warm')[0]:.1f}")


@claim
def capacity_one_h100():
    """What one emulated H100 on CaffeNet needs from the one prefetch thread, and what each host's delivered."""
    from analysis import capacity
    r = capacity_curves()[("imagenet", "h100", ONE_GIB, "lmdb", "warm")][0][0]
    eats = batch("imagenet") * 1000 / r.compute["ms_per_iteration"]
    share = lambda limits, b, c: cpu_allows("imagenet", "h100", limits, b, c)[1]  # noqa: E731
    two = lambda x: f"{x:.2f}"  # noqa: E731
    one_gib = [share(ONE_GIB, b, "warm") for b in ("lmdb", "leveldb")]
    slower = [share(PER_SOLVER, b, c) for b in ("lmdb", "leveldb", "redis") for c in ("warm", "cold")]
    io_thread = f"{ONE_GIB}; redis_io thread"
    fed = [capacity_answer("imagenet", "h100", io_thread, "redis", c)[1] for c in ("warm", "cold")]
    return (f"{capacity.THRESHOLD:.2f} of its {count(round(eats, -1))} images/s\n"
            f"is {count(capacity.THRESHOLD * eats)} a second",
            f"delivered {span(one_gib, two)} of that warm" + partly_warm_of(("lmdb", "leveldb"), "imagenet", "h100", ONE_GIB),
            f"(LMDB\n~{span([per_core('imagenet', 'h100', ONE_GIB, 'lmdb', c) for c in ('warm', 'cold')], hundreds)}",
            f"every backend's {span(slower, two)} on the slower host's",
            f"({span([share(io_thread, 'redis', c) for c in ('warm', 'cold')], two)} on the host of the",
            f"fed one at\n{span(fed, two)}")


def partly_warm_of(backends, dataset, accelerator, limits):
    """' (LMDB's runs partly warm)' for the backends among `backends` whose warm curve was not all warm."""
    missed = [BACKEND_LABELS[b] for b in backends if curve_had(dataset, accelerator, limits, b, "warm") != "warm"]
    return f" ({' and '.join(missed)}: partly warm)" if missed else ""


@claim
def capacity_transform_threads():
    """ImageNet on the emulated H100 swept at 1 and 2 transform threads in one session: warm with no
    limit, cold in 1 GiB + 800 MiB per solver; each curve's answer, AU at N and N + 1, and n."""
    def cell(limits, backend, cache, threads):
        key = ("imagenet", "h100", f"{limits}; transform_threads {threads}", backend, cache)
        n, at, above = capacity_answer(*key, folder=CAPACITY_THREADS)
        return f"{n} ({at:.3f} / {above:.3f})" if at else f"{n} ({above:.3f})"
    per_solver = "1 GiB + 0.78125 GiB per further solver"
    return (f"LMDB {cell(NO_LIMITS, 'lmdb', 'warm', 1)} at one thread, {cell(NO_LIMITS, 'lmdb', 'warm', 2)} at two",
            f"Redis {cell(NO_LIMITS, 'redis', 'warm', 1)} and {cell(NO_LIMITS, 'redis', 'warm', 2)}",
            f"LMDB {cell(per_solver, 'lmdb', 'cold', 1)} at one thread and {cell(per_solver, 'lmdb', 'cold', 2)} at "
            f"two; Redis {cell(per_solver, 'redis', 'cold', 1)} and {cell(per_solver, 'redis', 'cold', 2)}")


@claim
def capacity_cpu_small_records():
    cells = (("cifar10", "h100", NO_LIMITS), ("mnist", "h100", NO_LIMITS))
    (cifar10, r1), (mnist, r2) = (allows_against(*c, "lmdb") for c in cells)
    allowed, answer = cpu_allows("mnist", "titanx2016", PAPER2016_PROFILE, "lmdb", "cold")[0], \
        largest("mnist", "titanx2016", PAPER2016_PROFILE, "lmdb", "cold")
    return (f"over-predicts by {span(r1 + r2 + [allowed / answer])}x", f"(CIFAR-10 H100 {cifar10}, MNIST H100 {mnist}, "
            f"MNIST on the 2016 machine {allowed:.1f} against {answer})")


@claim
def capacity_cpu_redis():
    small = [allows_against(d, a, NO_LIMITS, "redis") for d, a in
             (("cifar10", "h100"), ("cifar10", "titanx2016"), ("mnist", "h100"), ("mnist", "titanx2016"))]
    imagenet = allows_against("imagenet", "titanx2016", PER_SOLVER, "redis")
    two = lambda x: f"{x:.2f}"  # noqa: E731
    ratios = [x for _, rs in small for x in rs]
    residual = residual_share(("mnist", "h100", NO_LIMITS, "redis", "cold"))
    return (f"{small[0][0]} on CIFAR-10's H100, {small[1][0]} on its Titan X, {small[2][0]} and {small[3][0]} on MNIST "
            f"({span(ratios, two)}x; MNIST's H100 cold, {small[2][1][1]:.2f}x",
            f"solver threads {residual:.0%} of the CPU",
            f"ImageNet's Titan X, {imagenet[0]} ({span(imagenet[1])}x)")


@claim
def capacity_leveldb_lock():
    """Where LevelDB's lock let one solver train, the N its data path's CPU would have allowed."""
    allowed = [cpu_allows(*k)[0] for k in capacity_curves() if k[3] == "leveldb" and largest(*k) == 1]
    return f"LevelDB at 1 (its lock; the CPU would allow {span(allowed, lambda x: f'{x:.0f}')})"


@claim
def capacity_slower_host():
    cell = ("imagenet", "titanx2016", PER_SOLVER)
    slower = [warm_cold(*cell, b, folder=CAPACITY_HOST2) for b in ("lmdb", "redis")]
    return (f"measured **LMDB {slower[0]}, Redis {slower[1]}**",
            f"against {warm_cold(*cell, 'lmdb')} and {warm_cold(*cell, 'redis')} on the faster host")


def killed(dataset, accelerator, limits, backend):
    """'at N the OOM killer took k solvers, in every run' (k per cache; else in how many of the runs)."""
    from analysis import capacity
    curves = [capacity_curves()[(dataset, accelerator, limits, backend, c)] for c in ("warm", "cold")]
    n = min(min(lost) for _, _, lost in curves)
    groups = [capacity.group_aus([r for r in mine if capacity.solvers(r) == n]).values() for mine, _, _ in curves]
    losing = [sum(1 for _, failed in found if failed) for found in groups]
    runs_in = "in every run" if losing == [len(found) for found in groups] else \
        f"in {span(losing, str)} of {span([len(found) for found in groups], str)} runs"
    took = [sum(failed for _, failed in found) for found in groups]
    return f"at {n} the OOM killer took {span(took, str)} solvers, {runs_in}"


def not_run(*curve_but_cache):
    """'17-23': the Ns between the answer and the N that failed that no run measured (both caches)."""
    from analysis import capacity
    gaps = set()
    for c in ("warm", "cold"):
        _, by_n, lost = capacity_curves()[(*curve_but_cache, c)]
        held, failed = capacity.largest_n(by_n, lost)[0], min(lost)
        gaps |= set(range(held + 1, failed))
    return span(gaps, str)


def bracketed_in_memory(dataset, accelerator):
    from analysis import capacity
    return [largest(*k) for k in in_memory_curves() if k[:2] == (dataset, accelerator)
            and capacity.bracketed(*capacity_curves()[k][1:])]


@claim
def capacity_paper2016():
    cell = ("cifar10", "titanx2016", PAPER2016_PROFILE)
    both = lambda b: span([largest(*cell, b, c) for c in ("warm", "cold")], str)  # noqa: E731
    lmdb = [capacity_answer(*cell, "lmdb", c)[1] for c in ("warm", "cold")]
    return (f"pymem feeds {both('pymem')} Titan X on CIFAR-10, warm and cold ({killed(*cell, 'pymem')})",
            f"cppmem at least {both('cppmem')} ({killed(*cell, 'cppmem')}; {not_run(*cell, 'cppmem')} not run",
            f"where the 24-GiB VM held {span(bracketed_in_memory('cifar10', 'titanx2016'), str)}",
            f">= {both('lmdb')} on CIFAR-10 warm and cold ({lmdb[0]:.2f} / {lmdb[1]:.2f} at {both('lmdb')}), "
            f"{largest('mnist', 'titanx2016', PAPER2016_PROFILE, 'lmdb', 'cold')} on MNIST cold; "
            f"LevelDB {both('leveldb')} (its lock), "
            f"HDF5 none (N = 1: {au_above(*cell, 'hdf5', 'warm', digits=3)} on CIFAR-10, "
            f"{au_above('mnist', 'titanx2016', PAPER2016_PROFILE, 'hdf5', 'cold')} on MNIST cold), image files "
            f"{largest(*cell, 'images', 'warm')} warm")


@claim
def capacity_control():
    n = lambda b: largest("cifar10", "titanx2016", NO_LIMITS, b, "warm", folder=CAPACITY_CONTROL)  # noqa: E731
    return f"gave LMDB >= {n('lmdb')} and image files {n('images')} too"


@claim
def lmdb_capacity_read_paths():
    """The capacity sweeps of CIFAR-10 LMDB on the emulated H100, by read path: largest N warm / cold."""
    paths = (("stock", NO_LIMITS), ("SHARED", "no limits; lmdb_read shared"),
             ("coalesced", "no limits; lmdb_read coalesced"))
    return ", ".join(f"{name} **{warm_cold('cifar10', 'h100', limits, 'lmdb')}**" for name, limits in paths)


COALESCED_AHEAD = catalogue.relative("ci-2core-capacity-lmdb-coalesced-ahead")
COALESCED_0025 = catalogue.relative("ci-2core-capacity-lmdb-coalesced-0025")


@claim
def capacity_coalesced():
    """CIFAR-10 LMDB warm on the emulated H100: the stock cursor against LMDBIO's walker, 64 and 8 MiB ahead."""
    cell = lambda limits: ("cifar10", "h100", limits, "lmdb", "warm")  # noqa: E731
    stock = largest(*cell(NO_LIMITS), folder=COALESCED_AHEAD)
    ahead = [largest(*cell(limits), folder=COALESCED_AHEAD) for limits in
             ("no limits; lmdb_read coalesced", "no limits; lmdb_ahead_mb 8; lmdb_read coalesced")]
    limits_0025 = [f"no limits; lmdb_ahead_mb {mb}; lmdb_read coalesced" for mb in (64, 8)]
    after = [largest(*cell(limits), folder=COALESCED_0025) for limits in limits_0025]
    allows = [cpu_allows(*cell(limits), folder=COALESCED_0025)[0] for limits in limits_0025]
    cpu = [coalesced_cpu_per_run(cell(limits)) for limits in AHEAD_LIMITS]
    two = lambda x: f"{x:.2f}"  # noqa: E731
    failed = largest(*cell(AHEAD_LIMITS[1]), folder=COALESCED_AHEAD) + 1
    cores = capacity_figures(cell(AHEAD_LIMITS[1]), failed, COALESCED_AHEAD).cores
    return (f"the stock cursor **{stock}**, coalesced **{ahead[0]}** at its default 64 MiB ahead and **{ahead[1]}** at "
            "`--lmdb-ahead-mb 8`", f"(CPU per solver run {span(cpu[0], two)}, {span(cpu[1], two)}\nand "
            f"{span(cpu[2], two)} s; the 64 MiB group stops at N = {failed} with the cores {cores:.0%} busy",
            f"the answers are the same, {after[0]}\nand {after[1]}, and the data path's CPU "
            f"allows {allows[0]:.1f} and {allows[1]:.1f}")


AHEAD_LIMITS = (NO_LIMITS, "no limits; lmdb_read coalesced", "no limits; lmdb_ahead_mb 8; lmdb_read coalesced")


def at_n(curve, n, folder=CAPACITY):
    """The runs of a capacity curve at N solvers."""
    from analysis import capacity
    return [r for r in capacity_curves(folder)[curve][0] if capacity.solvers(r) == n]


def capacity_figures(curve, n, folder=CAPACITY):
    from analysis import capacity
    return capacity.figures_of(at_n(curve, n, folder), ROOT / folder)


def coalesced_cpu_per_run(curve):
    """The median CPU seconds of one solver's process, at each N of a curve of the read-ahead sweep."""
    from analysis import capacity
    ns = {capacity.solvers(r) for r in capacity_curves(COALESCED_AHEAD)[curve][0]}
    return [statistics.median(capacity._process_cpu(r) for r in at_n(curve, n, COALESCED_AHEAD) if r.ok) for n in ns]


def solver_thread_share(group):
    """The solvers' main threads' share of the CPU of a group's sampled threads (process.thread_cpu_seconds)."""
    threads = [(r.process or {}).get("thread_cpu_seconds") or {} for r in group]
    return sum(t.get("solver (main thread)", 0) for t in threads) / sum(sum(t.values()) for t in threads)


def at_failing_n(curve):
    """The finished runs at the N above a curve's answer (the N that failed), grouped by run."""
    from analysis import capacity
    return list(capacity._groups([r for r in at_n(curve, largest(*curve) + 1) if r.ok]).values())


def residual_share(curve):
    return statistics.median(solver_thread_share(g) for g in at_failing_n(curve))


@claim
def capacity_small_records_residual():
    """Small records, LMDB, emulated H100, at the N that failed: the solvers' main threads' share of their
    sampled threads' CPU (median over groups), their start-up and their training seconds."""
    curves = [(d, "h100", NO_LIMITS, "lmdb", c) for d in ("cifar10", "mnist") for c in ("warm", "cold")]
    share = {d: [residual_share(k) for k in curves if k[0] == d] for d in ("cifar10", "mnist")}
    failed = [r for k in curves for g in at_failing_n(k) for r in g]
    one = lambda x: f"{x:.1f}"  # noqa: E731
    startup = [statistics.median(r.startup_seconds for g in at_failing_n(k) for r in g) for k in curves]
    return (f"threads take {percents(share['cifar10'])} of the group's CPU on CIFAR-10 and {percents(share['mnist'])} "
            "on MNIST", f"the net's set-up, {span(startup, one)} s each",
            f"({span([r.solver_seconds for r in failed], one)} s of\ntraining per solver)")


@claim
def capacity_redis_every_core():
    """ImageNet's Titan X from Redis (1 GiB + 800 MiB per solver): the CPU per image at N = 1 and at the N
    that failed warm (the processes' own CPU and the servers'), the cores at the failing N's, and what the
    CPU figure would predict without the servers' CPU."""
    from experiments import data_path_cpu
    from analysis import capacity
    cell = ("imagenet", "titanx2016", PER_SOLVER, "redis")
    rate = lambda rs: 1 / (1 / data_path_cpu.images_per_core_second(rs, capacity._process_cpu)  # noqa: E731
                           + data_path_cpu.servers_cpu_per_image(rs))
    failed = {c: largest(*cell, c) + 1 for c in ("warm", "cold")}
    cores = {c: [capacity._processes_cpu(g) for g in at_failing_n((*cell, c))] for c in ("warm", "cold")}
    return (f"({count(rate(at_n((*cell, 'warm'), 1)))} images per CPU-second at N = 1 warm, "
            f"{count(rate(at_n((*cell, 'warm'), failed['warm'])))} at N = {failed['warm']})",
            f"with the cores {percents(cores['warm'])} busy", f"at {percents(cores['cold'])}",
            f"over-predicted Redis {span(redis_allowed_without_servers())}x")


def redis_allowed_without_servers():
    """Per Redis curve: the N the data path's CPU would allow, counting the solvers' CPU only, over the answer."""
    from data_prep import datasets
    from experiments import data_path_cpu
    out = []
    cells = [(d, a, NO_LIMITS) for d in ("cifar10", "mnist") for a in ("h100", "titanx2016")]
    cells.append(("imagenet", "titanx2016", PER_SOLVER))
    for curve in ((*cell, "redis", c) for cell in cells for c in ("warm", "cold")):
        rs = capacity_curves()[curve][0]
        needed = data_path_cpu.THRESHOLD * datasets.get(curve[0]).model.batch * 1000 / rs[0].compute["ms_per_iteration"]
        out.append(rs[0].environment["cpu_cores"] * data_path_cpu.images_per_core_second(rs) / needed / largest(*curve))
    return out


MULTIHOST = catalogue.relative("ci-2core-multihost-capacity")
PROJECT_CLUSTER = "no limits"  # the cluster run.py starts on this host, reached on loopback


def multihost_rows():
    """The multihost sweep's curves in the table's order: this host (the project's cluster, then the same
    cluster named with --cluster), then 1, 2, 4 client hosts: [(limits, N, held runs, failed runs)]."""
    from analysis import capacity
    found = []
    for (_, _, limits, _, _), (mine, by_n, lost) in capacity_curves(MULTIHOST).items():
        n = capacity.largest_n(by_n, lost)[0]
        at = lambda k: [r for r in mine if capacity.solvers(r) == k]  # noqa: E731
        hosts = capacity.client_hosts(mine[0]) or 0
        found.append(((hosts, limits != PROJECT_CLUSTER), limits, n, at(n), at(n + 1)))
    return [row[1:] for row in sorted(found)]


@claim
def capacity_multihost_table():
    """Per row: largest N, AU at N / N + 1, what stopped N + 1 (with the cores at both N) and its CPU per image."""
    from analysis import capacity
    results = ROOT / MULTIHOST
    rows = []
    for _, n, held, failed in multihost_rows():
        aus = [statistics.median(au for au, _ in capacity.group_aus(rs).values()) for rs in (held, failed)]
        word = capacity.stopped_by(failed, results, held).split(" (")[0]
        cores = [capacity.figures_of(rs, results).cores for rs in (failed, held)]
        solvers_us, servers_us = capacity.cpu_per_image(failed)
        rows.append(f"| {n} | {aus[0]:.3f} / {aus[1]:.3f} | {word} (cores {cores[0]:.0%} at {n + 1}, {cores[1]:.0%} "
                    f"at {n}) | {solvers_us:.1f} / {servers_us:.1f} |")
    return tuple(rows)


@claim
def capacity_multihost_says():
    from analysis import capacity
    results = ROOT / MULTIHOST
    rows = multihost_rows()
    across = rows[2:]
    cores = [capacity.figures_of(failed, results).cores for _, _, _, failed in rows]
    servers = [capacity.figures_of(failed, results).servers for _, _, _, failed in rows]
    per_image = [capacity.cpu_per_image(failed)[1] for _, _, _, failed in rows]
    held = [statistics.median(au for au, _ in capacity.group_aus(rs).values()) for _, _, rs, _ in rows]
    one = lambda x: f"{x:.1f}"  # noqa: E731
    three = lambda x: f"{x:.3f}"  # noqa: E731
    return (f"moves the answer by at most one solver ({', '.join(str(n) for _, n, _, _ in across)})",
            f"cores are {percents(cores)} busy at every failing N", f"near\na core ({percents(servers)} in training)",
            f"charged {span(per_image[2:], one)} µs of CPU per image, on\nloopback {span(per_image[:2], one)}",
            f"({span(held[2:4], three)} at N = 5 against {span(held[:2], three)})")


@claim
def capacity_against_ffcv():
    """ImageNet's images per core-second on the capacity sweeps against FFCV's per vCPU."""
    from analysis import capacity
    raw, jpeg = capacity.OUTSIDE_REFERENCES["imagenet"]
    rates = {b: [per_core(*k) for k in capacity_curves() if k[0] == "imagenet" and k[3] in b]
             for b in (raw.backends, jpeg.backends)}
    records, pngs = rates[raw.backends], rates[jpeg.backends]
    return (f"Per vCPU that is {count(raw.per_vcpu)} and {count(jpeg.per_vcpu)} images/s",
            f"delivers {span(records, count)} raw records per CPU second from LMDB, LevelDB and Redis, "
            f"{span([x / raw.per_vcpu for x in records])}x FFCV's raw rate, and {span(pngs, count)} PNGs per CPU "
            "second, "
            f"{span([x / jpeg.per_vcpu for x in pngs])}x FFCV's")


@claim
def capacity_redis_io():
    cell = ("imagenet", "h100")
    thread, inline = (f"{ONE_GIB}; redis_io {w}" for w in ("thread", "inline"))
    aus = [capacity_answer(*cell, limits, "redis", c)[1] for limits in (thread, inline) for c in ("warm", "cold")]
    rates = {limits: [per_core(*cell, limits, "redis", c) for c in ("warm", "cold")] for limits in (thread, inline)}
    old = [per_core(*cell, ONE_GIB, "redis", c) for c in ("warm", "cold")]
    return (f"1 solver at AU {span(aus, lambda x: f'{x:.2f}')} either way",
            f"and {span(rates[thread] + rates[inline], count)} records per CPU second",
            f"the I/O thread {span([t / i for t, i in zip(rates[thread], rates[inline])], lambda x: f'{x:.2f}')}x "
            "inline's",
            f"Its {count(old[0])} / {count(old[1])} of 2026-11-24")


# -- docs/emulation.md --------------------------------------------------------------------------

GPU_STEP_CELLS = catalogue.relative("ci-2core-gpu-step-cells")
NUMBER_WORDS = {0: "none", 1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


def same_host_predictions():
    """The same-host rows of the GPU steps that predict (a row repeating a fitted cell is no evidence)."""
    from analysis import fidelity
    return [r for r in fidelity.same_host_rows(fidelity.gpu_step_folders())
            if r["ratio"] is not None and not r["use"].startswith("fitted")]


@claim
def emulation_hdf5_copies():
    """MNIST warm on the real H100: HDF5's solver seconds over LMDB's."""
    seconds = {r.backend: r.solver_seconds for r in had(runs(catalogue.relative("h100")), "warm")
               if r.dataset == "mnist" and r.backend in ("hdf5", "lmdb")}
    return (f"took {seconds['hdf5'] / seconds['lmdb']:.1f}x LMDB's solver time ({seconds['hdf5']:.1f} s against "
            f"{seconds['lmdb']:.1f})")


@claim
def emulation_gpu_steps():
    """The same-host table's predictions: within 15%, what their runs decide, and the fitted row."""
    from analysis import fidelity
    rows = same_host_predictions()
    within = [r for r in rows if fidelity.verdict(r, 1.15).startswith("within")]
    said = lambda verdict: [r for r in rows if r["power"][2] == verdict]  # noqa: E731
    in_spread, beyond, undecided = (said(v) for v in (fidelity.WITHIN_SPREAD, fidelity.BEYOND_SPREAD,
                                                     fidelity.UNDECIDED))
    fitted = next(r for r in fidelity.same_host_rows(fidelity.gpu_step_folders())
                  if r["use"].startswith("fitted"))
    ns = [n for r in undecided for n in (r["reference_n"], r["ours_n"])]
    return (f"{len(within)} of the {len(rows)} predictions have means within 15%, but their runs decide only "
            f"{len(in_spread) + len(beyond)}: {NUMBER_WORDS[len(in_spread)]} image-file cells",
            f"beyond its spread ({beyond[0]['ratio']:.2f}x", f"The other\n{len(undecided)}",
            f"(n = {span(ns, count)} per arm), are undecided: their arms repeat only within "
            f"{span([100 * r['power'][1] for r in undecided], lambda x: f'{x:.0f}')}%",
            f"repeats the fitted cell ({fitted['ratio']:.2f}x, its real arm's spread {fitted['reference_spread']:.0%})")


@claim
def emulation_cross_host():
    """The cross-host table: how many image-file cells are judged, and the compute-bound prediction."""
    from analysis import fidelity
    rows = [r for r in fidelity.cross_host_rows(fidelity.gpu_step_folders(), GPU_STEP_CELLS)
            if r["ratio"] is not None and not r["use"].startswith("fitted")]
    files = [r for r in rows if r["bound"] == "data path"]
    judged = [r for r in files if fidelity.verdict(r, 1.15) != "host CPU unknown"]
    (compute,) = [r for r in rows if r["bound"] == "compute"]
    goal = "within" if fidelity.verdict(compute, 1.15).startswith("within") else "outside"
    spread = {fidelity.BEYOND_SPREAD: "beyond its spread", fidelity.WITHIN_SPREAD: "within its spread"}.get(
        compute["power"][2], "undecided")
    judged_within = sum(fidelity.verdict(r, 1.15).startswith("within") for r in judged)
    return (f"{NUMBER_WORDS[len(judged)]} of the {len(files)} image-file cells are judged",
            f"{NUMBER_WORDS[judged_within]} of them within 15%",
            f"the one compute-bound\nprediction, LeNet on the H200, is {goal} 15% and {spread}")


def disk_fit_runs(kept):
    """MNIST's image files cold on the 2016 profile, with the run's pages kept from the reclaimer or not."""
    return [r for r in had(runs(PAPER2016), "cold") if (r.dataset, r.backend) == ("mnist", "images")
            and any(k.startswith("damon") for k in r.limits.get("applied", ())) == kept]


@claim
def emulation_disk_fit():
    """The 2016 disk's IOPS, fitted on the one run experiments/calibration.py fits it on."""
    from experiments import calibration
    r, _ = calibration.DISK_CELL.load()
    reads, asked = calibration.disk_reads(r)[0], r.limits["riops"]
    paper = calibration.paper_seconds("mnist", "images", "cold")
    t0 = r.wall_seconds - reads / asked
    return (f"**{calibration.fit_disk()['riops']} read IOPS, fitted on one paper cell**",
            f"at the previous step's {asked} IOPS made R = {reads:,} reads "
            f"({reads / r.artifact_footprint['files']:.2f} per PNG",
            f"in {r.wall_seconds:.1f} s, so T0 = {t0:.1f} s, and {reads:,} / ({paper} - {t0:.1f}) = "
            f"{reads / (paper - t0):.0f} IOPS gives the paper's {paper} s")


@claim
def emulation_disk_fit_holds():
    """The fit's earlier runs (the reclaimer reached them) against the runs at the fitted IOPS."""
    from experiments import calibration
    reached = disk_fit_runs(kept=False)
    per_file = {r.run_id: calibration.disk_reads(r)[0] / r.artifact_footprint["files"] for r in reached}
    worst = max(reached, key=lambda r: per_file[r.run_id])
    riops = machines.get("paper2016").limits["riops"]
    at = [r for r in disk_fit_runs(kept=True) if r.limits["riops"] == riops]
    walls = [r.wall_seconds for r in at]
    paper = calibration.paper_seconds("mnist", "images", "cold")
    idle = {p["idle_seconds_at_least"] for r in at for p in r.environment.get("proactive_reclaim") or ()
            if p.get("kind") == "DAMON pageout"}
    return (f"evicted PNGs idle for\n{span(idle, lambda x: f'{x:g}')} s between the run's epochs",
            f"({span(per_file.values(), lambda x: f'{x:.2f}')} per file,\n{worst.wall_seconds:.0f} s at "
            f"{worst.limits['riops']} IOPS)", f"At {riops} IOPS that cell took {statistics.mean(walls):.1f} s "
            f"({span(walls, lambda x: f'{x:.1f}')}, n = {len(at)}; {statistics.mean(walls) / paper:.2f}x the paper), "
            f"with {span([calibration.disk_reads(r)[0] for r in at], count)} reads")


@claim
def emulation_cpu_quota_table():
    """The CPU-quota table: wall seconds of CIFAR-10's and MNIST's image files warm, per quota, over the paper."""
    from experiments import calibration
    walls = {(r.dataset, (r.limits or {}).get("cpu_quota")): r.wall_seconds
             for r in runs(catalogue.relative("ci-2core-paper2016-cpu-quota"))}
    paper = {d: calibration.paper_seconds(d, "images", "warm") for d in ("cifar10", "mnist")}
    cell = lambda d, q: f"{walls[d, q]:.1f} ({walls[d, q] / paper[d]:.2f}x"  # noqa: E731
    return tuple(text for q, label in ((None, "none"), (0.7, "0.7 cores"), (0.6, "0.6 cores"))
                 for text in (f"| {label} | {cell('cifar10', q)}", cell("mnist", q)))


@claim
def emulation_cpu_per_image():
    """The 2016 machine's CPU per image read (its stated seconds, a bound) against this VM's data path."""
    from analysis import fidelity
    from experiments import calibration
    paper = {d: 1e6 * calibration.paper_seconds(d, "images", "warm") / calibration.images_read(d)
             for d in ("cifar10", "mnist")}
    ours = {d: statistics.mean(fidelity.data_path_us_per_image(r) for r in had(runs(GPU_STEP_CELLS), "warm") if (
        r.dataset, r.backend) == (d, "images") and not r.read_options) for d in ("cifar10", "mnist")}
    return (f"at least {paper['cifar10'] / paper['mnist']:.1f}x as long",
            f"(its {calibration.paper_seconds('cifar10', 'images', 'warm'):.2f} s over", f"{calibration.images_read('cifar10'):,} "
            f"images read,\n{paper['cifar10']:.0f} µs, against at most {paper['mnist']:.0f} µs for MNIST's "
            f"{calibration.images_read('mnist'):,} in {calibration.paper_seconds('mnist', 'images', 'warm'):g} s)", f"this VM's data path {ours['cifar10'] / ours['mnist']:.1f}x "
            f"({ours['cifar10']:.1f} and\n{ours['mnist']:.1f} µs")


@claim
def emulation_committed_vm():
    return (f"ran these cells\nin {mean_wall('cifar10', 'images', 'warm'):.1f} and "
            f"{mean_wall('mnist', 'images', 'warm'):.1f} s")


DATA_PATH = f"{catalogue.relative('ci-2core')}/benchmarks/data_path.json"
BACKEND_LABELS = {"lmdb": "LMDB", "leveldb": "LevelDB", "hdf5": "HDF5", "images": "image files", "pymem": "pymem",
                  "cppmem": "cppmem"}


@claim
def emulation_h100_eats():
    """Images/s the fitted emulated H100 eats per net, and what benchmarks/data_path.py held them against then."""
    from data_prep import datasets
    from experiments import accelerators
    eats = {}
    for d in LABELS:
        model = datasets.get(d).model
        eats[d] = model.batch * 1000 / accelerators.from_profile("h100", model).ms_per_iteration
    cells = json.loads((ROOT / DATA_PATH).read_text())["cells"]
    return (f"LeNet eats {hundreds(eats['mnist'])} images/s,\ncifar10_quick {hundreds(eats['cifar10'])}, CaffeNet "
            f"{hundreds(eats['imagenet'])} (before the fit: {hundreds(cells['mnist/lmdb/warm']['need'])} and "
            f"{hundreds(cells['cifar10/lmdb/warm']['need'])})")


@claim
def emulation_data_path_table():
    """benchmarks/data_path.py's rates (0 ms accelerator), images/s: median (range) of its rounds, warm and cold."""
    cells = json.loads((ROOT / DATA_PATH).read_text())["cells"]
    rate = lambda c: f"{hundreds(c['median'])} ({span(c['all'], hundreds)})"  # noqa: E731
    out = []
    for d in ("mnist", "cifar10"):
        for b, label in BACKEND_LABELS.items():
            out.append(f"| {label} | {rate(cells[f'{d}/{b}/warm'])} | {rate(cells[f'{d}/{b}/cold'])} |")
            if b == "hdf5":
                out.append(f"its host copies **no** (AU {matrix_au(H100, d, b):.0%})")
            if (d, b) == ("mnist", "images"):
                out.append(data_path_on_paper(cells[f"{d}/{b}/warm"]["median"], d))
    return tuple(out)


def matrix_au(folder, dataset, backend, cache="warm"):
    return statistics.mean(r.au for r in had(runs(folder), cache) if (r.dataset, r.backend) == (dataset, backend))


def data_path_on_paper(delivered, dataset):
    """How far a data-path rate clears 0.90 of what the fitted emulated H100 eats, and what the two matrices
    measured (the Intel Xeon's before the calibration, the AMD EPYC's after)."""
    from data_prep import datasets
    from experiments import accelerators
    model = datasets.get(dataset).model
    needed = 0.90 * model.batch * 1000 / accelerators.from_profile("h100", model).ms_per_iteration
    return (f"on paper by {100 * (delivered / needed - 1):.1f}% ({hundreds(delivered)} against {thousands(needed)} "
            f"needed), in the matrix **no** (AU {matrix_au(H100_BEFORE, dataset, 'images'):.0%} on that Xeon, "
            f"{matrix_au(H100, dataset, 'images'):.0%} on the EPYC)")


# -- constants the prose states: checked against the code that has them --------------------------

def patch_constant(name):
    """A constant of this project's Caffe patches (the last patch to set it), e.g. kStalledMs."""
    import re
    found = [m.group(1) for p in sorted((ROOT / "caffe" / "patches").glob("*.patch"))
             for m in re.finditer(rf"const int(?:64_t)? {name} = (\d+);", p.read_text())]
    return int(found[-1])


@claim
def architecture_ring_stall():
    return f"stops the others after {patch_constant('kStalledMs') / 1000:g} s"


@claim
def lmdb_ring_waits():
    return (f"the {patch_constant('kLeftBehindMs') / 1000:g} s and the {patch_constant('kStalledMs') / 1000:g} s "
            "are the waiting solver's own wait")


@claim
def lmdb_ring_takeover():
    """How soon another solver takes a killed writer's role: two of its looks for the writer's lock."""
    return f"within {2 * patch_constant('kWaitMs')} ms"


@claim
def lmdb_ring_pauses():
    return (f"a step of its {patch_constant('kWaitMs')} ms wait loop",
            f"still stops them after {patch_constant('kStalledMs') / 1000:g} s")


@claim
def faults_cache_thresholds():
    from experiments.record import COLD_AT_MOST, WARM_AT_LEAST
    return f"(warm needs >= {WARM_AT_LEAST:.0%}, cold <= {COLD_AT_MOST:.0%})"


# -- docs/redis.md, the rest of its numbers -----------------------------------------------------

REDIS_READER = catalogue.relative("ci-2core-redis-reader")
REDIS_PATH = f"{catalogue.relative('ci-2core')}/benchmarks"


def below_lmdb(folder, *cell):
    """How far a Redis training cell's median AU is below its folder's LMDB reference, as a share of it."""
    lmdb = median_au(folder, "imagenet", "lmdb")
    return (lmdb - median_au(folder, "imagenet", "redis", *cell)) / lmdb


@claim
def redis_intro_round_trip():
    """CIFAR-10 from Redis through the delay proxy against LMDB, the I/O thread's training runs."""
    rtt = max(r.location["rtt_ms_asked"] or 0 for r in runs(REDIS_IO_THREAD) if r.backend == "redis")
    ratio = median_au(REDIS_IO_THREAD, "cifar10", "redis", 16384, "thread", rtt) / median_au(REDIS_IO_THREAD, "cifar10", "lmdb")
    return f"Redis fed CIFAR-10 {'as well as' if 1 - ratio <= 0.05 else 'less well than'} LMDB at a {rtt:g} ms round trip"


@claim
def redis_io_thread_earlier():
    """The inline reader's ImageNet cells on the lean reader's VM (1,024 in flight, direct / 10 ms)."""
    return " / ".join(f"{median_au(REDIS_LEAN, 'imagenet', 'redis', 1024, None, rtt):.1%}" for rtt in (None, 10.0))


@claim
def redis_proxy_ab():
    """The delay proxy before and after its chunk reuse (the source digests its NOTES.md names), ImageNet
    at 10 ms against LMDB; and the I/O thread's cell of the same kind (128 in flight) on its own host."""
    folder = catalogue.relative("ci-2core-emulated-h100-redis-proxy-ab")
    lmdb = median_au(folder, "imagenet", "lmdb")
    au = {name: statistics.median(r.au for r in warm_cell(folder, "imagenet", "redis", rtt_ms=10.0)[0]
                                  if r.location.get("delay_proxy_source") == digest)
          for name, digest in (("old", "d4962d9014cf3a7a"), ("new", "d38f5ccf8425b696"))}
    return (f"{au['old']:.1%} (old) and {au['new']:.1%} (new) against {lmdb:.1%} ({(lmdb - au['old']) / lmdb:.1%}\n"
            f"and {(lmdb - au['new']) / lmdb:.1%} below",
            f"({below_lmdb(REDIS_IO_THREAD, 128, 'thread', 10.0):.1%} below)")


def reader_rounds(name):
    """{cell: its rounds} of a benchmarks/redis_reader.py JSON in the catalogue's ci-2core-redis-reader folder."""
    return json.loads((ROOT / REDIS_READER / f"{name}.json").read_text())["rounds"]


def reader_median(name, cell, what):
    return statistics.median(r[what] for r in reader_rounds(name)[cell])


@claim
def redis_server_io_threads():
    """The servers' own I/O threads: records/s with io-threads 2 over io-threads 1, each Redis cell."""
    ratios = [reader_median(f"server-io-threads-{d}", f"{d}/{cell} thread io-threads 2", "images_per_s")
              / reader_median(f"server-io-threads-{d}", f"{d}/{cell} thread io-threads 1", "images_per_s")
              for d in ("cifar10", "imagenet") for cell in ("direct", "10 ms")]
    return f"({span(ratios, lambda x: f'{x:.2f}')}x the records/s"


def path_cells(name):
    """{cell: images/s} and the measured round trips of a benchmarks/redis_path.py JSON of the first CI machine."""
    found = json.loads((ROOT / REDIS_PATH / f"redis_path_{name}.json").read_text())
    return found["cells"], found["rtt_ms_measured"], found["seconds"]


@claim
def redis_path_setup():
    return f"batch 16,\nreading the train split, one process per cell, {path_cells('cifar10')[2]:g} s after warm-up"


def path_row(cells, dataset, rtt, depths):
    """One row of a redis_path table: images/s, key order / arrival order (one in flight: key order only)."""
    def cell(depth):
        key = f"{dataset}/raw/{rtt:.1f}/{depth}"
        if f"{key}/in" not in cells:
            return ""
        return f"{cells[key + '/in']:,.0f}" + ("" if depth == 1 else f" / {cells[key + '/ooo']:,.0f}")
    return " | ".join(cell(d) for d in depths)


@claim
def redis_path_cifar10_table():
    """CIFAR-10's raw Datums through the proxy, by round trip and requests in flight (16,384: the deep run)."""
    cells, measured, _ = path_cells("cifar10")
    deep = path_cells("cifar10_deep")[0]
    rows = []
    for rtt in (0, 10, 50, 100):
        head = f"0 ms ({measured['0.0']:.1f} measured)" if rtt == 0 else f"{rtt} ms"
        rows += [f"| {head} | {path_row(cells, 'cifar10', rtt, (1, 16, 128, 1024))} |", path_row(deep, "cifar10", rtt, (16384,))]
    return tuple(rows)


@claim
def redis_path_imagenet_table():
    cells = path_cells("imagenet")[0]
    return tuple(part for rtt in (0, 10, 50, 100)
                 for part in (f"| {rtt} ms | {path_row(cells, 'imagenet', rtt, (1, 16, 128))} |",
                              path_row(cells, "imagenet", rtt, (1024,))))


def reader_ratio(name, cell, what, against="lmdb"):
    """A redis_reader.py cell's median `what` over its LMDB reference's (or `against`'s), same JSON."""
    dataset = cell.split("/")[0]
    return reader_median(name, cell, what) / reader_median(name, f"{dataset}/{against}", what)


@claim
def redis_lean_reader_table():
    """The prefetch thread's CPU per record, Redis over LMDB, before and after the lean reader (128 in
    flight), and after it at the training runs' depths."""
    deeper = {"cifar10": ("after-lean-reader-depth16384-cifar10", 16384),
              "imagenet": ("after-lean-reader-depth1024-imagenet", 1024)}
    parts = []
    for dataset in ("cifar10", "imagenet"):
        for cell in ("direct", "10 ms"):
            key = f"{dataset}/{cell}"
            parts += [f"| {LABELS[dataset]}, {cell} |", f"{reader_ratio('before-lean-reader', key, 'prefetch_us'):.2f}x"]
            if key == "cifar10/direct":
                parts.append(f"({reader_median('before-lean-reader', key, 'prefetch_us'):.1f} us against "
                             f"{reader_median('before-lean-reader', 'cifar10/lmdb', 'prefetch_us'):.1f})")
            parts.append(f"{reader_ratio('after-lean-reader', key, 'prefetch_us'):.2f}x")
            if key == "cifar10/direct":
                parts.append(f"({reader_median('after-lean-reader', key, 'prefetch_us'):.1f} against "
                             f"{reader_median('after-lean-reader', 'cifar10/lmdb', 'prefetch_us'):.1f})")
            else:
                name, depth = deeper[dataset]
                parts += [f"{reader_ratio(name, key, 'prefetch_us'):.2f}x", f"with {depth:,}"]
    return tuple(parts)


@claim
def redis_lean_reader_refactored():
    ratios = [reader_ratio("after-review-refactor", f"{d}/{c}", "prefetch_us")
              for d in ("cifar10", "imagenet") for c in ("direct", "10 ms")]
    return ", ".join(f"{x:.2f}x" for x in ratios)


@claim
def redis_lean_goal():
    """The lean reader's ImageNet runs from Redis: the prefetch thread's CPU-s against the solver's seconds."""
    from analysis import capacity
    mine = [r for rtt in (None, 10.0) for r in warm_cell(REDIS_LEAN, "imagenet", "redis", 1024, None, rtt)[0]]
    return ("(AU from Redis at 10 ms within 5% of LMDB warm)",
            f"({span([capacity.prefetch_cpu(r) for r in mine], lambda x: f'{x:.0f}')} CPU-s in\n"
            f"{span([r.solver_seconds for r in mine], lambda x: f'{x:.0f}')} s), and at 10 ms")


IO_THREAD_READER = {"cifar10": "io-thread-cifar10-250k", "imagenet": "io-thread-imagenet-12800"}


@claim
def redis_io_thread_reader_table():
    """The I/O thread side by side with the inline reader: prefetch thread's CPU, the data path's CPU and
    records/s per record, each over LMDB's in the same JSON (128 in flight)."""
    parts = []
    for dataset in ("cifar10", "imagenet"):
        for cell in ("direct", "10 ms"):
            parts.append(f"| {LABELS[dataset]}, {cell} |")
            for what in ("prefetch_us", "data_path_us", "images_per_s"):
                parts += [f"{reader_ratio(IO_THREAD_READER[dataset], f'{dataset}/{cell} {io}', what):.2f}x"
                          for io in ("thread", "inline")]
    return tuple(parts)


@claim
def redis_io_thread_reader_says():
    """What the I/O thread moved: CIFAR-10 at 10 ms at 128 and at 16,384 in flight, the data path's
    extra over inline, and the records/s of thread against inline."""
    deep = "io-thread-cifar10-depth16384"
    extra = [reader_median(IO_THREAD_READER[d], f"{d}/{c} thread", "data_path_us")
             / reader_median(IO_THREAD_READER[d], f"{d}/{c} inline", "data_path_us") - 1
             for d in ("cifar10", "imagenet") for c in ("direct", "10 ms")]
    imagenet = lambda c, io: reader_median(IO_THREAD_READER["imagenet"], f"imagenet/{c} {io}", "images_per_s")  # noqa: E731
    return (f"({reader_ratio(IO_THREAD_READER['cifar10'], 'cifar10/10 ms thread', 'prefetch_us'):.2f}x\nat 128 in flight",
            f"{reader_ratio(deep, 'cifar10/10 ms thread', 'prefetch_us'):.2f}x at 10 ms and "
            f"{reader_ratio(deep, 'cifar10/direct thread', 'prefetch_us'):.2f}x direct",
            f"spends {percents(extra)} more",
            f"(ImageNet direct: {imagenet('direct', 'thread') / imagenet('direct', 'inline'):.2f}x the records/s)",
            f"delivers {imagenet('10 ms', 'inline') / imagenet('10 ms', 'thread'):.2f}x")



def median_of(cells_by_round, key):
    return statistics.median(cells[key] for cells in cells_by_round)


def path_rounds(pattern):
    """The cells of each round of a redis_path.py JSON (`pattern` with {round}) under the reader's folder."""
    return [json.loads((ROOT / REDIS_READER / f"{pattern.format(round=i)}.json").read_text())
            for i in (1, 2, 3)]


@claim
def redis_path_png():
    """PNG-encoded Datums through the proxy: decode-bound at every round trip."""
    imagenet, measured, _ = path_cells("imagenet")
    cifar10 = path_cells("cifar10")[0]
    decoded = [v for k, v in imagenet.items() if "/png/" in k and k.split("/")[3] in ("128", "1024")]
    cifar_0 = [v for k, v in cifar10.items() if k.startswith("cifar10/png/0.0/") and k.split("/")[3] != "1"]
    far = lambda cells, d: cells[f"{d}/png/100.0/1024/in"] / cells[f"{d}/png/0.0/1024/in"]  # noqa: E731
    return (f"ImageNet\n~{round(statistics.median(decoded), -2):,.0f} images/s at every round trip from 128 in flight on "
            f"(100 ms: {far(imagenet, 'imagenet'):.2f} of 0 ms); CIFAR-10\n~{round(statistics.median(cifar_0), -3):,.0f}, "
            f"{far(cifar10, 'cifar10'):.2f} of it at 100 ms with 1,024 in flight",
            f"the 1 ms row ({measured['1.0']:.1f} ms measured")


@claim
def redis_path_says():
    """What the first redis_path tables say: the rate without prefetching, the window that covers the
    bandwidth-delay product (ImageNet: 3 more rounds at 1,024 in flight), the proxy's own cost, LMDB."""
    cifar10, imagenet = path_cells("cifar10")[0], path_cells("imagenet")[0]
    deep = path_cells("cifar10_deep")[0]
    rounds = [r["cells"] for r in (json.loads((ROOT / REDIS_PATH / f"redis_path_imagenet_round{i}.json").read_text())
                                   for i in (1, 2, 3))]
    near, far = (median_of(rounds, f"imagenet/raw/{rtt}/1024/in") for rtt in ("0.0", "100.0"))
    near_ooo, far_ooo = (median_of(rounds, f"imagenet/raw/{rtt}/1024/ooo") for rtt in ("0.0", "100.0"))
    window = round(near, -2)
    cifar_rate = round(statistics.median(v for k, v in {**cifar10, **deep}.items()
                                         if k.startswith("cifar10/raw/0.0/") and k.split("/")[3] != "1"), -4)
    deep_ratio = [deep[f"cifar10/raw/100.0/16384/{o}"] / deep[f"cifar10/raw/0.0/16384/{o}"] for o in ("in", "ooo")]
    direct = [cifar10["cifar10/raw/direct/1024/in"], deep["cifar10/raw/direct/16384/in"]]
    proxied = [cifar10["cifar10/raw/0.0/1024/in"], deep["cifar10/raw/0.0/16384/in"]]
    return (f"(1 request at 100 ms: {cifar10['cifar10/raw/100.0/1/in']:.0f}\nimages/s; 128: "
            f"{cifar10['cifar10/raw/100.0/128/ooo']:,.0f})",
            f"ImageNet needs ~{window:,.0f} x 0.1 s = {window * 0.1:,.0f} records in flight (1,024 at 100 ms",
            f"{far:,.0f} against {near:,.0f} images/s at 0 ms in key order, **{far / near:.2f}**, "
            f"goal {'met' if far / near >= 0.9 else 'not met'};\n{far_ooo:,.0f} against {near_ooo:,.0f} out of order, "
            f"{far_ooo / near_ooo:.2f}; 4,096 in flight is "
            f"{'slower' if median_of(rounds, 'imagenet/raw/100.0/4096/in') < far else 'faster'}",
            f"at ~{cifar_rate:,.0f}/s need ~{cifar_rate * 0.1:,.0f} (16,384 at 100 ms: "
            f"{span(deep_ratio, lambda x: f'{x:.2f}')} of 0 ms",
            f"cost at 0 ms is within the noise (direct {span(direct, count)} against {span(proxied, count)} through it",
            f"{imagenet['imagenet/raw/direct/1024/in']:,.0f} against {imagenet['imagenet/raw/0.0/1024/in']:,.0f} "
            "for ImageNet",
            f"gives {thousands(cifar10['cifar10/raw/lmdb'])} (CIFAR-10) and {round(imagenet['imagenet/raw/lmdb'], -1):,.0f} "
            "(ImageNet, partly cached) images/s")


@claim
def redis_path_today():
    """The same net with the I/O-thread reader and the proxy's chunk reuse, 3 runs per cell (medians)."""
    imagenet = [r["cells"] for r in path_rounds("redis-path-imagenet-1024-round{round}")]
    cifar10 = [r["cells"] for r in path_rounds("redis-path-cifar10-16384-round{round}")]
    wider = [r["cells"] for r in path_rounds("redis-path-cifar10-32768-65536-round{round}")]
    near, far = (median_of(imagenet, f"imagenet/raw/{rtt}/1024/in") for rtt in ("0.0", "100.0"))
    ratio = lambda rounds, depth: (median_of(rounds, f"cifar10/raw/100.0/{depth}/in")  # noqa: E731
                                   / median_of(rounds, f"cifar10/raw/0.0/{depth}/in"))
    return (f"ImageNet with 1,024 in flight {near:,.0f} images/s at 0 ms\nand {far:,.0f} at 100 ms, **{far / near:.2f}**",
            f"16,384 in flight caps 100 ms at {16384 / 0.1:,.0f}/s ({ratio(cifar10, 16384):.2f} measured) and 32,768\n"
            f"gives **{ratio(wider, 32768):.2f}**")


@claim
def redis_path_arrivals():
    """Arrival order with a deep window: the reader's scan of its arrivals (perf, before the change) and
    the images/s with the change against the build before it (medians of 3 rounds)."""
    perf = (ROOT / REDIS_READER / "perf-reader-out-of-order-65536-before-0017.txt").read_text()
    scan = sum(float(line.split("%")[0]) for line in perf.splitlines()
               if line.rstrip().endswith(("RedisCursor::TakeReady", "RedisCursor::NextIsHere")))
    builds = {key: [r["cells"] for r in path_rounds(f"redis-path-cifar10-ooo-{key}-round{{round}}")]
              for key in ("b590be15b27251d2", "45c3ba0db7bbc083")}
    gain = lambda rtt: (median_of(builds["45c3ba0db7bbc083"], f"cifar10/raw/{rtt}/65536/ooo")  # noqa: E731
                        / median_of(builds["b590be15b27251d2"], f"cifar10/raw/{rtt}/65536/ooo"))
    return (f"(perf: {scan:.0f}% of its CPU at 65,536 in flight)",
            f"gave {gain('0.0'):.2f}x the images/s at 0 ms and {gain('100.0'):.2f}x at 100 ms\nwith 65,536 in flight")


@claim
def redis_path_opened():
    """Once the window is open (warm-up until the rate stops rising; the round trip on the requests):
    100 ms over 0 ms, medians of 3 rounds, each round's ratio, and the warm-ups."""
    legs = {d: path_rounds(f"redis-path-{d}-legs-round{{round}}") for d in ("cifar10", "imagenet")}
    cells = {d: [r["cells"] for r in rounds] for d, rounds in legs.items()}

    def at(d, rtt, depth):
        return median_of(cells[d], f"{d}/raw/{rtt}/{depth}/in")
    each = [r[f"{d}/raw/100.0-requests/{depth}/in"] / r[f"{d}/raw/0.0/{depth}/in"]
            for d, depth in (("cifar10", 32768), ("cifar10", 65536), ("imagenet", 1024)) for r in cells[d]]
    warm_up = {rtt: [v for rounds in legs.values() for r in rounds for k, v in r["warm_up_seconds"].items()
                     if k.split("/")[2] == rtt] for rtt in ("0.0", "100.0-requests")}
    seconds = span([r["seconds"] for rounds in legs.values() for r in rounds], lambda x: f"{x:g}")
    return (f"{seconds}-s cells",
            f"CIFAR-10 **{at('cifar10', '100.0-requests', 32768) / at('cifar10', '0.0', 32768):.2f}** of 0 ms\n"
            f"with 32,768 in flight ({at('cifar10', '100.0-requests', 32768):,.0f} against "
            f"{at('cifar10', '0.0', 32768):,.0f} images/s) and "
            f"**{at('cifar10', '100.0-requests', 65536) / at('cifar10', '0.0', 65536):.2f}** with 65,536; ImageNet\n"
            f"**{at('imagenet', '100.0-requests', 1024) / at('imagenet', '0.0', 1024):.2f}** with 1,024 "
            f"({at('imagenet', '100.0-requests', 1024):,.0f} against {at('imagenet', '0.0', 1024):,.0f}); every round "
            f">= {'0.90' if min(each) >= 0.9 else f'{min(each):.2f}'}",
            f"(CIFAR-10 at 100 ms: >= 32,768 in flight; 16,384 caps\nit at {16384 / 0.1:,.0f}/s)",
            f"(warm-up {span(warm_up['100.0-requests'], lambda x: f'{x:.1f}')} s against "
            f"{span(warm_up['0.0'], lambda x: f'{x:.1f}')} s)")


# -- docs/emulation.md, the rest of its numbers --------------------------------------------------

def paper_s(dataset, backend, cache):
    from experiments import calibration
    return calibration.paper_seconds(dataset, backend, cache)


def disk_fit_ratio():
    """The fitted IOPS' runs of MNIST's image files cold: (their mean seconds over the paper's, n)."""
    riops = machines.get("paper2016").limits["riops"]
    at = [r for r in disk_fit_runs(kept=True) if r.limits["riops"] == riops]
    return statistics.mean(r.wall_seconds for r in at) / paper_s("mnist", "images", "cold"), len(at)


@claim
def emulation_fitted_on_table():
    """What each fitted parameter is fitted on: the paper's seconds, and how our runs at the fitted IOPS compare."""
    ratio, n = disk_fit_ratio()
    return (f"the paper's fastest MNIST time (~{paper_s('mnist', 'images', 'warm'):.0f} s) / CIFAR-10 LevelDB warm "
            f"({paper_s('cifar10', 'leveldb', 'warm'):.2f} s)",
            f"(our runs at {machines.get('paper2016').limits['riops']}: {ratio:.2f}x the paper, n = {n})",
            f"the paper's MNIST image files cold ({paper_s('mnist', 'images', 'cold'):.2f} s)")


def host_checks():
    """{host letter: its check} of the catalogue's host-check folder (one check per host so far), lettered as
    analysis/hosts_table.py letters them."""
    from analysis import hosts_table
    return {chr(ord("A") + i): host[-1] for i, host in enumerate(hosts_table.group_hosts(hosts_table.load_checks()))}


# the checks the prose names, by folder (hosts_table letters hosts by their folders' order, so a
# new check moves the letters)
FIRST_CHECK, CLONE_CHECK = "AMD-EPYC-2c-probe728", "AMD-EPYC-2c-probe589"
CPUSET_CHECK, QUOTA_CHECK = "AMD-EPYC-1c-cpuset-probe638", "AMD-EPYC-0.5c-quota-probe277"


def letter_of(folder):
    """The letter hosts_table gives the host whose checks include the check in `folder`."""
    from analysis import hosts_table
    return next(chr(ord("A") + i) for i, host in enumerate(hosts_table.group_hosts(hosts_table.load_checks()))
                if any(c["folder"] == folder for c in host))


def host_rows(letter, data_path=True):
    from analysis import hosts_table
    return [r for r in hosts_table.rows(hosts_table.load_checks()) if r["host"] == letter and r["data_path"] == data_path]


def host_capacity(letter):
    """A host's capacity row, its checks taken together: the median of each figure over its checks
    (one check: its own row)."""
    from analysis import hosts_table
    found = [r for r in hosts_table.capacity_rows(hosts_table.load_checks()) if r["label"].startswith(f"{letter}:")]
    if len(found) == 1:
        return found[0]
    together = {k: [r[k] for r in found if r[k] is not None] for k in ("predicted", "measured", "ratio")}
    return dict(found[-1], **{k: statistics.median(v) if v else None for k, v in together.items()})


def check_rows(letter, data_path=True):
    """The data-path-bound (or compute-bound) rows of a host's check as its host-check.json has them."""
    cells = {r["cell"] for r in host_rows(letter, data_path)}
    return [r for r in host_checks()[letter]["rows"] if r["cell"] in cells]


@claim
def emulation_hosts_first_check():
    """The first check of the 2-core VM: the data-path-bound cells against their prediction and reference."""
    first = letter_of(FIRST_CHECK)
    rows, own = host_rows(first), check_rows(first)
    return (f"came out {percents([r['ratio'] - 1 for r in rows])} slower than\npredicted on the first check of the "
            f"2-core VM ({first})",
            f"({span([r['measured_over_reference'] for r in own], lambda x: f'{x:.2f}')} of it)",
            f"the whole probe ratio ({span([r['probe_ratio'] for r in own], lambda x: f'{x:.2f}')})",
            f"predicted {1 / host_capacity(first)['ratio']:.1f}x too high there")


@claim
def emulation_hosts_clone_check():
    """The 2-core VM checked again from a fresh clone, against its first check."""
    from analysis import hosts_table
    checks = host_checks()
    first, clone = letter_of(FIRST_CHECK), letter_of(CLONE_CHECK)
    lower = 1 - hosts_table.pixels(checks[clone]) / hosts_table.pixels(checks[first])
    c = [abs(r["ratio"] - 1) for r in host_rows(clone) + host_rows(clone, False)]
    return (f"({clone}, probes {lower:.0%} lower than {first}'s) every cell came within {max(c):.0%} of its prediction "
            f"and the N allowed\n{host_capacity(clone)['ratio']:.2f}x of it")


@claim
def emulation_hosts_other_checks():
    """Two more checks of the same VM under limits: a cpuset of one core, half a core's quota."""
    from monitor import cpu_probe
    checks = host_checks()
    cpuset, quota = letter_of(CPUSET_CHECK), letter_of(QUOTA_CHECK)
    b = [r["ratio"] for r in host_rows(cpuset) + host_rows(cpuset, False)]
    files = [r for r in check_rows(quota) if r["cell"].endswith("-images")]
    ratios_a = {r["cell"]: r["ratio"] for r in host_rows(quota)}
    spread_a = cpu_probe.spread([p["images_per_second"] for p in checks[quota]["probes"]])
    return (f"({cpuset}) every cell held ({span(b, lambda x: f'{x:.2f}')})",
            f"({host_capacity(cpuset)['measured']:.1f} measured, {host_capacity(cpuset)['predicted']:.1f}\npredicted)",
            f"({quota}) the image-file cells ran {span([r['measured_over_reference'] for r in files])}x longer",
            f"({span([ratios_a[r['cell']] for r in files], lambda x: f'{x:.2f}')}), but ImageNet LMDB ran "
            f"{ratios_a['imagenet-lmdb'] - 1:.0%} longer than predicted",
            f"the probe itself spreads {spread_a:.0%} over three runs")


@claim
def emulation_caffe_time_before():
    """The h100 profile's LeNet before the fit (`caffe time`) and after it (the real LMDB run)."""
    from experiments import accelerators
    timed = json.loads((ROOT / f"{catalogue.relative('h100')}/benchmarks/gpu_time.json").read_text())["nets"]["mnist"]
    return (f"`caffe time`'s {timed['ms_per_iteration']:.3f} ms for LeNet",
            f"solved at {accelerators.profiles()['h100']['lenet']['train_ms']:.3f} ms per iteration")


@claim
def emulation_profiles_fitted_table():
    return (f"the paper's fastest MNIST backends (~{paper_s('mnist', 'images', 'warm'):.0f} s)",
            f"its CIFAR-10 LevelDB warm ({paper_s('cifar10', 'leveldb', 'warm'):.2f} s)")


@claim
def emulation_quota_vm():
    """The pixel probe of the runs of the CPU-quota table (each record's own)."""
    probes = [r.environment["cpu_probe"]["images_per_second"]
              for r in runs(catalogue.relative("ci-2core-paper2016-cpu-quota"))]
    return f"pixel probe {span(probes, lambda x: f'{x:.0f}')} images/s per core"


@claim
def emulation_io_limit_table():
    """benchmarks/io_limit.py on the H100 machine: a cold read of 3,000 small files, unlimited and limited."""
    rows = []
    for name in ("paper2016", "riops1000"):
        found = json.loads((ROOT / f"{catalogue.relative('h100')}/benchmarks/io_limit_{name}.json").read_text())
        rows.append(f"{found['unlimited']['seconds']:.2f} s | {found['limited']['seconds']:.3g} s | "
                    f"{found['slowdown']:.1f}x | {found['achieved_riops']:.0f}")
    return tuple(rows)


@claim
def emulation_two_misses():
    return (f"CIFAR-10 HDF5 {paper_ratio('cifar-hdf5') - 1:.0%} longer than\nLevelDB",
            f"warm CIFAR-10 image files {paper_ratio('cifar-warm-images') - 1:.0%}\nlonger than LMDB")


@claim
def emulation_probe_seconds():
    """How long the CPU probe times its pixel work (each probe's record), and its per-file work (half of that:
    monitor/cpu_probe.cpp)."""
    from analysis import hosts_table
    seconds = statistics.median(p["seconds"] for c in hosts_table.load_checks() for p in c["probes"])
    return f"work, ~{round(seconds):.0f} s)", f"close, ~{round(seconds) / 2:g} s)"


def paper2016_us_per_image(dataset):
    """Mean µs of data-path CPU per image of a 2016 cell's image files warm (fidelity.data_path_us_per_image)."""
    from analysis import fidelity
    return statistics.mean(fidelity.data_path_us_per_image(r) for r in had(paper2016_runs(dataset, "images"), "warm"))


def fastest_wall_2016(dataset, but):
    """The least mean wall seconds, warm, of the 2016 cells of `dataset` over every registered backend that
    has runs there but `but`."""
    from data_prep import backends
    return min(mean_wall(dataset, b, "warm") for b in backends.REGISTRY
               if b != but and had(paper2016_runs(dataset, b), "warm"))


def hdf5_beyond():
    """{dataset: (the paper's HDF5 seconds beyond its fastest backend, ours beyond our fastest)}, warm; MNIST's
    paper side from its ratio over the fitted ~20 s (the paper gives no exact seconds there)."""
    from experiments import calibration
    hdf5 = "hdf5"
    paper_fastest = min(row["mean"] for row in calibration.REFERENCE["training_seconds"]
                        if (row["dataset"], row["cache"]) == ("cifar10", "warm") and row["backend"] != hdf5)
    return {"mnist": ((paper_ratio("mnist-hdf5") - 1) * calibration.PAPER_FASTEST_MNIST_S,
                      mean_wall("mnist", hdf5, "warm") - fastest_wall_2016("mnist", hdf5)),
            "cifar10": (paper_s("cifar10", hdf5, "warm") - paper_fastest,
                        mean_wall("cifar10", hdf5, "warm") - fastest_wall_2016("cifar10", hdf5))}


@claim
def emulation_paper_host_table():
    """The paper's host against this VM's emulated 2016 machine: µs per image of the image files, µs per HDF5
    row beyond the fastest option."""
    from experiments import calibration
    rows = {d: calibration.images_read(d) for d in ("mnist", "cifar10")}
    paper = {d: 1e6 * calibration.paper_seconds(d, "images", "warm") / rows[d] for d in rows}
    ours = {d: paper2016_us_per_image(d) for d in rows}
    beyond = hdf5_beyond()
    hdf5 = {d: tuple(1e6 * x / rows[d] for x in beyond[d]) for d in rows}
    return (f"at most {paper['mnist']:.0f} ({paper_s('mnist', 'images', 'warm'):.2f} s over {rows['mnist']:,} "
            f"images, under the compute) | {ours['mnist']:.1f} (prefetch CPU) | at most {paper['mnist'] / ours['mnist']:.1f} |",
            f"{paper['cifar10']:.0f} ({paper_s('cifar10', 'images', 'warm'):.2f} s over {rows['cifar10']:,}, "
            f"data-path-bound) | {ours['cifar10']:.1f} | {paper['cifar10'] / ours['cifar10']:.1f} |",
            f"{hdf5['mnist'][0]:.1f} ({paper_ratio('mnist-hdf5') - 1:.0%} of ~20 s) | {hdf5['mnist'][1]:.1f} | "
            f"{hdf5['mnist'][0] / hdf5['mnist'][1]:.1f} (fitted) |",
            f"{hdf5['cifar10'][0]:.1f} ({beyond['cifar10'][0]:.2f} s) | "
            f"{hdf5['cifar10'][1]:.1f} ({beyond['cifar10'][1]:.2f} s) | "
            f"{hdf5['cifar10'][0] / hdf5['cifar10'][1]:.1f} |")


@claim
def emulation_hdf5_copies_ask():
    """What the paper's two HDF5 cells ask of a copy's latency and bandwidth (the profile's two terms solved on
    both), and why a slower CPU cannot stand in for them."""
    from experiments import accelerators, calibration
    (mc, mb), (cc, cb) = (calibration.hdf5_copies(net, calibration.paper_work(net)) for net in ("lenet", "cifar10_quick"))
    beyond = hdf5_beyond()
    (me, _), (ce, ours) = beyond["mnist"], beyond["cifar10"]
    per_byte = (ce - me * cc / mc) / (cb - mb * cc / mc)  # seconds per byte, from the two cells' equations
    latency = (me - mb * per_byte) / mc
    copies = accelerators.profiles()["titanx2016"]["host_copies"]
    gap = ce - ours
    cpu = max(r.process["thread_cpu_seconds"]["solver (main thread)"]
              for r in had(paper2016_runs("cifar10", "hdf5"), "warm"))
    slower = (cpu + gap) / cpu
    mnist = paper2016_us_per_image("mnist")
    return (f"charges each copy {copies['latency_us']} µs (fitted on MNIST HDF5) plus its bytes at PCIe 3.0's "
            f"{copies['gbps']} GB/s",
            f"ask {1e6 * latency:.1f} µs per copy and {1e-9 / per_byte:.1f} GB/s: copies\n"
            f"{1e-9 / per_byte / copies['gbps']:.2f} of the link's peak per byte",
            f"cannot make up the {gap:.1f} s:\nour CIFAR-10 HDF5 runs spent at most {cpu:.1f} s of solver-thread CPU",
            f"would have\nto be {slower:.1f}x slower, and then MNIST's files ({mnist:.1f} µs each here) would have taken "
            f"~{slower * mnist * calibration.images_read('mnist') / 1e6:.0f} s warm, not\nthe paper's "
            f"{calibration.paper_seconds('mnist', 'images', 'warm'):.2f} s")


@claim
def emulation_files_k():
    """The image files' CPU per image: the paper's CIFAR-10 over MNIST (a bound), ours, the k that fits each,
    and MNIST at the quota that fits CIFAR-10."""
    from experiments import calibration
    paper = {d: 1e6 * paper_s(d, "images", "warm") / calibration.images_read(d) for d in ("mnist", "cifar10")}
    ours = {d: paper2016_us_per_image(d) for d in paper}
    walls = {(r.dataset, (r.limits or {}).get("cpu_quota")): r.wall_seconds
             for r in runs(catalogue.relative("ci-2core-paper2016-cpu-quota"))}
    fits = min((q for d, q in walls if d == "cifar10" and q),  # the quota closest to the paper's CIFAR-10 files
               key=lambda q: abs(walls["cifar10", q] / paper_s("cifar10", "images", "warm") - 1))
    return (f"at least\n{paper['cifar10'] / paper['mnist']:.1f}x its MNIST files per image; ours "
            f"{ours['cifar10'] / ours['mnist']:.1f}x. A CPU k times slower than this VM's fits CIFAR-10 at\n"
            f"k = {paper['cifar10'] / ours['cifar10']:.1f} and MNIST only at k <= {paper['mnist'] / ours['mnist']:.1f}",
            f"puts MNIST's at {walls['mnist', fits] / paper_s('mnist', 'images', 'warm'):.2f}x the paper")


# -- docs/running.md, the rest of its numbers -----------------------------------------------------

BENCHMARKS = f"{catalogue.relative('ci-2core')}/benchmarks"


@claim
def running_convert_speed():
    """benchmarks/convert_speed.py's own reports: Caffe's convert_imageset against data_prep, per image count."""
    import re
    found = {}
    for folder in (BENCHMARKS, f"{catalogue.relative('h100')}/benchmarks"):
        text = (ROOT / folder / "convert_speed.txt").read_text()
        found[folder] = re.findall(r"(\d+) PNGs.*\n.*convert_imageset: ([\d.]+) s\s+data_prep: ([\d.]+) s"
                                   r"\s+speed-up: ([\d.]+)x", text)
    (two, one), (h100,) = found[BENCHMARKS], found[f"{catalogue.relative('h100')}/benchmarks"]
    row = lambda m: f"| {int(m[0]):,} | {m[1]} s | {m[2]} s | {m[3]}x"  # noqa: E731
    return f"{row(two)} ({one[3]}x on a {int(one[0]):,}-image run) |", f"{row(h100)} |"


@claim
def running_cold_condition():
    """What a cold run's data is held against: the paper's ImageNet over its machine's memory (Table 1 and 2),
    and MLPerf Storage's ratio (experiments/runner.py)."""
    from analysis.report import REFERENCE
    from experiments import runner
    images = next(r["size"] for r in REFERENCE["footprint"]["rows"]
                  if (r["dataset"], r["backend"]) == ("imagenet", "images"))
    ratio = float(images.split("GB")[0]) / float(REFERENCE["machine"]["memory"].split()[0])
    return (f"the paper's ImageNet was ~{ratio:.0f}x its machine's memory\nand MLPerf Storage asks >= "
            f"{runner.PAPER_DATA_OVER_MEMORY}x")


@claim
def running_records_table():
    """The record's fields that quote a setting the records hold: the reclaimer's idle age and the probe's time."""
    from analysis import hosts_table
    idle = {p["idle_seconds_at_least"] for r in runs(PAPER2016) for p in (r.environment or {}).get("proactive_reclaim") or ()
            if p.get("kind") == "DAMON pageout"}
    seconds = statistics.median(p["seconds"] for c in hosts_table.load_checks() for p in c["probes"])
    return f"idle >= {span(idle, lambda x: f'{x:g}')} s", f"~{round(seconds):.0f} s, one thread"


@claim
def running_runner_overhead():
    """benchmarks/runner_overhead.py's report: runner over bare `caffe train`, and the monitor's own CPU."""
    import re
    text = (ROOT / BENCHMARKS / "runner_overhead.txt").read_text()
    pairs = re.search(r"(\d+) pairs", text).group(1)
    median, q1, q3, lo, hi = re.search(r"per-pair ratios: ([\d.]+).*quartiles ([\d.]+)\.\.([\d.]+), "
                                       r"range ([\d.]+)\.\.([\d.]+)", text).groups()
    share, startup = re.search(r"sampling: ([\d.]+%) of one core.*plus ([\d.]+) CPU-s", text).groups()
    return (f"median of the per-pair ratios {median}, quartiles {q1}-{q3}, range {lo}-{hi}, {pairs} pairs",
            f"the monitor's own CPU while sampling: {share} of a core, plus {startup} CPU-s")


def lmdb_read_cells(read_ahead_kb):
    name = {128: "lmdb_read_ra128", 8192: "lmdb_read"}[read_ahead_kb]
    found = json.loads((ROOT / BENCHMARKS / f"{name}.json").read_text())
    assert int(found["read_ahead_kb"]) == read_ahead_kb, name
    return found["cells"]


def lmdb_read_mbps(cell, path):
    """MB/s (10^6 bytes) of a benchmarks/lmdb_read.py cell's path: its bytes over the median of its rounds."""
    return cell["bytes"] / statistics.median(cell["seconds"][path]) / 1e6


@claim
def running_lmdb_read_table():
    """The cold ImageNet pass on the 2016 disk by Caffe's stock mmap path, readahead 128 KB: MB/s, over dd, images/s."""
    cell = lmdb_read_cells(128)["imagenet/paper2016 disk (150 IOPS, 600 MB/s)"]
    mmap = lmdb_read_mbps(cell, "mmap")
    return (f"**{mmap:.1f} ({mmap / lmdb_read_mbps(cell, 'dd'):.2f})**: "
            f"{cell['records'] / statistics.median(cell['seconds']['mmap']):.0f} images/s")


@claim
def running_lmdb_read_says():
    """What the lmdb_read tables say: mmap at 128 KB readahead on the 2016 disk, the coalesced path over dd there."""
    disk = "paper2016 disk (150 IOPS, 600 MB/s)"
    slow = lmdb_read_cells(128)[f"imagenet/{disk}"]
    over = lambda d, kb: lmdb_read_mbps(lmdb_read_cells(kb)[f"{d}/{disk}"], "coalesced") / lmdb_read_mbps(  # noqa: E731
        lmdb_read_cells(kb)[f"{d}/{disk}"], "dd")
    rounds = [dd / c for dd, c in zip(slow["seconds"]["dd"], slow["seconds"]["coalesced"])]
    spread = max(abs(r / statistics.median(rounds) - 1) for r in rounds)
    return (f"runs at {lmdb_read_mbps(slow, 'mmap') / lmdb_read_mbps(slow, 'dd'):.0%} of what the disk gives `dd`",
            f"{span([over('imagenet', kb) for kb in (128, 8192)], lambda x: f'{x:.2f}')}\nof `dd` on the 2016 disk for "
            f"ImageNet (every round within {spread:.0%}), {span([over('mnist', kb) for kb in (128, 8192)])}x for MNIST")


@claim
def running_host_check_cell():
    """The capacity cell two VMs of one kind answered differently (docs/capacity.md's capacity_hosts_differ)."""
    cell = ("imagenet", "titanx2016", PER_SOLVER, "lmdb")
    return (f"held {largest(*cell, 'warm')} solvers warm / {largest(*cell, 'cold')} cold on one 2-core VM",
            f"and {warm_cold(*cell, folder=CAPACITY_HOST2)} on another")


# -- docs/testing.md, docs/faults.md and docs/redis-method.md: settings the code defines ------------

def source_numbers(path, name):
    """The numbers on the line that sets NAME in a source file of the project (`path` from the
    repository's root): `STALL = float(os.environ.get("X", "600"))` gives [600.0], a default the
    environment may override, as the docs state it."""
    import re
    line = re.search(rf"^\s*(?:self\.)?{name} = (.*)$", (ROOT / path).read_text(), re.M)
    return [float(n) for n in re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", line.group(1))]


def source_number(path, name):
    return source_numbers(path, name)[-1]


@claim
def testing_time_limits():
    """The suite's default time limit per test phase and the watchdog's margin past it (tests/conftest.py)."""
    return (f"({source_number('tests/conftest.py', 'DEFAULT_TIMEOUT'):g} s unless",
            f"(at most {source_number('tests/conftest.py', 'BACKSTOP_MARGIN_MAX'):g} s more)")



@claim
def faults_ring_takeover():
    """A killed writer's role taken: two of the others' looks for the writer's lock (caffe/patches/0013)."""
    return f"within {2 * patch_constant('kWaitMs')} ms", f"every {patch_constant('kWaitMs')} ms"


@claim
def faults_ring_stalled():
    """How long the others wait on a stopped writer or lock holder before they stop (kStalledMs)."""
    return f"after {patch_constant('kStalledMs') / 1000:g} s of their own waiting"


@claim
def faults_ring_left_behind():
    return f"left behind after {patch_constant('kLeftBehindMs') / 1000:g} s"


@claim
def faults_stall_limit():
    """The runner's default stall limit (experiments/training.py), in the row that sets it and the next."""
    limit = f"{source_number('experiments/training.py', 'STALL_SECONDS'):g} s"
    return f"(default {limit})", f"stopped as stalled after {limit}"


@claim
def faults_test_limit():
    return f"({source_number('tests/conftest.py', 'DEFAULT_TIMEOUT'):g} s unless marked)"


@claim
def faults_keeper_failover():
    """The reader's longest pause in the keeper's failovers (benchmarks/redis_failover.py), rounded up to a second."""
    import math
    rounds = json.loads((ROOT / f"{catalogue.relative('ci-2core-redis-failover')}/cifar10.json").read_text())["rounds"]
    longest = max(r["pause_s"] for r in rounds if r["failed_over_by_asked"] == "keeper")
    return f"fails it over in < {math.ceil(longest)} s"


@claim
def faults_records_lock_wait():
    """How long readers and appends wait on a records lock another process holds (experiments/records_log.py)."""
    from experiments.records_log import LOCK_WAIT_S
    return f"give up after {LOCK_WAIT_S:g} s"


@claim
def faults_cgroup_unowned_age():
    """The age past which an empty imgstore/* cgroup that no owner file names is removed (experiments/cgroup.py)."""
    from experiments.cgroup import UNOWNED_AGE_S
    return f"removed once {UNOWNED_AGE_S:g} s old"



# -- docs/redis-method.md --------------------------------------------------------------------------

# Redis 7's own failover figures (its cluster.c): a replica waits 500 ms plus a random 0-500 ms before
# it asks for votes; the docs quote them (`<!-- source: Redis, cluster.c -->`), the claims add them up.
REDIS_ELECTION_DELAY_S = (0.5, 1.0)


def sleep_after(path, anchor):
    """The first `usleep(N)` after `anchor` in a C source or patch of the project, in ms."""
    import re
    text = (ROOT / path).read_text()
    return int(re.search(r"usleep\((\d+)\)", text[text.index(anchor):]).group(1)) / 1000


def node_timeouts_s():
    """The clusters' `cluster-node-timeout`, with replicas and without (data_prep/redis_cluster/cluster.py)."""
    return [ms / 1000 for ms in source_numbers("data_prep/redis_cluster/cluster.py", "node_timeout_ms")]


@claim
def redis_method_keeper_period():
    """How often the keeper looks whether each node's redis-server runs (data_prep/redis_cluster/keeper.py)."""
    return f"every {source_number('data_prep/redis_cluster/keeper.py', 'PERIOD_SECONDS') * 1000:g} ms"


@claim
def redis_method_reader_waits():
    """The reader's waits on a lost master (caffe/patches/0011): the slot map read again, CLUSTERDOWN asked again."""
    patch = "caffe/patches/0011-redis-db.patch"
    return (f"read again every {sleep_after(patch, 'no replica took over its slots in'):g} ms",
            f"asked again {sleep_after(patch, 'backoff_ = false;'):g} ms later")


@claim
def redis_method_redis_failover():
    """Redis's own failover with replicas: the node timeout, up to half of it for the reports, the election's delay."""
    timeout = node_timeouts_s()[0]
    low, high = timeout + REDIS_ELECTION_DELAY_S[0], timeout * 1.5 + REDIS_ELECTION_DELAY_S[1]
    return f"at the {timeout:g} s used here, {low:g}-{high:g} s"


@claim
def redis_method_reply_limit():
    return f"stays silent {patch_constant('kReplySeconds')} s"


@claim
def redis_method_node_timeouts():
    with_replicas, without = node_timeouts_s()
    return f"{with_replicas:g} s with replicas, {without:g} s without"


@claim
def redis_method_delay_legs():
    """The round trip on the requests against half each way, at 100 ms over 0 ms, medians of 3 rounds per cell:
    the cells within 5 points of each other, and the one that is not."""
    rtt = 100.0
    ratios = []
    for dataset, depths in (("cifar10", (32768, 65536)), ("imagenet", (1024,))):
        cells = [r["cells"] for r in path_rounds(f"redis-path-{dataset}-legs-round{{round}}")]
        for depth, order in ((d, o) for d in depths for o in ("in", "ooo")):
            zero = median_of(cells, f"{dataset}/raw/0.0/{depth}/{order}")
            ratios.append([median_of(cells, f"{dataset}/raw/{rtt}-{legs}/{depth}/{order}") / zero
                           for legs in ("requests", "both")])
    apart = [r for r in ratios if abs(r[0] - r[1]) >= 0.05]
    return (f"at {rtt:g} ms the two gave rates within 5 points of each other in {len(ratios) - len(apart)} of "
            f"{len(ratios)} cells, " + "; ".join(f"{a:.2f} against {b:.2f}" for a, b in apart) + " of 0 ms")


@claim
def redis_method_proxy_chunks():
    """The delay proxy's CPU per ImageNet record relayed before and after its chunk reuse
    (benchmarks/delay_proxy.py)."""
    found = json.loads((ROOT / f"{REDIS_READER}/delay-proxy-spare-chunks.json").read_text())
    us = {k: statistics.median(r["proxy_us"] for r in found["cells"][f"imagenet/{k}"])
          for k in ("against", "this checkout")}
    return (f"from {us['against']:.0f} to {us['this checkout']:.0f} us per ImageNet record at {found['rtt_ms']:g} ms, "
            f"n = {len(found['cells']['imagenet/against'])}")


@claim
def redis_method_proxy_accept_retry():
    return f"every {sleep_after('data_prep/delay_proxy.c', 'retrying every'):g} ms"


if __name__ == "__main__":
    for name, f in CLAIMS.items():
        print(f"{name}: {f()!r}")
