"""LevelDB (log-structured merge tree, snappy-compressed) holding Datum records; Caffe's Data layer."""
import plyvel

from data_prep.backends import Backend, register
from data_prep.backends import datum

# the options Caffe's db_leveldb.cpp opens a new database with
OPTIONS = dict(block_size=65536, write_buffer_size=268435456, max_open_files=100)


class _Writer(datum.BatchWriter):
    def __init__(self, path):
        self.path = path
        self.db = plyvel.DB(str(path), create_if_missing=True, error_if_exists=True, **OPTIONS)
        super().__init__()

    def begin(self):
        return self.db.write_batch()

    def commit(self):
        self.batch.write()

    def finish(self):
        self.db.close()
        settle(self.path)

    def abandon(self):
        self.db.close()


def settle(path):
    """Closing leaves the last write buffer (up to Caffe's 256 MB) in the write-ahead log, and
    the next open, Caffe's first training run, turns it into a table: a run would pay for
    writing, and the footprint would count those records twice. Open once now instead."""
    plyvel.DB(str(path), **OPTIONS).close()


@register
class LevelDBBackend(datum.DatumBackend, Backend):
    name, label, color = "leveldb", "LevelDB", "#66a61e"
    db = "LEVELDB"
    options = (datum.TRANSFORM_THREADS,)

    def writer(self, split, dest, ctx):
        return _Writer(self.paths(dest, split.phase)[0])

    def items(self, path):
        db = plyvel.DB(str(path))
        try:
            yield from db.iterator()
        finally:
            db.close()
