"""Caffe's stock nets and solvers, written with pycaffe's NetSpec.

Each net is described once; only its data layer differs between storage backends.
The data layer comes from the backend (data_prep.backends), so this module knows
nothing about storage; a dataset names its net (data_prep.datasets). A net is emitted
as two prototxt files (train and test net)
referenced by one solver, as Caffe's `train_net`/`test_net` solver fields allow.

Sources: Caffe's examples/mnist/lenet_train_test.prototxt + lenet_solver.prototxt,
examples/cifar10/cifar10_quick_train_test.prototxt + cifar10_quick_solver(_lr1).prototxt,
models/bvlc_reference_caffenet/train_val.prototxt + solver.prototxt, with the paper's
change to CaffeNet: 15,000 iterations instead of 450,000.
"""
from dataclasses import dataclass, field

import caffe
from caffe import layers as L, params as P


@dataclass(frozen=True)
class Transform:
    """What Caffe's DataTransformer does to a Data/ImageData batch (and what writers of
    pre-transformed arrays, HDF5 and memory, must do themselves)."""
    scale: float = 1.0
    mean_file: bool = False  # subtract the dataset's mean.binaryproto
    crop_size: int = 0
    mirror: bool = False


@dataclass(frozen=True)
class Solver:
    base_lr: float
    max_iter: int
    test_iter: int
    test_interval: int
    momentum: float = 0.9
    weight_decay: float = 0.0005
    lr_policy: str = "fixed"
    extra: dict = field(default_factory=dict)  # gamma, power, stepsize, stepvalue
    display: int = 100


@dataclass(frozen=True)
class Model:
    name: str
    batch: int
    test_batch: int
    input_shape: tuple  # C, H, W of what the net's first layer sees (after any crop)
    transform: Transform
    solver: Solver
    params: int        # learned parameters of the net as Caffe builds it
    paper_params: int  # as the paper states them (Figures 3, 9, 13)
    body: callable = None
    top5: bool = False  # the test net also reports top-5 accuracy (ImageNet)


def _xavier():
    return dict(type="xavier")


def _gauss(std):
    return dict(type="gaussian", std=std)


LR = [dict(lr_mult=1), dict(lr_mult=2)]


def lenet_body(n, data):
    n.conv1 = L.Convolution(data, num_output=20, kernel_size=5, stride=1, param=LR,
                            weight_filler=_xavier(), bias_filler=dict(type="constant"))
    n.pool1 = L.Pooling(n.conv1, pool=P.Pooling.MAX, kernel_size=2, stride=2)
    n.conv2 = L.Convolution(n.pool1, num_output=50, kernel_size=5, stride=1, param=LR,
                            weight_filler=_xavier(), bias_filler=dict(type="constant"))
    n.pool2 = L.Pooling(n.conv2, pool=P.Pooling.MAX, kernel_size=2, stride=2)
    n.ip1 = L.InnerProduct(n.pool2, num_output=500, param=LR,
                           weight_filler=_xavier(), bias_filler=dict(type="constant"))
    n.relu1 = L.ReLU(n.ip1, in_place=True)
    n.ip2 = L.InnerProduct(n.relu1, num_output=10, param=LR,
                           weight_filler=_xavier(), bias_filler=dict(type="constant"))
    return n.ip2


def cifar10_quick_body(n, data):
    n.conv1 = L.Convolution(data, num_output=32, pad=2, kernel_size=5, stride=1, param=LR,
                            weight_filler=_gauss(0.0001), bias_filler=dict(type="constant"))
    n.pool1 = L.Pooling(n.conv1, pool=P.Pooling.MAX, kernel_size=3, stride=2)
    n.relu1 = L.ReLU(n.pool1, in_place=True)
    n.conv2 = L.Convolution(n.relu1, num_output=32, pad=2, kernel_size=5, stride=1, param=LR,
                            weight_filler=_gauss(0.01), bias_filler=dict(type="constant"))
    n.relu2 = L.ReLU(n.conv2, in_place=True)
    n.pool2 = L.Pooling(n.relu2, pool=P.Pooling.AVE, kernel_size=3, stride=2)
    n.conv3 = L.Convolution(n.pool2, num_output=64, pad=2, kernel_size=5, stride=1, param=LR,
                            weight_filler=_gauss(0.01), bias_filler=dict(type="constant"))
    n.relu3 = L.ReLU(n.conv3, in_place=True)
    n.pool3 = L.Pooling(n.relu3, pool=P.Pooling.AVE, kernel_size=3, stride=2)
    n.ip1 = L.InnerProduct(n.pool3, num_output=64, param=LR,
                           weight_filler=_gauss(0.1), bias_filler=dict(type="constant"))
    n.ip2 = L.InnerProduct(n.ip1, num_output=10, param=LR,
                           weight_filler=_gauss(0.1), bias_filler=dict(type="constant"))
    return n.ip2


