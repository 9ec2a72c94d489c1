"""In-memory arrays from C++: a raw float32 file that experiments/cppmem (a C++ driver
linked against libcaffe) reads whole and hands to MemoryData::Reset.

File format (little-endian): 8-byte magic b'CPPMEM01', int32 N, C, H, W, then N*C*H*W
float32 pixels (already transformed: scaled / mean-subtracted), then N float32 labels."""
import struct

import numpy as np

from data_prep.backends import register
from data_prep.backends.memory import ArrayWriter, MemoryBackend

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
class CppMemBackend(MemoryBackend):
    name, label, color = "cppmem", "in memory (C++)", "#e6ab02"
    suffix, writer_class, dtype = "f32", _Writer, np.float32

    def read(self, dest, phase, ctx):
        path = self.paths(dest, phase)[0]
        n, c, h, w = read_header(path)
        raw = np.fromfile(path, "<f4", offset=HEADER.size)
        data, labels = raw[:n * c * h * w].reshape(n, c, h, w), raw[n * c * h * w:]
        for x, y in zip(data, labels):
            yield int(y), x

    def train_command(self, solver, dest, dataset, gpu):
        import toolchain
        return [str(toolchain.cppmem_driver()), str(solver), str(self.paths(dest, "train")[0]),
                str(self.paths(dest, "test")[0]), str(gpu)]
