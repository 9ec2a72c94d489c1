"""The loaders people would pick instead of Caffe's data path, reading the same bytes (the
project's Datum LMDB and PNG files) and making the same batches as Caffe's DataTransformer
(float32 N x C x H x W: crop at a random place in training, random mirror, per-pixel mean
subtracted, scaled), and the clock both they and Caffe are measured with.

One cell a process: benchmarks/peers.py runs

  .venv-peers/bin/python peers/loaders.py '{"loader": "dali", "form": "lmdb", ...}'

and reads the one JSON line it prints. This file imports nothing of the project's, so that it
runs in the peers' own environment (make peers). Right before its clock starts a cell prints
CLOCK and waits for benchmarks/peers.py's answer on stdin: the share of its data in the page
cache, which peers.py measures (and, for a cold cell, makes cold again first) with the
project's data_prep/cache.py. benchmarks/peers.py imports `timed` and `clock_probe` from here
for Caffe's side, so every loader is timed and checked by the same code.
"""
import importlib.util
import json
import sys
import time
from pathlib import Path

import numpy as np
import psutil

CLOCK = "imgstore-peers: the clock starts"  # a cell's line to peers.py, answered with the residency


def cpu_seconds(process):
    """User + system seconds of all of this process's threads and of its children (the
    DataLoader's workers), as far as they have run."""
    total = sum(process.cpu_times()[:2])
    for child in process.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.NoSuchProcess:
            pass
    return total


def timed(next_batch, batches, batch_size, min_seconds=0.0, at_clock=None):
    """Runs `next_batch` `batches` times, and on while the clock shows less than
    `min_seconds` (warm cells: a short window is all start-up noise and clock ticks); the
    first batch (start-up: threads and workers started, queues filled) is outside the clock.
    at_clock: a function measuring the data's residency, called right before the clock starts.
    Returns the first batch and the rest's {images, seconds, cpu_seconds, resident_at_clock}."""
    me = psutil.Process()
    first = next_batch()
    resident = at_clock() if at_clock else None
    start, cpu, done = time.perf_counter(), cpu_seconds(me), 0
    while done < batches - 1 or time.perf_counter() - start < min_seconds:
        next_batch()
        done += 1
    seconds, cpu = time.perf_counter() - start, cpu_seconds(me) - cpu
    return first, {"images": done * batch_size, "seconds": seconds, "cpu_seconds": cpu, "resident_at_clock": resident}


def cell_files(form, source, records):
    """The files a cell reads: what cold drops, warm reads and the residency is measured over
    (form: lmdb, lmdb-coalesced or images; source: the LMDB or the images folder)."""
    if form.startswith("lmdb"):
        return [Path(source) / "data.mdb"]
    return [Path(source) / "train.txt"] + [path for path, _ in image_list(source, records)]


def clock_probe(cell):
    """A function asking peers.py for the residency of the cell's data (a fraction, or None
    where peers.py did not answer), or None for a cell with no cache state (a check)."""
    if cell.get("cache") not in ("warm", "cold"):
        return None

    def ask():
        print(CLOCK, flush=True)
        answer = sys.stdin.readline().strip()  # '' when peers.py is gone: no wait without end
        return json.loads(answer) if answer else None
    return ask


def centre_offset(size, crop):
    """Where Caffe's TEST phase crops: (size - crop) / 2, rounded down."""
    return (size - crop) // 2


class CaffeTransform:
    """Caffe's DataTransformer on one uint8 C x H x W image, in NumPy (what a PyTorch user
    writes): crop (random place in training, the centre in the test phase), mean subtracted
    at the crop's place, scaled, mirrored half the time (training only)."""

    def __init__(self, spec, seed=0, test_phase=False):
        self.scale, self.crop, self.mirror = spec["scale"], spec["crop"], spec["mirror"] and not test_phase
        self.mean = np.load(spec["mean"]) if spec["mean"] else None
        self.rng, self.test_phase = np.random.default_rng(seed), test_phase

    def __call__(self, image):
        mean = self.mean
        if self.crop:
            _, h, w = image.shape
            if self.test_phase:
                y, x = centre_offset(h, self.crop), centre_offset(w, self.crop)
            else:
                y, x = self.rng.integers(0, h - self.crop + 1), self.rng.integers(0, w - self.crop + 1)
            image = image[:, y:y + self.crop, x:x + self.crop]
            mean = mean[:, y:y + self.crop, x:x + self.crop] if mean is not None else None
        out = image.astype(np.float32)
        if mean is not None:
            out -= mean
        if self.scale != 1.0:
            out *= np.float32(self.scale)
        if self.mirror and self.rng.random() < 0.5:
            out = out[:, :, ::-1]
        return np.ascontiguousarray(out)


