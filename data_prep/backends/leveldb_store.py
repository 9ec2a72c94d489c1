"""LevelDB (log-structured merge tree, snappy-compressed) holding Datum records; Caffe's Data layer."""
import plyvel

from data_prep.backends import Backend, register, transform_param, phase_name
from data_prep.backends import datum

# the options Caffe's db_leveldb.cpp opens a new database with
OPTIONS = dict(block_size=65536, write_buffer_size=268435456, max_open_files=100)


class _Writer:
    def __init__(self, path):
        self.db = plyvel.DB(str(path), create_if_missing=True, error_if_exists=True, **OPTIONS)
        self.batch, self.pending = self.db.write_batch(), 0

    def add(self, payload):
        self.batch.put(*payload)
        self.pending += 1
        if self.pending == datum.COMMIT_EVERY:
            self.batch.write()
            self.batch, self.pending = self.db.write_batch(), 0

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *_):
        if exc_type is None:
            self.batch.write()
        self.db.close()


@register
class LevelDBBackend(Backend):
    name = "leveldb"
    layer = "Data"

    def paths(self, dest, phase):
        return [dest / f"{phase}_leveldb"]

    def encode(self, record, ctx):
        return datum.encode(record, ctx.imagefile_keys)

    def writer(self, split, dest, ctx):
        return _Writer(self.paths(dest, split.phase)[0])

    def read(self, dest, phase, ctx=None):
        db = plyvel.DB(str(self.paths(dest, phase)[0]))
        try:
            for _, value in db.iterator():
                yield datum.decode(value)
        finally:
            db.close()

    def data_layer(self, dest, model, mean_file):
        from caffe import layers as L, params as P

        def layer(batch, phase):
            return L.Data(source=str(self.paths(dest, phase_name(phase))[0]), backend=P.Data.LEVELDB,
                          batch_size=batch, ntop=2,
                          transform_param=transform_param(model, mean_file, phase))
        return layer
