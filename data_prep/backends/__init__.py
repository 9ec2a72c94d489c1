"""The six places training images can live, one module each, behind one interface.

A backend writes a Split into a folder (the writer half), tells Caffe how to read it (the
data-layer half), reads it back for `verify`, and lists its files (footprint, page-cache
residency). Chosen by name from REGISTRY, as Caffe chooses layers.

Two kinds:
- raw (lmdb, leveldb, images): uint8 pixels; Caffe's DataTransformer scales / subtracts
  the mean (and crops / mirrors) at training time, as the paper's Data and ImageData runs.
- pretransformed (hdf5, pymem, cppmem): HDF5Data and MemoryData apply no transform, so
  the stored floats are already what the transformer would produce (scale, mean).
"""
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REGISTRY = {}


def register(cls):
    REGISTRY[cls.name] = cls()
    return cls


def get(name):
    from data_prep.sources import SourceError
    if name not in REGISTRY:
        raise SourceError(f"unknown backend {name!r}; choose from {', '.join(REGISTRY)}")
    return REGISTRY[name]


@dataclass
class WriteContext:
    dataset: str
    final_dir: Path            # where the artifact will live once complete
    scale: float               # the net's transform_param scale
    mean: np.ndarray = None    # C x H x W float32 mean (mean.binaryproto), or None
    imagefile_keys: bool = False  # keys and Datum fields as convert_imageset makes them
    phase_dir: Path = None     # the split's own folder while it is written (image files)

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
    layer = ""               # Caffe layer type that reads it
    pretransformed = False
    supports = ("mnist", "cifar10", "imagenet")
    why_not = ""             # shown when a dataset is not supported

    def encode(self, record, ctx):
        """Per-record work done in worker processes (decode, Datum, PNG). Returns a payload."""
        return record

    def writer(self, split, dest, ctx):
        """A context manager with .add(payload), called in record order in one process."""
        raise NotImplementedError

    def read(self, dest, phase, ctx=None):
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

    def data_layer(self, dest, model, mean_file):
        """A function (batch, phase) -> (data, label) NetSpec tops reading this artifact."""
        raise NotImplementedError


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


# importing the modules registers them
from data_prep.backends import lmdb_store, leveldb_store, hdf5_file, image_files, pymem, cppmem  # noqa: E402,F401,E501