def load_module(name, path):
    """A module loaded from its file: Caffe's generated caffe_pb2 (not through pycaffe, which
    this environment does not have)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_keys(lmdb_path, out):
    """Every key of the LMDB, in order, one hex line each: the map-style dataset's index, made
    in set-up before a cold cell drops the cache (scanning the keys reads the leaf pages,
    which hold small records' values: MNIST's whole file)."""
    import lmdb
    with lmdb.open(str(lmdb_path), readonly=True, lock=False) as env, env.begin() as txn:
        keys = [k.hex() for k in txn.cursor().iternext(values=False)]
    Path(out).write_text("\n".join(keys) + "\n")
    return out


def read_keys(path, count):
    """The first `count` keys written by write_keys."""
    keys = [bytes.fromhex(line) for line in Path(path).read_text().split()[:count]]
    if len(keys) < count:
        raise ValueError(f"{path}: {len(keys)} keys, the cell reads {count}")
    return keys


def image_list(images_dir, count):
    """The first `count` (path, label) pairs of ImageData's list of the train split."""
    lines = (Path(images_dir) / "train.txt").read_text().splitlines()[:count]
    return [(Path(images_dir) / rel, int(label)) for rel, label in (line.rsplit(" ", 1) for line in lines)]


# --- PyTorch's DataLoader -----------------------------------------------------------------

def torch_loader(cell):
    import torch
    from torch.utils.data import DataLoader, Dataset

    torch.set_num_threads(1)  # the loader's parallelism is its workers
    test_phase = cell.get("phase") == "test"

    class LmdbDatums(Dataset):
        """Datum records by index, as a map-style dataset over the LMDB; the environment is
        opened in each worker (an LMDB handle must not cross a fork)."""

        def __init__(self):
            self.path, self.pb2 = cell["source"], load_module("caffe_pb2", cell["caffe_pb2"])
            self.keys = read_keys(cell["keys"], cell["records"])  # listed in set-up, before a drop
            self.txn, self.transform = None, CaffeTransform(cell["transform"], test_phase=test_phase)

        def __len__(self):
            return len(self.keys)

        def __getitem__(self, i):
            if self.txn is None:
                import lmdb
                self.txn = lmdb.open(self.path, readonly=True, lock=False).begin()
            datum = self.pb2.Datum()
            datum.ParseFromString(self.txn.get(self.keys[i]))
            image = np.frombuffer(datum.data, np.uint8).reshape(datum.channels, datum.height, datum.width)
            return torch.from_numpy(self.transform(image)), datum.label

    class PngFiles(Dataset):
        """PNG files by index, decoded by Pillow (BGR, as Caffe's OpenCV reads them)."""

        def __init__(self):
            self.items = image_list(cell["source"], cell["records"])
            self.transform = CaffeTransform(cell["transform"], test_phase=test_phase)

        def __len__(self):
            return len(self.items)

        def __getitem__(self, i):
            from PIL import Image
            path, label = self.items[i]
            with Image.open(path) as img:
                pixels = np.asarray(img)
            image = pixels[None] if pixels.ndim == 2 else pixels[:, :, ::-1].transpose(2, 0, 1)
            return torch.from_numpy(self.transform(image)), label

    def reseed(worker):  # each worker its own crops and mirrors, as each DALI thread has
        torch.utils.data.get_worker_info().dataset.transform.rng = np.random.default_rng(worker + 1)

    dataset = LmdbDatums() if cell["form"] == "lmdb" else PngFiles()
    loader = DataLoader(dataset, batch_size=cell["batch"], num_workers=cell["threads"], shuffle=False,
                        drop_last=True, worker_init_fn=reseed, persistent_workers=cell["threads"] > 0)
    epoch = [iter(loader)]

    def next_batch():  # on into the next epoch, as Caffe's and DALI's readers go on
        try:
            return next(epoch[0])[0].numpy()
        except StopIteration:
            epoch[0] = iter(loader)
            return next(epoch[0])[0].numpy()
    return next_batch, {"torch": torch.__version__}


