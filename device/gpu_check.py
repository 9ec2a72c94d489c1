#!/usr/bin/env python3
"""On a GPU machine: do Caffe's GPU paths (cuDNN convolution, pooling, ReLU, LRN, softmax;
cuBLAS inner products) compute what its CPU paths compute? For each stock net, one forward
and backward pass of the same weights and inputs in CPU and in GPU mode, compared blob by
blob (relative L2 error of the loss, every activation and every parameter gradient). The
nets run in their TEST phase so that dropout is the identity and both modes see one net.

On Ampere and later GPUs cuDNN may use TF32 tensor cores for float32 convolutions (10-bit
mantissa), which on the H100 gave relative errors up to 0.25 (CaffeNet's conv1 gradient)
against 1.4e-2 with NVIDIA_TF32_OVERRIDE=0. The check says which mode it ran in; compare
exactly with NVIDIA_TF32_OVERRIDE=0. Training is run with the default (TF32 allowed), as a
user of cuDNN 9 would.

  python3 device/gpu_check.py [--gpu 0] [--batch 8]
"""
import argparse
import os
import sys
import tempfile

import numpy as np


os.environ.setdefault("GLOG_minloglevel", "2")  # Caffe logs every layer it builds
import caffe  # noqa: E402
from caffe import layers as L  # noqa: E402

from models.nets import MODELS  # noqa: E402

TOLERANCE = 1e-3  # float32 with different summation orders (cuDNN algorithms, cuBLAS)
TF32_TOLERANCE = 0.3  # TF32 convolutions: 10-bit mantissa, errors grow with the reduction size


def input_net(model, batch):
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[batch, *model.input_shape]))
    n.label = L.Input(shape=dict(dim=[batch]))
    n.loss = L.SoftmaxWithLoss(model.body(n, n.data), n.label)
    proto = n.to_proto()
    proto.force_backward = True
    return str(proto)


def run(prototxt, mode, params, data, label, gpu):
    if mode == "gpu":
        caffe.set_device(gpu)
        caffe.set_mode_gpu()
    else:
        caffe.set_mode_cpu()
    net = caffe.Net(prototxt, caffe.TEST)
    for name, blobs in params.items():
        for blob, values in zip(net.params[name], blobs):
            blob.data[...] = values
    net.blobs["data"].data[...] = data
    net.blobs["label"].data[...] = label
    net.forward()
    net.backward()
    acts = {k: b.data.copy() for k, b in net.blobs.items()}
    grads = {f"{k}[{i}]": b.diff.copy() for k, bs in net.params.items() for i, b in enumerate(bs)}
    return acts, grads


def rel(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpu", type=int, default=0)
    p.add_argument("--batch", type=int, default=8)
    a = p.parse_args(argv)
    rng = np.random.default_rng(0)
    worst_all = 0.0
    for dataset, model in MODELS.items():
        with tempfile.NamedTemporaryFile("w", suffix=".prototxt", delete=False) as f:
            f.write(input_net(model, a.batch))
        caffe.set_mode_cpu()
        init = caffe.Net(f.name, caffe.TEST)  # Caffe's own fillers give realistic weights
        params = {k: [b.data.copy() for b in bs] for k, bs in init.params.items()}
        data = rng.standard_normal((a.batch, *model.input_shape)).astype(np.float32)
        label = rng.integers(0, 10, a.batch).astype(np.float32)
        cpu = run(f.name, "cpu", params, data, label, a.gpu)
        gpu = run(f.name, "gpu", params, data, label, a.gpu)
        errors = {f"act {k}": rel(gpu[0][k], cpu[0][k]) for k in cpu[0]}
        errors.update({f"grad {k}": rel(gpu[1][k], cpu[1][k]) for k in cpu[1]})
        worst = max(errors, key=errors.get)
        worst_all = max(worst_all, errors[worst])
        print(f"{model.name:14s} loss cpu {float(cpu[0]['loss']):.6f} gpu {float(gpu[0]['loss']):.6f}  "
              f"{len(errors)} blobs, worst relative error {errors[worst]:.2e} ({worst})")
    tf32 = os.environ.get("NVIDIA_TF32_OVERRIDE") != "0"
    tolerance = TF32_TOLERANCE if tf32 else TOLERANCE
    ok = worst_all < tolerance
    print(f"TF32 {'allowed (set NVIDIA_TF32_OVERRIDE=0 for a strict float32 check)' if tf32 else 'off'}; "
          f"GPU matches CPU within {tolerance:g}: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
