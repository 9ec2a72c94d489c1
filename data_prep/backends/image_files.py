"""One PNG file per image plus the 'path label' list that Caffe's ImageData layer reads."""
from pathlib import Path

from data_prep.backends import Backend, register, transform_param, phase_name
from data_prep.images import decode_image, png_bytes
from data_prep.options import Option


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
    name, label, color = "images", "image files (PNG)", "#d95f02"
    layer = "ImageData"
    options = (Option("decode_threads", "threads that decode and transform a batch's images (default 1, stock Caffe: "
                      "the prefetch thread alone); the random crops and mirrors are still drawn in the stock order",
                      minimum=1, patch="0015", message="ImageDataParameter"),)

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

    def read(self, dest, phase, ctx):
        dest = Path(dest)
        for line in (dest / f"{phase}.txt").read_text().splitlines():
            rel, label = line.rsplit(" ", 1)
            yield int(label), decode_image(dest / rel, color=ctx.dataset.color)

    def data_layer(self, dest, dataset, mean_file, read_options=None):
        from caffe import layers as L

        options = self.layer_options(read_options)

        def layer(batch, phase):
            p = phase_name(phase)
            return L.ImageData(source=str(Path(dest) / f"{p}.txt"), root_folder=str(dest) + "/",
                               batch_size=batch, is_color=dataset.color, shuffle=False, ntop=2, **options,
                               transform_param=transform_param(dataset.model, mean_file, phase))
        return layer
