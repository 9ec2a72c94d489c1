"""A cell predicted from this host's own data-path probe (benchmarks/data_path.py probe(): Caffe's
data layer over the data as prepared, at 0 ms of compute, warm), not from another host's
records scaled by CPU probes (experiments/prediction.py, kept beside it in make host-check).

The model:
- A warm cell's solver seconds = max(compute, data path) + FIXED_S. Caffe's prefetch thread
  works while the accelerator does, so the longer of the two sets the pace.
- compute: the emulated accelerator's time for the cell's iterations (train iterations x its
  step time, and the test passes inside the solver's window), the same on any host.
- data path: the images the solver needs (iterations after the first, whose clock has not
  started, x the batch, and the test passes' images inside the window) over the images/s this
  host's probe measured for that backend and data set (the probe has no test pass: its rate is
  the train data layer's, and the test net's layer reads the same backend). No CPU probe ratio: the probe is the data path itself, page cache and file system included.
- FIXED_S: what a run has beyond both (the solver's first iterations, test passes' waits),
  fitted once on FIXED_FROM's compute-bound runs (solver seconds - compute).
- AU at an accelerator step time T: compute at T over the predicted solver seconds.
- The N the data path's CPU allows on this host's cores: as experiments/data_path_cpu.py
  cpu_allows counts it from records: cores x images per data-thread CPU second over what 0.90 of
  one accelerator eats, and 0 where one prefetch thread cannot deliver that much (its images per
  CPU second below it).
"""
from data_prep import datasets
from experiments import accelerators
from experiments.data_path_cpu import THRESHOLD

# solver seconds - compute (compute_seconds) of the emulated-H100 MNIST LMDB runs in FIXED_FROM
# (compute-bound, 5,000 iterations), median over its 6 runs (0.030-0.100 s)
FIXED_S = 0.033
FIXED_FROM = "the catalogue's ci-2core-gpu-step-cells (mnist lmdb, warm, h100, 5000 iterations)"


def compute_of(accelerator, dataset):
    """The emulated Compute for an accelerator profile name (models/accelerators.json) or a step
    time such as 2.5ms; raises accelerators.AcceleratorError for neither."""
    return accelerators.choose(accelerator, datasets.get(dataset).model, -1)


def compute_seconds(dataset, iterations, accelerator):
    """The accelerator's seconds in a cell's solver window: its train iterations and the test
    passes of the stock solver inside it (every test_interval, the last iteration's included,
    test_iter forward passes each)."""
    model, compute = datasets.get(dataset).model, compute_of(accelerator, dataset)
    solver = model.solver
    tests = iterations // solver.test_interval if solver.test_interval else 0
    return (iterations * compute.ms_per_iteration + tests * solver.test_iter * compute.test_ms_per_iteration) / 1000


def images_needed(dataset, iterations):
    """Images the data path delivers inside the solver's window: the train images (iteration 0 is
    before it) and the test passes' (every test_interval, test_iter batches each), which the test
    net's data layer reads from the same backend while training waits on them (MNIST's stock
    solver at 5,000 iterations: 100,000 test images beside 320,000 train images)."""
    model = datasets.get(dataset).model
    solver = model.solver
    tests = iterations // solver.test_interval if solver.test_interval else 0
    return (iterations - 1) * model.batch + tests * solver.test_iter * model.test_batch


def probe_cell(probe, dataset, backend):
    """The probe's cell for a backend and data set ({images_per_s: {median, ...}, ...}), or None."""
    return ((probe or {}).get("cells") or {}).get(f"{dataset}/{backend}")


def rate(cell, key="images_per_s"):
    return ((cell or {}).get(key) or {}).get("median")


def predict(probe, dataset, backend, iterations, accelerator):
    """{seconds, au, bound, compute_s, data_path_s, why} for a warm cell of one solver on this
    host, from its data-path probe; seconds None (and why) where the probe lacks the cell."""
    compute = compute_seconds(dataset, iterations, accelerator)
    delivered = rate(probe_cell(probe, dataset, backend))
    if not delivered:
        return {"seconds": None, "au": None, "bound": None, "compute_s": compute, "data_path_s": None,
                "why": f"no data-path probe of {dataset}/{backend} here"}
    data_path = images_needed(dataset, iterations) / delivered
    seconds = max(compute, data_path) + FIXED_S
    return {"seconds": seconds, "au": min(1.0, compute / seconds), "compute_s": compute, "data_path_s": data_path,
            "bound": "compute" if compute >= data_path else "data path", "why": None}


def needed_per_second(dataset, accelerator):
    """Images/s 0.90 of one accelerator eats (its batch per step)."""
    model = datasets.get(dataset).model
    return THRESHOLD * model.batch * 1000 / compute_of(accelerator, dataset).ms_per_iteration


def cpu_allows(probe, dataset, backend, accelerator, cores):
    """(N, one prefetch thread's share of what one accelerator needs) the data path's CPU allows
    on `cores` at `accelerator`, from the probe's images per CPU second; None where the probe has
    no CPU seconds for the cell or the step time is 0."""
    cell = probe_cell(probe, dataset, backend)
    one_thread, data_threads = rate(cell, "images_per_prefetch_cpu_s"), rate(cell, "images_per_data_path_cpu_s")
    if not one_thread or not data_threads or not compute_of(accelerator, dataset).ms_per_iteration:
        return None
    needed = needed_per_second(dataset, accelerator)
    share = one_thread / needed
    return (cores * data_threads / needed if share >= 1 else 0.0), share
