"""LevelDB (log-structured merge tree, snappy-compressed) holding Datum records; Caffe's Data layer."""
import plyvel

from data_prep.backends import Backend, register
from data_prep.backends import datum

# the options Caffe's db_leveldb.cpp opens a new database with
OPTIONS = dict(block_size=65536, write_buffer_size=268435456, max_open_files=100)


class _Writer:
    def __init__(self, path):
        self.path = path
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
        if exc_type is None:
            settle(self.path)


def settle(path):
    """Closing leaves the last write buffer (up to Caffe's 256 MB) in the write-ahead log, and
    the next open, Caffe's first training run, turns it into a table: a run would pay for
    writing, and the footprint would count those records twice. Open once now instead."""
    plyvel.DB(str(path), **OPTIONS).close()


@register
class LevelDBBackend(datum.DatumBackend, Backend):
    name = "leveldb"
    db = "LEVELDB"

    def writer(self, split, dest, ctx):
        return _Writer(self.paths(dest, split.phase)[0])

    def read(self, dest, phase, ctx=None):
        db = plyvel.DB(str(self.paths(dest, phase)[0]))
        try:
            for _, value in db.iterator():
                yield datum.decode(value)
        finally:
            db.close()
