"""Where the training images come from: the datasets' own formats, or generated stand-ins.

Every source yields the same thing, a Split per phase: a count, a (C, H, W) shape and a
way to iterate (name, label, pixels) records, pixels being uint8 in C x H x W order with
colour channels in **BGR** order. BGR is Caffe's convention (OpenCV decodes to BGR, so
ImageData and convert_imageset give BGR); CIFAR-10's binary batches are RGB planes and are
reordered here, so that every backend, PNG files included, hands the net the same numbers.
"""
import gzip
import hashlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Tuple

import numpy as np

Record = Tuple[str, int, np.ndarray]  # (name, label, pixels C x H x W uint8, BGR)


class SourceError(ValueError):
    """Bad input: the message names the file or record and what is wrong with it."""


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


def _array_split(phase, images, labels, num_classes):
    images = np.ascontiguousarray(images)

    def get(i):
        return f"{i:08d}", int(labels[i]), images[i]
    return Split(phase, len(labels), tuple(images.shape[1:]), get, num_classes, in_memory=True)


def _fingerprint(paths):
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


# --- MNIST (IDX) -------------------------------------------------------------------

FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
IDX_NAMES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
             "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def _find_idx(folder, stem):
    for name in (stem, stem + ".gz"):
        if (folder / name).exists():
            return folder / name
    # Debian's Fashion-MNIST and some mirrors use '.' for the '-' before 'idx'
    alt = stem.replace("-idx", ".idx")
    for name in (alt, alt + ".gz"):
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


def mnist(source=None):
    folder = Path(source) if source else FASHION_MNIST_DIR
    if not folder.is_dir():
        hint = " (install Debian's dataset-fashion-mnist: make data-deps)" if not source else ""
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
        splits[phase] = _array_split(phase, images[:, None, :, :], labels, 10)
        files += [img_path, lbl_path]
    kind = "Fashion-MNIST (Debian dataset-fashion-mnist)" if not source else "MNIST IDX"
    return Source("mnist", f"{kind} from {folder}", _fingerprint(files), splits["train"], splits["test"])


# --- CIFAR-10 (binary batches) or a stand-in ------------------------------------------

CIFAR_RECORD = 1 + 3 * 32 * 32


def _read_cifar_batch(path):
    data = Path(path).read_bytes()
    if len(data) == 0 or len(data) % CIFAR_RECORD:
        raise SourceError(f"{path}: {len(data)} bytes is not a multiple of the "
                          f"{CIFAR_RECORD}-byte CIFAR-10 record")
    rec = np.frombuffer(data, np.uint8).reshape(-1, CIFAR_RECORD)
    labels = rec[:, 0]
    if labels.max() > 9:
        bad = int(np.argmax(labels > 9))
        raise SourceError(f"{path}: record {bad}: label {labels[bad]} out of range 0..9")
    rgb = rec[:, 1:].reshape(-1, 3, 32, 32)
    return rgb[:, ::-1], labels  # RGB planes -> BGR


def cifar10(source=None, seed=0, count=None):
    if source is None:
        from data_prep import standin
        return standin.cifar10(seed=seed, train_count=count)
    folder = Path(source)
    names = {"train": [f"data_batch_{i}.bin" for i in range(1, 6)], "test": ["test_batch.bin"]}
    splits, files = {}, []
    for phase, batch_names in names.items():
        parts = []
        for name in batch_names:
            path = folder / name
            if not path.exists():
                raise SourceError(f"{path}: missing CIFAR-10 binary batch")
            parts.append(_read_cifar_batch(path))
            files.append(path)
        images = np.concatenate([p[0] for p in parts])
        labels = np.concatenate([p[1] for p in parts])
        splits[phase] = _array_split(phase, images, labels, 10)
    return Source("cifar10", f"CIFAR-10 binary batches from {folder}", _fingerprint(files),
                  splits["train"], splits["test"])


# --- ImageNet (a folder tree of class folders) or a stand-in ---------------------------

IMAGE_EXTENSIONS = {".jpeg", ".jpg", ".png", ".bmp", ".ppm"}


def decode_image(path, size=None, color=True):
    """Decode an image file to C x H x W uint8 (BGR), as Caffe's ReadImageToCVMat does for
    convert_imageset and the ImageData layer: cv::imread, then cv::resize to size x size
    with its default bilinear interpolation (PIL's bilinear filter gives other pixels)."""
    import cv2
    cv2.setNumThreads(1)  # the parallelism is across the conversion workers
    img = cv2.imread(str(path), cv2.IMREAD_COLOR if color else cv2.IMREAD_GRAYSCALE)
    if img is None:
        raise SourceError(f"{path}: not a readable image (OpenCV cannot decode it)")
    if size:
        img = cv2.resize(img, (size, size))
    return np.ascontiguousarray(img.transpose(2, 0, 1)) if color else img[None]


def _list_tree(train_dir):
    classes = sorted(d.name for d in Path(train_dir).iterdir() if d.is_dir())
    if not classes:
        raise SourceError(f"{train_dir}: no class sub-folders")
    items = []
    for label, cls in enumerate(classes):
        files = sorted(p for p in (Path(train_dir) / cls).iterdir()
                       if p.suffix.lower() in IMAGE_EXTENSIONS)
        if not files:
            raise SourceError(f"{Path(train_dir) / cls}: empty class folder (no images)")
        items += [(p, label) for p in files]
    return classes, items


def _read_val_list(path, root, num_classes):
    items = []
    for lineno, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            name, label = line.rsplit(None, 1)
            label = int(label)
        except ValueError:
            raise SourceError(f"{path}:{lineno}: expected 'file label', got {line!r}") from None
        if not 0 <= label < num_classes:
            raise SourceError(f"{path}:{lineno}: label {label} out of range 0..{num_classes - 1}")
        items.append((Path(root) / name, label))
    return items


def _file_split(phase, items, root, num_classes, size=256):
    def get(i):
        path, label = items[i]
        return f"{i:08d}_{Path(path).relative_to(root)}", label, decode_image(path, size)
    return Split(phase, len(items), (3, size, size), get, num_classes, decodes_files=True)


def imagenet(source=None, seed=0, count=None):
    """A real tree: SOURCE/train/<class>/*.JPEG, SOURCE/val/*, SOURCE/val.txt ('file label')."""
    if source is None:
        from data_prep import standin
        return standin.imagenet(seed=seed, train_count=count)
    root = Path(source)
    classes, train = _list_tree(root / "train")
    if count:
        rng = np.random.default_rng(seed)
        train = [train[i] for i in sorted(rng.choice(len(train), min(count, len(train)), replace=False))]
    if not (root / "val.txt").exists():
        raise SourceError(f"{root / 'val.txt'}: missing validation list ('file label' per line)")
    val = _read_val_list(root / "val.txt", root / "val", len(classes))
    fp = hashlib.sha256("\n".join(f"{p}:{os.path.getsize(p)}:{l}" for p, l in train + val).encode())
    return Source("imagenet", f"ImageNet-layout tree at {root} ({len(classes)} classes)",
                  fp.hexdigest(), _file_split("train", train, root / "train", len(classes)),
                  _file_split("test", val, root / "val", len(classes)))


DATASETS = {"mnist": mnist, "cifar10": cifar10, "imagenet": imagenet}


def load(dataset, source=None, seed=0, count=None):
    if dataset not in DATASETS:
        raise SourceError(f"unknown dataset {dataset!r}; choose from {', '.join(DATASETS)}")
    if dataset == "mnist":
        return mnist(source)
    return DATASETS[dataset](source, seed=seed, count=count)
