"""LMDB (B+tree, memory-mapped) holding Datum records; read by Caffe's Data layer."""
import lmdb

from data_prep.backends import Backend, register, transform_param, phase_name
from data_prep.backends import datum

MAP_SIZE = 1 << 40  # address space only: the file grows with the data, as in Caffe's db_lmdb


class _Writer:
    def __init__(self, path):
        self.env = lmdb.open(str(path), map_size=MAP_SIZE, subdir=True)
        self.txn, self.pending = self.env.begin(write=True), 0

    def add(self, payload):
        self.txn.put(*payload)
        self.pending += 1
        if self.pending == datum.COMMIT_EVERY:
            self.txn.commit()
            self.txn, self.pending = self.env.begin(write=True), 0

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *_):
        if exc_type is None:
            self.txn.commit()
            self.env.sync()
        else:
            self.txn.abort()
        self.env.close()


@register
class LMDBBackend(Backend):
    name = "lmdb"
    layer = "Data"

    def paths(self, dest, phase):
        return [dest / f"{phase}_lmdb"]

    def encode(self, record, ctx):
        return datum.encode(record, ctx.imagefile_keys)

    def writer(self, split, dest, ctx):
        return _Writer(self.paths(dest, split.phase)[0])

    def read(self, dest, phase, ctx=None):
        env = lmdb.open(str(self.paths(dest, phase)[0]), readonly=True, lock=False)
        try:
            with env.begin() as txn:
                for _, value in txn.cursor():
                    yield datum.decode(value)
        finally:
            env.close()

    def data_layer(self, dest, model, mean_file):
        import caffe
        from caffe import layers as L, params as P

        def layer(batch, phase):
            return L.Data(source=str(self.paths(dest, phase_name(phase))[0]), backend=P.Data.LMDB,
                          batch_size=batch, ntop=2,
                          transform_param=transform_param(model, mean_file, phase))
        return layer