def caffenet_body(n, data, group=2):
    """group=2 is Caffe's CaffeNet (AlexNet's two-GPU split of conv2, conv4, conv5);
    group=1 is the ungrouped net whose parameter count the paper quotes."""
    decay = [dict(lr_mult=1, decay_mult=1), dict(lr_mult=2, decay_mult=0)]

    def conv(bottom, num, k, stride=1, pad=0, group=1, bias=0.0):
        return L.Convolution(bottom, num_output=num, kernel_size=k, stride=stride, pad=pad,
                             group=group, param=decay, weight_filler=_gauss(0.01),
                             bias_filler=dict(type="constant", value=bias))

    def fc(bottom, num, std, bias):
        return L.InnerProduct(bottom, num_output=num, param=decay, weight_filler=_gauss(std),
                              bias_filler=dict(type="constant", value=bias))

    def lrn(bottom):
        return L.LRN(bottom, local_size=5, alpha=0.0001, beta=0.75)

    n.conv1 = conv(data, 96, 11, stride=4)
    n.relu1 = L.ReLU(n.conv1, in_place=True)
    n.pool1 = L.Pooling(n.relu1, pool=P.Pooling.MAX, kernel_size=3, stride=2)
    n.norm1 = lrn(n.pool1)
    n.conv2 = conv(n.norm1, 256, 5, pad=2, group=group, bias=1.0)
    n.relu2 = L.ReLU(n.conv2, in_place=True)
    n.pool2 = L.Pooling(n.relu2, pool=P.Pooling.MAX, kernel_size=3, stride=2)
    n.norm2 = lrn(n.pool2)
    n.conv3 = conv(n.norm2, 384, 3, pad=1)
    n.relu3 = L.ReLU(n.conv3, in_place=True)
    n.conv4 = conv(n.relu3, 384, 3, pad=1, group=group, bias=1.0)
    n.relu4 = L.ReLU(n.conv4, in_place=True)
    n.conv5 = conv(n.relu4, 256, 3, pad=1, group=group, bias=1.0)
    n.relu5 = L.ReLU(n.conv5, in_place=True)
    n.pool5 = L.Pooling(n.relu5, pool=P.Pooling.MAX, kernel_size=3, stride=2)
    n.fc6 = fc(n.pool5, 4096, 0.005, 1.0)
    n.relu6 = L.ReLU(n.fc6, in_place=True)
    n.drop6 = L.Dropout(n.relu6, in_place=True, dropout_ratio=0.5)
    n.fc7 = fc(n.drop6, 4096, 0.005, 1.0)
    n.relu7 = L.ReLU(n.fc7, in_place=True)
    n.drop7 = L.Dropout(n.relu7, in_place=True, dropout_ratio=0.5)
    n.fc8 = fc(n.drop7, 1000, 0.01, 0.0)
    return n.fc8


MODELS = {
    "lenet": Model(
        name="lenet", batch=64, test_batch=100, input_shape=(1, 28, 28),
        params=431_080, paper_params=431_080,
        transform=Transform(scale=0.00390625),
        solver=Solver(base_lr=0.01, max_iter=10_000, test_iter=100, test_interval=500,
                      lr_policy="inv", extra=dict(gamma=0.0001, power=0.75)),
        body=lenet_body),
    # Stock cifar10_quick trains 4,000 iterations at lr 0.001, then resumes from that
    # snapshot for 1,000 at 0.0001; "multistep" gives the same schedule in one process.
    "cifar10_quick": Model(
        name="cifar10_quick", batch=100, test_batch=100, input_shape=(3, 32, 32),
        params=145_578, paper_params=145_578,
        transform=Transform(mean_file=True),
        solver=Solver(base_lr=0.001, max_iter=5_000, test_iter=100, test_interval=500,
                      weight_decay=0.004, lr_policy="multistep",
                      extra=dict(gamma=0.1, stepvalue=[4000])),
        body=cifar10_quick_body),
    # The paper's 62,378,344 counts conv2/4/5 ungrouped; Caffe's CaffeNet groups them
    # (group: 2), which leaves 60,965,224. tests/test_models.py checks both.
    "caffenet": Model(
        name="caffenet", batch=256, test_batch=50, input_shape=(3, 227, 227),
        params=60_965_224, paper_params=62_378_344,
        transform=Transform(mean_file=True, crop_size=227, mirror=True),
        solver=Solver(base_lr=0.01, max_iter=15_000, test_iter=1000, test_interval=1000,
                      lr_policy="step", extra=dict(gamma=0.1, stepsize=100_000), display=20),
        body=caffenet_body, top5=True),
}


