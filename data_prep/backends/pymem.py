"""In-memory arrays from Python: a compressed .npz of uint8 pixels and labels that a pycaffe
driver (experiments/pymem_train.py) loads whole, transforms with numpy to float32 and hands
to MemoryData (Net.set_input_arrays). The MemoryData layer applies no transform itself."""

import numpy as np

from data_prep.backends import register
from data_prep.backends.memory import ArrayWriter, MemoryBackend, pad_to_batch


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
class PyMemBackend(MemoryBackend):
    name, label, color = "pymem", "in memory (Python)", "#e7298a"
    suffix, writer_class = "npz", _Writer

    def read(self, dest, phase, ctx):
        data, labels = load(self.paths(dest, phase)[0], ctx)
        for x, y in zip(data, labels):
            yield int(y), x

    def arrays(self, dest, phase, ctx, batch):
        return pad_to_batch(*load(self.paths(dest, phase)[0], ctx), batch)

    def program_warmup(self):
        # pycaffe's imports (numpy, skimage, ...) are ~75 MiB that `caffe train` never loads
        import toolchain
        return [str(toolchain.PYTHON), "-c", "import caffe; from data_prep import backends, build, datasets"]

    def train_command(self, solver, dest, dataset, gpu):
        import toolchain
        return [str(toolchain.PYTHON), str(toolchain.ROOT / "experiments" / "pymem_train.py"), str(solver),
                str(dest), dataset.name] + (["--gpu", str(gpu)] if gpu >= 0 else [])
