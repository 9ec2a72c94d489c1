"""In-memory arrays from Python: a compressed .npz of uint8 pixels and labels that a pycaffe
driver loads whole, transforms with numpy to float32 and hands to MemoryData
(Net.set_input_arrays). The MemoryData layer applies no transform itself."""
from pathlib import Path

import numpy as np

from data_prep.backends import Backend, register
from data_prep.backends.memory import ArrayWriter, memory_layer, pad_to_batch

ARRAY_DATASETS = ("mnist", "cifar10")
TOO_BIG = ("the whole dataset must fit in memory; the paper's ImageNet was several times "
           "larger than its machine's memory, so it ran no in-memory ImageNet")


def load(path, ctx):
    """The float32 arrays set_input_arrays receives (before padding to a batch multiple)."""
    with np.load(path) as z:
        images, labels = z["images"], z["labels"]
    data = np.empty(images.shape, np.float32)
    for i in range(0, len(images), 4096):
        data[i:i + 4096] = ctx.transform(images[i:i + 4096])
    return data, labels.astype(np.float32)


class _Writer(ArrayWriter):
    def close(self):
        np.savez_compressed(self.path, images=self.images, labels=self.labels)


@register
class PyMemBackend(Backend):
    name = "pymem"
    layer = "MemoryData"
    pretransformed = True
    supports = ARRAY_DATASETS
    why_not = TOO_BIG

    def paths(self, dest, phase):
        return [dest / f"{phase}.npz"]

    def encode(self, record, ctx):
        return record[1], record[2]

    def writer(self, split, dest, ctx):
        return _Writer(split, self.paths(dest, split.phase)[0], np.uint8, None)

    def read(self, dest, phase, ctx=None):
        data, labels = load(self.paths(Path(dest), phase)[0], ctx)
        for x, y in zip(data, labels):
            yield int(y), x

    def data_layer(self, dest, model, mean_file):
        return memory_layer(model)

    def arrays(self, dest, phase, ctx, batch):
        return pad_to_batch(*load(self.paths(Path(dest), phase)[0], ctx), batch)
