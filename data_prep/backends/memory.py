"""What the two in-memory backends (pymem, cppmem) share: the whole split in one array, fed to
Caffe's MemoryData layer by a driver of their own; too large for ImageNet, as in the paper."""
from pathlib import Path

import numpy as np

from data_prep.backends import Backend


class ArrayWriter:
    """Collects a whole split in one array; subclasses write it out on close."""

    def __init__(self, split, path, dtype, ctx):
        self.path, self.ctx, self.n = path, ctx, 0
        self.images = np.empty((split.count, *split.shape), dtype)
        self.labels = np.empty(split.count, np.int64)

    def add(self, payload):
        label, pixels = payload
        self.images[self.n], self.labels[self.n] = pixels, label
        self.n += 1

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *_):
        if exc_type is None:
            self.close()


class MemoryBackend(Backend):
    """Subclasses set name, suffix (the file of a split), writer_class and dtype, and give
    `read` and `train_command`."""
    layer = "MemoryData"
    pretransformed = True
    suffix = ""
    writer_class = ArrayWriter
    dtype = np.uint8

    def unsupported(self, dataset):
        if not dataset.fits_in_memory:
            return ("the whole dataset must fit in memory; the paper's ImageNet was several times "
                    "larger than its machine's memory, so it ran no in-memory ImageNet")
        return None

    def paths(self, dest, phase):
        return [Path(dest) / f"{phase}.{self.suffix}"]

    def encode(self, record, ctx):
        return record[1], record[2]

    def writer(self, split, dest, ctx):
        return self.writer_class(split, self.paths(dest, split.phase)[0], self.dtype, ctx)

    def data_layer(self, dest, dataset, mean_file, read_options=None):
        from caffe import layers as L
        c, h, w = dataset.model.input_shape

        def layer(batch, phase):
            return L.MemoryData(batch_size=batch, channels=c, height=h, width=w, ntop=2)
        return layer


def pad_to_batch(data, labels, batch):
    """MemoryData needs a multiple of the batch size: wrap around to the next multiple,
    as a Data layer would wrap to the start of its database (MNIST: 60,000 -> 60,032)."""
    extra = -len(labels) % batch
    if extra:
        data = np.concatenate([data, data[:extra]])
        labels = np.concatenate([labels, labels[:extra]])
    return np.ascontiguousarray(data), np.ascontiguousarray(labels)
