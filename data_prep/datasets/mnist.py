"""MNIST: IDX files; without --source, Debian's Fashion-MNIST (same format, 60k + 10k 28x28)."""
import gzip
import struct
from pathlib import Path

import numpy as np

from data_prep.datasets import Dataset, Source, SourceError, array_split, file_fingerprint, register

FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
IDX_NAMES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
             "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def _find_idx(folder, stem):
    # Debian's Fashion-MNIST and some mirrors use '.' for the '-' before 'idx'
    for name in (stem, stem + ".gz", stem.replace("-idx", ".idx"), stem.replace("-idx", ".idx") + ".gz"):
        if (folder / name).exists():
            return folder / name
    raise SourceError(f"{folder}: no {stem} (or {stem}.gz): not an MNIST IDX folder")


def _read_idx(path, magic, dims):
    opener = gzip.open if str(path).endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as e:
        raise SourceError(f"{path}: cannot read: {e}") from e
    header = 4 + 4 * dims
    if len(data) < header:
        raise SourceError(f"{path}: truncated IDX header ({len(data)} bytes)")
    got = struct.unpack(">I", data[:4])[0]
    if got != magic:
        raise SourceError(f"{path}: wrong IDX magic {got:#010x}, expected {magic:#010x}")
    shape = struct.unpack(">" + "I" * dims, data[4:header])
    need = header + int(np.prod(shape))
    if len(data) != need:
        raise SourceError(f"{path}: truncated or oversized IDX: {len(data)} bytes, "
                          f"header promises {need} for shape {shape}")
    return np.frombuffer(data, np.uint8, offset=header).reshape(shape)


def read(source, seed=0, count=None, kind="MNIST IDX"):
    folder = Path(source)
    if not folder.is_dir():
        hint = " (install Debian's dataset-fashion-mnist: make data-deps)" if folder == FASHION_MNIST_DIR else ""
        raise SourceError(f"{folder}: MNIST source folder not found{hint}")
    splits, files = {}, []
    for phase, (img_stem, lbl_stem) in IDX_NAMES.items():
        img_path, lbl_path = _find_idx(folder, img_stem), _find_idx(folder, lbl_stem)
        images = _read_idx(img_path, 0x00000803, 3)
        labels = _read_idx(lbl_path, 0x00000801, 1)
        if len(images) != len(labels):
            raise SourceError(f"{img_path}: {len(images)} images but {lbl_path} has {len(labels)} labels")
        if labels.max(initial=0) > 9:
            bad = int(np.argmax(labels > 9))
            raise SourceError(f"{lbl_path}: record {bad}: label {labels[bad]} out of range 0..9")
        splits[phase] = array_split(phase, images[:, None, :, :], labels, 10)
        files += [img_path, lbl_path]
    return Source("mnist", f"{kind} from {folder}", file_fingerprint(files), splits["train"], splits["test"])


def fashion_mnist(seed=0, count=None):
    return read(FASHION_MNIST_DIR, kind="Fashion-MNIST (Debian dataset-fashion-mnist)")


MNIST = register(Dataset(
    name="mnist", label="MNIST", net="lenet", color=False, imagefile_keys=False, fits_in_memory=True,
    quick_iters=200, real_format="a folder of IDX files (train-images-idx3-ubyte, ...)",
    read=read, default=fashion_mnist, standin=False))