def net_proto(model, data_layer, phase, batch=None, emulated=None, host_copies=None):
    """The NetParameter of `model` for one phase, its data coming from `data_layer`:
    a function (batch_size, phase) -> (data, label) tops, as a backend provides.

    emulated: (forward_ms, backward_ms) to replace the whole net after the data layer by
    one EmulatedCompute layer (caffe/patches/0010) that reads the batch and takes that long.
    host_copies: the data layer's emulated_compute_param (host_copy_latency_us, host_copy_gbps:
    caffe/patches/0010), so that it pays the host-to-device copies a GPU build makes."""
    n = caffe.NetSpec()
    batch = batch or (model.batch if phase == caffe.TRAIN else model.test_batch)
    n.data, n.label = data_layer(batch, phase)
    if host_copies:
        n.data.fn.params["emulated_compute_param"] = dict(host_copies)
    if emulated:
        forward_ms, backward_ms = emulated
        n.loss = L.EmulatedCompute(n.data, n.label, loss_weight=1,
                                   emulated_compute_param=dict(forward_ms=forward_ms, backward_ms=backward_ms))
    else:
        logits = model.body(n, n.data)
        if phase == caffe.TEST:
            n.accuracy = L.Accuracy(logits, n.label)
            if model.top5:
                n.accuracy_top5 = L.Accuracy(logits, n.label, accuracy_param=dict(top_k=5))
        n.loss = L.SoftmaxWithLoss(logits, n.label)
    proto = n.to_proto()
    proto.name = f"{model.name}_{'train' if phase == caffe.TRAIN else 'test'}"
    return proto


def solver_text(model, train_net, test_net, snapshot_prefix, gpu, max_iter=None,
                test_iter=None, test_interval=None, seed=None):
    """A solver.prototxt for `model`; the overrides shorten runs (tests, quick matrices)."""
    s = model.solver
    max_iter = max_iter or s.max_iter
    lines = [
        f'train_net: "{_escaped(train_net)}"',
        f'test_net: "{_escaped(test_net)}"',
        f"test_iter: {test_iter or s.test_iter}",
        f"test_interval: {test_interval or s.test_interval}",
        f"base_lr: {s.base_lr}",
        f"momentum: {s.momentum}",
        f"weight_decay: {s.weight_decay}",
        f'lr_policy: "{s.lr_policy}"',
    ]
    for key, value in s.extra.items():
        values = value if isinstance(value, list) else [value]
        lines += [f"{key}: {v}" for v in values]
    lines += [
        f"display: {min(s.display, max_iter)}",
        f"max_iter: {max_iter}",
        # one snapshot at the end, as Caffe always writes one when training finishes
        "snapshot: 0",
        f'snapshot_prefix: "{_escaped(snapshot_prefix)}"',
        f"solver_mode: {'GPU' if gpu else 'CPU'}",
    ]
    if seed is not None:
        lines.append(f"random_seed: {seed}")
    return "\n".join(lines) + "\n"


def _escaped(path):
    """`path` as the inside of a protobuf text format string: a folder named with `"` or `\\`
    (or a control character) must not end the string or change what Caffe reads."""
    from google.protobuf import text_encoding
    return text_encoding.CEscape(str(path), as_utf8=True)


def count_params(net):
    """Learned parameters of a pycaffe Net (weights and biases of every layer)."""
    return sum(blob.data.size for blobs in net.params.values() for blob in blobs)


@dataclass(frozen=True)
class SolverSettings:
    """A run's solver, as written: the stock one's unless shortened (tests, quick matrices)."""
    max_iter: int
    test_iter: int
    test_interval: int
    gpu: bool = False
    seed: int = None

    @classmethod
    def of(cls, model, test_count, iters=None, test_iter=None, test_interval=None, gpu=False, seed=None):
        """test_count: test images the artifact holds (the test passes read no more); the test
        interval is made to divide max_iter so that the last test runs at the last iteration."""
        max_iter = iters or model.solver.max_iter
        return cls(max_iter=max_iter,
                   test_iter=test_iter or min(model.solver.test_iter, max(1, test_count // model.test_batch)),
                   test_interval=dividing_interval(max_iter, test_interval or model.solver.test_interval),
                   gpu=gpu, seed=seed)


def dividing_interval(max_iter, wanted):
    """The largest interval <= wanted that divides max_iter, so that Caffe's last test pass
    runs at the last iteration (Caffe tests after the loop only when it divides)."""
    wanted = max(1, min(wanted, max_iter))
    return next(i for i in range(wanted, 0, -1) if max_iter % i == 0)


def write_net_files(run_dir, model, data_layer, settings, compute):
    """train.prototxt, test.prototxt and solver.prototxt of one run in run_dir. compute: what
    trains (experiments.accelerators.Compute): emulated nets replace the body by its time."""
    train_emulated = compute.emulated
    test_emulated = (compute.test_ms_per_iteration, 0.0) if compute.emulated else None
    for phase, name, emulated in [(caffe.TRAIN, "train", train_emulated), (caffe.TEST, "test", test_emulated)]:
        (run_dir / f"{name}.prototxt").write_text(str(net_proto(model, data_layer, phase, emulated=emulated,
                                                                host_copies=compute.host_copies)))
    (run_dir / "solver.prototxt").write_text(solver_text(
        model, run_dir / "train.prototxt", run_dir / "test.prototxt", run_dir / "snapshot", gpu=settings.gpu,
        max_iter=settings.max_iter, test_iter=settings.test_iter, test_interval=settings.test_interval,
        seed=settings.seed))

