"""Generated stand-ins, for machines without the real data.

Images are crops of the photographs that ship inside scikit-image's wheel, so they have
natural-image statistics (and PNG sizes near the real datasets'), and labels are
learnable: a class is a photograph (and, for ImageNet, a region of it). Every image is
a pure function of (seed, phase, index), so a stand-in is reproducible and can be made
in parallel.
"""
import hashlib
from functools import lru_cache

import numpy as np

from data_prep.datasets import Split

PHOTOS = ["astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field",
          "immunohistochemistry", "retina", "camera", "coins", "gravel",
          "brick", "grass", "moon", "clock", "horse", "cell"]


@lru_cache(maxsize=None)
def photo(name):
    import skimage.data
    im = getattr(skimage.data, name)()
    if im.ndim == 2:  # grey photographs get a fixed tint so classes differ in colour too
        tint = np.array([0.9, 1.0, 1.1]) if PHOTOS.index(name) % 2 else np.array([1.1, 1.0, 0.85])
        im = np.clip(im[:, :, None] * tint, 0, 255).astype(np.uint8)
    return np.ascontiguousarray(im[:, :, :3])


def crop(rng, picture, region, min_frac, size):
    """A random square crop of `region` (y0, x0, y1, x1) of `picture`, resized to size."""
    from PIL import Image
    y0, x0, y1, x1 = region
    side = int(min(y1 - y0, x1 - x0) * rng.uniform(min_frac, 1.0))
    y = rng.integers(y0, y1 - side + 1)
    x = rng.integers(x0, x1 - side + 1)
    # reducing_gap: PIL first shrinks by an integer factor, then resamples (fast for 500 px -> 32 px)
    patch = Image.fromarray(picture[y:y + side, x:x + side]).resize((size, size), Image.BILINEAR,
                                                                     reducing_gap=3.0)
    img = np.asarray(patch, dtype=np.float32)
    if rng.random() < 0.5:
        img = img[:, ::-1]
    return img * rng.uniform(0.85, 1.15, size=3)  # colour jitter per channel


def to_bgr_chw(img):
    return np.ascontiguousarray(np.clip(img, 0, 255).astype(np.uint8)[:, :, ::-1].transpose(2, 0, 1))


def regions(picture, grid):
    h, w = picture.shape[:2]
    return [(h * r // grid, w * c // grid, h * (r + 1) // grid, w * (c + 1) // grid)
            for r in range(grid) for c in range(grid)]


def generated_split(phase, count, shape, num_classes, seed, make):
    phase_id = 0 if phase == "train" else 1

    def get(i):
        rng = np.random.default_rng([seed, phase_id, i])
        label = int(rng.integers(num_classes))
        return f"{i:08d}", label, make(rng, label)
    return Split(phase, count, shape, get, num_classes)


def fingerprint(*settings):
    return hashlib.sha256(repr(settings).encode()).hexdigest()
