"""The places training images can live, one module each, behind one interface, chosen by
name from REGISTRY as Caffe chooses layers. Everything else (data_prep, the runner, the
matrix, the report, the tests) asks the registry; a new backend is a module here plus its
import at the bottom of this file.

A backend owns both halves of its format (as an FFCV field does): writing a Split into a
folder, and the Caffe data layer and training driver that read it back. Where the folder
lives, and what cold or warm means there, is the location's business (experiments.locations).

Two kinds:
- raw (lmdb, leveldb, images): uint8 pixels; Caffe's DataTransformer scales / subtracts
  the mean (and crops / mirrors) at training time, as the paper's Data and ImageData runs.
- pretransformed (hdf5, pymem, cppmem): HDF5Data and MemoryData apply no transform, so
  the stored floats are already what the transformer would produce (scale, mean).
"""
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from data_prep import disk

REGISTRY = {}


def register(cls):
    REGISTRY[cls.name] = cls()
    return cls


def get(name):
    from data_prep.errors import SourceError
    if name not in REGISTRY:
        raise SourceError(f"unknown backend {name!r}; choose from {', '.join(REGISTRY)}")
    return REGISTRY[name]


def names(text):
    """'all' or a comma-separated list -> backend names, each checked."""
    chosen = list(REGISTRY) if text == "all" else [n for n in text.split(",") if n]
    for n in chosen:
        get(n)
    return chosen


@dataclass
class WriteContext:
    dataset: object            # data_prep.datasets.Dataset
    final_dir: Path            # where the artifact will live once complete
    scale: float               # the net's transform_param scale
    mean: np.ndarray = None    # C x H x W float32 mean (mean.binaryproto), or None
    phase_dir: Path = None     # the split's own folder while it is written (image files)
    overwrite: bool = False    # a server may hold a data set no manifest here describes: replace it
    source_fingerprint: str = None  # what the records come from (a server's completion marker keeps it)

    def transform(self, pixels):
        """What Caffe's DataTransformer computes for a uint8 C x H x W image (no crop/mirror)."""
        x = pixels.astype(np.float32)
        if self.mean is not None:
            x = x - self.mean
        if self.scale != 1.0:
            x = x * np.float32(self.scale)
        return x


class Backend:
    name = ""
    label = ""               # as figures and tables name it
    color = "#777777"        # its colour in every figure
    layer = ""               # Caffe layer type that reads it
    pretransformed = False
    location = "local"       # a data_prep.locations.REGISTRY kind: where its data lives
    options = ()             # its reader's options (data_prep.options.Option): DataParameter fields,
                             # each a run.py flag and a key of the record's read_options

    def unsupported(self, dataset):
        """Why this backend cannot hold `dataset` (a Dataset), or None."""
        return None

    def encode(self, record, ctx):
        """Per-record work done in worker processes (decode, Datum, PNG). Returns a payload."""
        return record

    def writer(self, split, dest, ctx):
        """A context manager with .add(payload), called in record order in one process."""
        raise NotImplementedError

    def read(self, dest, phase, ctx):
        """Yield (label, array) as stored: uint8 C x H x W for raw, float32 for pretransformed."""
        raise NotImplementedError

    def files(self, dest, phase=None):
        """The artifact's files (for both phases unless one is given)."""
        phases = [phase] if phase else ["train", "test"]
        out = []
        for p in phases:
            for path in self.paths(Path(dest), p):
                out += sorted(f for f in path.rglob("*") if f.is_file()) if path.is_dir() else [path]
        return out

    def paths(self, dest, phase):
        raise NotImplementedError

    def footprint(self, dest, phase=None):
        """Bytes and files the artifact takes (the paper's Table 2)."""
        return disk.footprint(self.files(dest, phase))

    def session(self, dest):
        """What must be up while the artifact is written or read outside training (a server)."""
        from contextlib import nullcontext
        return nullcontext()

    def data_layer(self, dest, dataset, mean_file, read_options=None):
        """A function (batch, phase) -> (data, label) NetSpec tops reading this artifact."""
        raise NotImplementedError

    def write_data_net(self, path, dest, dataset, batch, phase, read_options=None, mean_file=None, transform=True,
                       source=None):
        """A net of this backend's data layer alone (the data path without a model) written to
        `path`, as the benchmarks read through it; transform=False leaves out transform_param
        (what the reader alone costs); source (Data layers only) reads another database."""
        import caffe
        n = caffe.NetSpec()
        layer = self.data_layer(dest, dataset, mean_file, read_options, **({"source": source} if source else {}))
        n.data, n.label = layer(batch, phase)
        if not transform:
            n.data.fn.params.pop("transform_param", None)
        Path(path).write_text(str(n.to_proto()))
        return path

    def layer_options(self, read_options):
        """The run's read options ({name: value}, as recorded) as DataParameter fields."""
        declared = {o.name: o for o in self.options}
        unknown = set(read_options or {}) - set(declared)
        if unknown:
            from data_prep.errors import SourceError
            raise SourceError(f"{self.name} takes no read option {', '.join(sorted(unknown))}")
        return {name: declared[name].proto_value(declared[name].value(value))
                for name, value in (read_options or {}).items()}

    def remove(self, dest):
        """Removes the artifact at dest, and a half-written one beside it (prepare.py clean)."""
        import shutil
        dest = Path(dest)
        for path in (dest, dest.parent / f".{dest.name}.partial"):
            shutil.rmtree(path, ignore_errors=True)

    def remove_leftovers(self):
        """Removes what killed solvers of this backend left outside their artifacts (LMDB's
        shared rings in /dev/shm that no process holds); returns what it removed. The runner
        calls it before and after each run."""
        return []

    def program_warmup(self):
        """A command that loads this backend's training program without reading data, run
        before a warm run so that 'warm' covers the program too (a cold run before it dropped
        what only this program loads); None: Caffe's tool, which every cold run reloads."""
        return None

    def train_command(self, solver, dest, dataset, gpu):
        """The command that trains the solver's nets from this artifact: Caffe's own tool."""
        import toolchain
        return [str(toolchain.caffe_tool("caffe")), "train", f"--solver={solver}"] + \
            ([f"--gpu={gpu}"] if gpu >= 0 else [])


def transform_param(model, mean_file, phase):
    """Caffe's transform_param for a raw backend, as the stock prototxt has it."""
    import caffe
    t = model.transform
    p = {}
    if t.scale != 1.0:
        p["scale"] = t.scale
    if t.mean_file:
        p["mean_file"] = str(mean_file)
    if t.crop_size:
        p["crop_size"] = t.crop_size
    if t.mirror and phase == caffe.TRAIN:
        p["mirror"] = True
    return p


def phase_name(phase):
    import caffe
    return "train" if phase == caffe.TRAIN else "test"


# importing the modules registers them, in the order figures show them
from data_prep.backends import lmdb_store, leveldb_store, hdf5_file, image_files, pymem, cppmem, redis_store  # noqa: E402,F401,E501
