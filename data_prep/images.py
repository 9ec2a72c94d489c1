"""Image files as Caffe reads them (OpenCV), and as the image-file backend writes them (PNG)."""
import io

import numpy as np

from data_prep.errors import SourceError


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


def png_bytes(pixels):
    """C x H x W BGR uint8 -> PNG (grey for one channel), decoded by OpenCV back to BGR."""
    from PIL import Image
    if pixels.shape[0] == 1:
        im = Image.fromarray(pixels[0], "L")
    else:
        im = Image.fromarray(np.ascontiguousarray(pixels[::-1].transpose(1, 2, 0)), "RGB")
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return buf.getvalue()
