"""One HDF5 file per split (float32 'data' N x C x H x W, 'label' N) and the list file
HDF5Data reads. HDF5Data applies no transform, so 'data' holds transformed values."""
from pathlib import Path

import h5py
import numpy as np

from data_prep.backends import Backend, register, phase_name
from data_prep.errors import SourceError

CHUNK = 1000


class _Writer:
    def __init__(self, split, path, list_path, final_path, ctx):
        for char in "\n\r":  # HDF5Data reads its list file a line per file
            if char in str(final_path):
                raise SourceError(f"{final_path}: the path holds {char!r}, which HDF5Data's list file "
                                  f"({list_path.name}) cannot hold; choose a folder whose name has none")
        self.ctx, self.n = ctx, 0
        self.f = h5py.File(path, "w")
        self.data = self.f.create_dataset("data", (split.count, *split.shape), np.float32)
        self.label = self.f.create_dataset("label", (split.count,), np.float32)
        self.buf = np.empty((CHUNK, *split.shape), np.float32)
        self.labels = np.empty(CHUNK, np.float32)
        self.list_path, self.final_path, self.fill = list_path, final_path, 0

    def add(self, payload):
        label, pixels = payload
        self.buf[self.fill], self.labels[self.fill] = self.ctx.transform(pixels), label
        self.fill += 1
        if self.fill == CHUNK:
            self._flush()

    def _flush(self):
        self.data[self.n:self.n + self.fill] = self.buf[:self.fill]
        self.label[self.n:self.n + self.fill] = self.labels[:self.fill]
        self.n, self.fill = self.n + self.fill, 0

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *_):
        if exc_type is None:
            self._flush()
        self.f.close()
        if exc_type is None:
            self.list_path.write_text(f"{self.final_path}\n")


@register
class HDF5Backend(Backend):
    name, label, color = "hdf5", "HDF5", "#7570b3"
    layer = "HDF5Data"
    pretransformed = True

    def unsupported(self, dataset):
        t = dataset.model.transform
        if t.crop_size or t.mirror:
            return (f"HDF5Data applies no transform, and {dataset.model.name} crops and mirrors at random "
                    "every iteration; the paper left HDF5 out of its ImageNet runs for this reason")
        return None

    def paths(self, dest, phase):
        return [dest / f"{phase}.h5", dest / f"{phase}.h5.txt"]

    def encode(self, record, ctx):
        return record[1], record[2]

    def writer(self, split, dest, ctx):
        h5, lst = self.paths(dest, split.phase)
        return _Writer(split, h5, lst, ctx.final_dir / h5.name, ctx)

    def read(self, dest, phase, ctx):
        with h5py.File(self.paths(Path(dest), phase)[0], "r") as f:
            data, label = f["data"], f["label"]
            for start in range(0, len(label), CHUNK):
                block, labels = data[start:start + CHUNK], label[start:start + CHUNK]
                for x, y in zip(block, labels):
                    yield int(y), x

    def data_layer(self, dest, dataset, mean_file, read_options=None):
        from caffe import layers as L

        def layer(batch, phase):
            return L.HDF5Data(source=str(self.paths(Path(dest), phase_name(phase))[1]),
                              batch_size=batch, ntop=2)
        return layer
