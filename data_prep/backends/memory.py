"""What the two in-memory backends (pymem, cppmem) share."""
import numpy as np


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


def memory_layer(model):
    from caffe import layers as L
    c, h, w = model.input_shape

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
