"""One PNG file per image plus the 'path label' list that Caffe's ImageData layer reads."""
import io
from pathlib import Path

import numpy as np
from PIL import Image

from data_prep.backends import Backend, register, transform_param, phase_name


def png_bytes(pixels):
    """C x H x W BGR uint8 -> PNG (grey for one channel), decoded by OpenCV back to BGR."""
    if pixels.shape[0] == 1:
        im = Image.fromarray(pixels[0], "L")
    else:
        im = Image.fromarray(np.ascontiguousarray(pixels[::-1].transpose(1, 2, 0)), "RGB")
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return buf.getvalue()


def png_pixels(path, channels):
    """Read back as the ImageData layer does (OpenCV, BGR or grey)."""
    from data_prep.sources import decode_image
    return decode_image(path, color=channels == 3)


class _ListWriter:
    def __init__(self, path):
        self.path = path
        self.f = open(path, "w")

    def add(self, payload):
        rel, label = payload
        self.f.write(f"{rel} {label}\n")

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.f.close()


@register
class ImageFilesBackend(Backend):
    name = "images"
    layer = "ImageData"

    def paths(self, dest, phase):
        return [dest / phase, dest / f"{phase}.txt"]

    def encode(self, record, ctx):
        name, label, pixels = record
        phase_dir = ctx.phase_dir  # set by writer(), which runs before any encode
        rel = f"{phase_dir.name}/{name[:8]}.png"
        (phase_dir / f"{name[:8]}.png").write_bytes(png_bytes(pixels))
        return rel, label

    def writer(self, split, dest, ctx):
        (dest / split.phase).mkdir(parents=True, exist_ok=True)
        ctx.phase_dir = dest / split.phase
        return _ListWriter(dest / f"{split.phase}.txt")

    def read(self, dest, phase, ctx=None):
        dest = Path(dest)
        for line in (dest / f"{phase}.txt").read_text().splitlines():
            rel, label = line.rsplit(" ", 1)
            path = dest / rel
            channels = 1 if ctx is not None and ctx.dataset == "mnist" else 3
            yield int(label), png_pixels(path, channels)

    def data_layer(self, dest, model, mean_file):
        from caffe import layers as L

        def layer(batch, phase):
            p = phase_name(phase)
            return L.ImageData(source=str(Path(dest) / f"{p}.txt"), root_folder=str(dest) + "/",
                               batch_size=batch, is_color=model.dataset != "mnist", shuffle=False,
                               ntop=2, transform_param=transform_param(model, mean_file, phase))
        return layer
