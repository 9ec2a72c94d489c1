"""In-memory arrays from C++: a raw float32 file that experiments/cppmem (a C++ driver
linked against libcaffe) reads whole and hands to MemoryData::Reset.

File format (little-endian): 8-byte magic b'CPPMEM01', int32 N, C, H, W, then N*C*H*W
float32 pixels (already transformed: scaled / mean-subtracted), then N float32 labels."""
import struct
from pathlib import Path

import numpy as np

from data_prep.backends import Backend, register
from data_prep.backends.memory import ArrayWriter, memory_layer
from data_prep.backends.pymem import ARRAY_DATASETS, TOO_BIG

MAGIC = b"CPPMEM01"
HEADER = struct.Struct("<8s4i")


def read_header(path):
    with open(path, "rb") as f:
        magic, n, c, h, w = HEADER.unpack(f.read(HEADER.size))
    if magic != MAGIC:
        raise ValueError(f"{path}: not a cppmem file (magic {magic!r})")
    return n, c, h, w


class _Writer(ArrayWriter):
    def add(self, payload):
        label, pixels = payload
        super().add((label, self.ctx.transform(pixels)))

    def close(self):
        n, (c, h, w) = len(self.labels), self.images.shape[1:]
        with open(self.path, "wb") as f:
            f.write(HEADER.pack(MAGIC, n, c, h, w))
            f.write(self.images.astype("<f4").tobytes())
            f.write(self.labels.astype("<f4").tobytes())


@register
class CppMemBackend(Backend):
    name = "cppmem"
    layer = "MemoryData"
    pretransformed = True
    supports = ARRAY_DATASETS
    why_not = TOO_BIG

    def paths(self, dest, phase):
        return [dest / f"{phase}.f32"]

    def encode(self, record, ctx):
        return record[1], record[2]

    def writer(self, split, dest, ctx):
        return _Writer(split, self.paths(dest, split.phase)[0], np.float32, ctx)

    def read(self, dest, phase, ctx=None):
        path = self.paths(Path(dest), phase)[0]
        n, c, h, w = read_header(path)
        raw = np.fromfile(path, "<f4", offset=HEADER.size)
        data, labels = raw[:n * c * h * w].reshape(n, c, h, w), raw[n * c * h * w:]
        for x, y in zip(data, labels):
            yield int(y), x

    def data_layer(self, dest, model, mean_file):
        return memory_layer(model)