# --- NVIDIA DALI, CPU only ----------------------------------------------------------------

def dali_loader(cell):
    import nvidia.dali as dali
    import nvidia.dali.fn as fn
    import nvidia.dali.types as types

    t = cell["transform"]
    c, h, w = cell["shape"]
    test_phase = cell.get("phase") == "test"

    def transform(image, layout):
        """Caffe's transform as DALI operators: the per-pixel mean subtracted over the whole
        image, then crop, mirror and scale in one crop_mirror_normalize. (Cropping the image
        and a constant mean at the same place first, then subtracting, measured 0.66x as fast
        on ImageNet: the constant is copied for every sample.)"""
        x = fn.cast(image, dtype=types.FLOAT)
        if t["mean"]:
            mean = np.load(t["mean"])
            x = x - types.Constant(mean if layout == "CHW" else mean.transpose(1, 2, 0), device="cpu")
            x = fn.reshape(x, layout=layout)
        args = dict(dtype=types.FLOAT, output_layout="CHW", mean=0.0, std=1.0 / t["scale"])
        if t["crop"] and test_phase:
            args.update(crop=(t["crop"], t["crop"]), crop_pos_x=centre_position(w, t["crop"]),
                        crop_pos_y=centre_position(h, t["crop"]))
        elif t["crop"]:
            args.update(crop=(t["crop"], t["crop"]), crop_pos_x=fn.random.uniform(range=(0.0, 1.0)),
                        crop_pos_y=fn.random.uniform(range=(0.0, 1.0)))
        if t["mirror"] and not test_phase:
            args["mirror"] = fn.random.coin_flip()
        return fn.crop_mirror_normalize(x, **args)

    @dali.pipeline_def(batch_size=cell["batch"], num_threads=cell["threads"], device_id=None, seed=1)
    def pipeline():
        if cell["form"] == "lmdb":
            raw, label = fn.readers.caffe(path=cell["source"], random_shuffle=False, name="reader")
            image, layout = fn.reshape(raw, shape=[c, h, w], layout="CHW"), "CHW"
        else:
            root = Path(cell["source"])
            files, label = fn.readers.file(file_root=str(root), file_list=str(root / "train.txt"),
                                           random_shuffle=False, name="reader")
            image = fn.decoders.image(files, device="cpu", output_type=types.BGR if c == 3 else types.GRAY)
            layout = "HWC"
        return transform(image, layout), label

    pipe = pipeline()
    pipe.build()
    return (lambda: pipe.run()[0].as_array()), {"dali": dali.__version__}


def centre_position(size, crop):
    """Caffe's centre offset as DALI's crop position (0..1 of size - crop): a quarter pixel past
    it, so that DALI's rounding of position x (size - crop), down or to the nearest, lands on it."""
    room = size - crop
    return (centre_offset(size, crop) + 0.25) / room if room else 0.5


LOADERS = {"torch": torch_loader, "dali": dali_loader}


def run_cell(cell):
    next_batch, versions = LOADERS[cell["loader"]](cell)
    first, result = timed(next_batch, cell["count"] // cell["batch"], cell["batch"], cell["min_seconds"],
                          clock_probe(cell))
    if cell.get("first_batch"):
        np.save(cell["first_batch"], np.asarray(first, dtype=np.float32))
    import PIL
    return dict(result, versions=dict(versions, numpy=np.__version__, pillow=PIL.__version__))


if __name__ == "__main__":
    print(json.dumps(run_cell(json.loads(sys.argv[1]))))
