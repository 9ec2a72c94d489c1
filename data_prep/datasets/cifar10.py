"""CIFAR-10: the binary batches (data_batch_1..5.bin, test_batch.bin); without --source, a
generated stand-in of 50,000 + 10,000 colour 32x32 images in 10 classes."""
from pathlib import Path

import numpy as np

from data_prep.datasets import Dataset, Source, SourceError, array_split, file_fingerprint, register
from data_prep.datasets import photos

RECORD = 1 + 3 * 32 * 32
BATCHES = {"train": [f"data_batch_{i}.bin" for i in range(1, 6)], "test": ["test_batch.bin"]}


def _read_batch(path):
    data = Path(path).read_bytes()
    if len(data) == 0 or len(data) % RECORD:
        raise SourceError(f"{path}: {len(data)} bytes is not a multiple of the {RECORD}-byte CIFAR-10 record")
    rec = np.frombuffer(data, np.uint8).reshape(-1, RECORD)
    labels = rec[:, 0]
    if labels.max() > 9:
        bad = int(np.argmax(labels > 9))
        raise SourceError(f"{path}: record {bad}: label {labels[bad]} out of range 0..9")
    rgb = rec[:, 1:].reshape(-1, 3, 32, 32)
    return rgb[:, ::-1], labels  # RGB planes -> BGR


def read(source, seed=0, count=None):
    folder = Path(source)
    splits, files = {}, []
    for phase, names in BATCHES.items():
        parts = []
        for name in names:
            path = folder / name
            if not path.exists():
                raise SourceError(f"{path}: missing CIFAR-10 binary batch")
            parts.append(_read_batch(path))
            files.append(path)
        splits[phase] = array_split(phase, np.concatenate([p[0] for p in parts]),
                                    np.concatenate([p[1] for p in parts]), 10)
    return Source("cifar10", f"CIFAR-10 binary batches from {folder}", file_fingerprint(files),
                  splits["train"], splits["test"])


def standin(seed=0, count=None, test_count=None):
    train_count = count or 50_000
    test_count = test_count or (10_000 if train_count == 50_000 else max(100, train_count // 5))

    def make(rng, label):
        picture = photos.photo(photos.PHOTOS[label])
        h, w = picture.shape[:2]
        return photos.to_bgr_chw(photos.crop(rng, picture, (0, 0, h, w), 0.15, 32))

    return Source("cifar10", f"generated CIFAR-10 stand-in (seed {seed}, scikit-image photographs)",
                  photos.fingerprint("cifar10-standin-v2", seed, train_count, test_count),
                  photos.generated_split("train", train_count, (3, 32, 32), 10, seed, make),
                  photos.generated_split("test", test_count, (3, 32, 32), 10, seed, make))


CIFAR10 = register(Dataset(
    name="cifar10", label="CIFAR-10", net="cifar10_quick", color=True, imagefile_keys=False,
    fits_in_memory=True, quick_iters=100, real_format="the folder of CIFAR-10's binary batches",
    read=read, default=standin, standin=True))
