"""Caffe Datum records, serialised with the caffe_pb2 generated from Caffe's own caffe.proto,
and what the key-value backends (LMDB, LevelDB) share: writing in batches, Caffe's Data layer."""
import numpy as np

from caffe.proto import caffe_pb2
from data_prep.options import Option

COMMIT_EVERY = 1000  # records per transaction/batch, as Caffe's convert_* tools commit

# the Data layer's option every Datum backend declares (one declaration: run.py makes one flag of it)
TRANSFORM_THREADS = Option("transform_threads", "threads that transform a batch's records (default 1, stock "
                           "Caffe: the prefetch thread alone); the records are still read and the random crops "
                           "and mirrors drawn on the prefetch thread in the stock order", minimum=1, patch="0016")


def key(name):
    """convert_mnist_data: '%08d'; convert_imageset: '%08d_' + file name (both via the name)."""
    return name.encode()


def encode(record, imagefile_style):
    name, label, pixels = record
    c, h, w = pixels.shape
    d = caffe_pb2.Datum(channels=c, height=h, width=w, data=pixels.tobytes(), label=label)
    if imagefile_style:
        d.encoded = False  # convert_imageset (CVMatToDatum) sets it explicitly
    return key(name), d.SerializeToString()


def decode(value):
    d = caffe_pb2.Datum()
    d.ParseFromString(value)
    if d.encoded:
        raise ValueError("encoded Datum: this project stores raw pixels")
    pixels = np.frombuffer(d.data, np.uint8).reshape(d.channels, d.height, d.width)
    return d.label, pixels


class BatchWriter:
    """Puts (key, value) pairs in batches of COMMIT_EVERY; subclasses open the store and say
    how a batch is begun, committed and dropped."""

    def __init__(self):
        self.batch, self.pending = self.begin(), 0

    def add(self, payload):
        self.batch.put(*payload)
        self.pending += 1
        if self.pending == COMMIT_EVERY:
            self.commit()
            self.batch, self.pending = self.begin(), 0

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *_):
        if exc_type is None:
            self.commit()
            self.finish()
        else:
            self.abandon()

    def begin(self):
        raise NotImplementedError

    def commit(self):
        raise NotImplementedError

    def finish(self):
        """After the last commit: make it durable and close."""
        raise NotImplementedError

    def abandon(self):
        raise NotImplementedError


class DatumBackend:
    """Datum records read by Caffe's Data layer. Subclasses set `name`, `db` (the Data
    layer's backend enum name) and provide `writer` and `items`."""
    layer = "Data"
    db = ""

    def paths(self, dest, phase):
        return [dest / f"{phase}_{self.name}"]

    def encode(self, record, ctx):
        return encode(record, ctx.dataset.imagefile_keys)

    def read(self, dest, phase, ctx):
        for _, value in self.items(self.paths(dest, phase)[0]):
            yield decode(value)

    def source(self, dest, phase):
        """The Data layer's `source` for one split."""
        return str(self.paths(dest, phase)[0])

    def data_layer(self, dest, dataset, mean_file, read_options=None, source=None):
        """source: another database of this kind to read instead of the split's (a benchmark's
        own copy), with this backend's options and transform."""
        from caffe import layers as L, params as P
        from data_prep.backends import transform_param, phase_name
        options = self.layer_options(read_options)

        def layer(batch, phase):
            return L.Data(source=source or self.source(dest, phase_name(phase)), backend=getattr(P.Data, self.db),
                          batch_size=batch, ntop=2, **options,
                          transform_param=transform_param(dataset.model, mean_file, phase))
        return layer
