"""The datasets, one module each, registered by name as backends and Caffe's layers are.

A Dataset knows its real format's reader, the stand-in used when the real data is absent,
its net, whether it is colour, how convert_* tools key its records, and whether the paper's
in-memory backends could hold it. Every source yields the same thing, a Split per phase:
(name, label, pixels) records, pixels uint8 C x H x W in **BGR** order, Caffe's convention
(OpenCV decodes to BGR, so ImageData and convert_imageset give BGR).
"""
import hashlib
from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional, Tuple

import numpy as np

from data_prep.errors import SourceError  # noqa: F401  (raised by every reader)

Record = Tuple[str, int, np.ndarray]  # (name, label, pixels C x H x W uint8, BGR)


@dataclass
class Split:
    phase: str                 # "train" or "test"
    count: int
    shape: Tuple[int, int, int]
    get: Callable[[int], Record]  # record by index (random access: workers make records)
    num_classes: int
    in_memory: bool = False       # records are array slices already: nothing to make or cache
    decodes_files: bool = False   # records come from image files (OpenCV decodes without the GIL)

    def records(self) -> Iterator[Record]:
        return (self.get(i) for i in range(self.count))

    def limited(self, n):
        return Split(self.phase, min(n, self.count), self.shape, self.get, self.num_classes, self.in_memory,
                     self.decodes_files)


@dataclass
class Source:
    dataset: str
    description: str           # what was used, shown to the user and kept in manifests
    fingerprint: str           # sha256 over the source files (or the generator's settings)
    train: Split
    test: Split

    def splits(self):
        return [self.train, self.test]


@dataclass(frozen=True)
class Dataset:
    name: str
    label: str                 # as figures and tables name it
    net: str                   # key of models.nets.MODELS
    color: bool
    imagefile_keys: bool       # keys and Datum fields as convert_imageset (not convert_*_data) makes them
    fits_in_memory: bool       # the paper held it in memory (pymem, cppmem); ImageNet it did not
    quick_iters: int           # iterations of a smoke run (make DATASET-quick)
    real_format: str           # what --source points at
    read: Callable             # (path, seed, count) -> Source: the real format
    default: Callable          # (seed, count) -> Source: used without --source
    standin: bool              # the default is generated, not real data
    # RunConfig field values its full matrix needs (make DATASET-all), the reason among them
    matrix_config: dict = field(default_factory=dict, hash=False)

    @property
    def model(self):
        from models.nets import MODELS
        return MODELS[self.net]

    def load(self, source=None, seed=0, count=None) -> Source:
        return self.read(source, seed, count) if source else self.default(seed, count)

    def source_label(self, description: Optional[str]):
        """How a figure names where the images came from."""
        if description and "stand-in" in description:
            return f"{self.label} (generated stand-in)"
        if description and "Fashion-MNIST" in description:
            return "Fashion-MNIST (as MNIST)"
        return self.label


REGISTRY = {}


def register(dataset):
    REGISTRY[dataset.name] = dataset
    return dataset


def get(name):
    if name not in REGISTRY:
        raise SourceError(f"unknown dataset {name!r}; choose from {', '.join(REGISTRY)}")
    return REGISTRY[name]


def load(name, source=None, seed=0, count=None):
    return get(name).load(source, seed, count)


# --- helpers the dataset modules share ----------------------------------------------

def array_split(phase, images, labels, num_classes):
    images = np.ascontiguousarray(images)

    def get(i):
        return f"{i:08d}", int(labels[i]), images[i]
    return Split(phase, len(labels), tuple(images.shape[1:]), get, num_classes, in_memory=True)


def file_fingerprint(paths):
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


# importing the modules registers them
from data_prep.datasets import mnist, cifar10, imagenet  # noqa: E402,F401
