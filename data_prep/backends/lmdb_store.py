"""LMDB (B+tree, memory-mapped) holding Datum records; read by Caffe's Data layer."""
import lmdb

from data_prep.backends import Backend, register
from data_prep.backends import datum

MAP_SIZE = 1 << 40  # address space only: the file grows with the data, as in Caffe's db_lmdb


class _Writer:
    def __init__(self, path):
        # Caffe's db_lmdb syncs at every commit; one sync at the end is enough here, because an
        # artifact counts only once it is complete and renamed (build.write_artifact). It lets
        # the disk write while the next records are decoded.
        self.env = lmdb.open(str(path), map_size=MAP_SIZE, subdir=True, sync=False)
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
            self.env.sync(True)  # force: the environment was opened with sync=False
        else:
            self.txn.abort()
        self.env.close()


@register
class LMDBBackend(datum.DatumBackend, Backend):
    name = "lmdb"
    db = "LMDB"

    def writer(self, split, dest, ctx):
        return _Writer(self.paths(dest, split.phase)[0])

    def read(self, dest, phase, ctx=None):
        for _, value in raw_items(self.paths(dest, phase)[0]):
            yield datum.decode(value)


def raw_items(path):
    """Every (key, value) of an LMDB, in key order, streamed."""
    env = lmdb.open(str(path), readonly=True, lock=False)
    try:
        with env.begin() as txn:
            yield from txn.cursor()
    finally:
        env.close()
