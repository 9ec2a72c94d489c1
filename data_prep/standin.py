"""Generated stand-ins for CIFAR-10 and ImageNet, for machines without the real data.

Images are crops of the photographs that ship inside scikit-image's wheel, so they have
natural-image statistics (and PNG sizes near the real datasets'), and labels are
learnable: a class is a photograph (and, for ImageNet, a region of it). Every image is
a pure function of (seed, phase, index), so a stand-in is reproducible and can be made
in parallel.
"""
import hashlib
from functools import lru_cache

import numpy as np

from data_prep.sources import Source, Split

PHOTOS = ["astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field",
          "immunohistochemistry", "retina", "camera", "coins", "gravel",
          "brick", "grass", "moon", "clock", "horse", "cell"]


@lru_cache(maxsize=None)
def _photo(name):
    import skimage.data
    im = getattr(skimage.data, name)()
    if im.ndim == 2:  # grey photographs get a fixed tint so classes differ in colour too
        tint = np.array([0.9, 1.0, 1.1]) if PHOTOS.index(name) % 2 else np.array([1.1, 1.0, 0.85])
        im = np.clip(im[:, :, None] * tint, 0, 255).astype(np.uint8)
    return np.ascontiguousarray(im[:, :, :3])


def _crop(rng, photo, region, min_frac, size):
    """A random square crop of `region` (y0, x0, y1, x1) of `photo`, resized to size."""
    from PIL import Image
    y0, x0, y1, x1 = region
    side = int(min(y1 - y0, x1 - x0) * rng.uniform(min_frac, 1.0))
    y = rng.integers(y0, y1 - side + 1)
    x = rng.integers(x0, x1 - side + 1)
    # reducing_gap: PIL first shrinks by an integer factor, then resamples (fast for 500 px -> 32 px)
    patch = Image.fromarray(photo[y:y + side, x:x + side]).resize((size, size), Image.BILINEAR,
                                                                   reducing_gap=3.0)
    img = np.asarray(patch, dtype=np.float32)
    if rng.random() < 0.5:
        img = img[:, ::-1]
    img = img * rng.uniform(0.85, 1.15, size=3)  # colour jitter per channel
    return img


def _to_bgr_chw(img):
    return np.ascontiguousarray(np.clip(img, 0, 255).astype(np.uint8)[:, :, ::-1].transpose(2, 0, 1))


def _regions(photo, grid):
    h, w = photo.shape[:2]
    return [(h * r // grid, w * c // grid, h * (r + 1) // grid, w * (c + 1) // grid)
            for r in range(grid) for c in range(grid)]


def _class_region(label, grid):
    photo = _photo(PHOTOS[label % len(PHOTOS)])
    return photo, _regions(photo, grid)[(label // len(PHOTOS)) % (grid * grid)]


def _split(phase, count, shape, num_classes, seed, make):
    phase_id = 0 if phase == "train" else 1

    def get(i):
        rng = np.random.default_rng([seed, phase_id, i])
        label = int(rng.integers(num_classes))
        return f"{i:08d}", label, make(rng, label)
    return Split(phase, count, shape, get, num_classes)


def _fingerprint(*settings):
    return hashlib.sha256(repr(settings).encode()).hexdigest()


def cifar10(seed=0, train_count=None, test_count=None):
    """50,000 + 10,000 colour 32x32 images in 10 classes (one photograph each)."""
    train_count = train_count or 50_000
    test_count = test_count or (10_000 if train_count == 50_000 else max(100, train_count // 5))

    def make(rng, label):
        photo = _photo(PHOTOS[label])
        h, w = photo.shape[:2]
        return _to_bgr_chw(_crop(rng, photo, (0, 0, h, w), 0.15, 32))

    return Source("cifar10", f"generated CIFAR-10 stand-in (seed {seed}, scikit-image photographs)",
                  _fingerprint("cifar10-standin-v2", seed, train_count, test_count),
                  _split("train", train_count, (3, 32, 32), 10, seed, make),
                  _split("test", test_count, (3, 32, 32), 10, seed, make))


IMAGENET_NOISE = 5.5  # sensor-like noise: brings 256x256 PNGs to ImageNet's ~110 KB


def imagenet(seed=0, train_count=None, test_count=None, num_classes=100):
    """256x256 colour images; a class is one of a 3x3 grid of regions of a photograph."""
    train_count = train_count or 2_000
    test_count = test_count or max(num_classes, train_count // 10)

    def make(rng, label):
        photo, region = _class_region(label, grid=3)
        img = _crop(rng, photo, region, 0.5, 256)
        img = img + rng.normal(0, IMAGENET_NOISE, img.shape)
        return _to_bgr_chw(img)

    return Source("imagenet", f"generated ImageNet stand-in (seed {seed}, {num_classes} classes, "
                  "scikit-image photographs, 256x256)",
                  _fingerprint("imagenet-standin-v2", seed, train_count, test_count, num_classes),
                  _split("train", train_count, (3, 256, 256), num_classes, seed, make),
                  _split("test", test_count, (3, 256, 256), num_classes, seed, make))
