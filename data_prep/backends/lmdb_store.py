"""LMDB (B+tree, memory-mapped) holding Datum records; read by Caffe's Data layer."""
import lmdb

from data_prep.backends import Backend, register
from data_prep.backends import datum
from data_prep.options import Option

MAP_SIZE = 1 << 40  # address space only: the file grows with the data, as in Caffe's db_lmdb


class _Writer(datum.BatchWriter):
    def __init__(self, path):
        # Caffe's db_lmdb syncs at every commit; one sync at the end is enough here, because an
        # artifact counts only once it is complete and renamed (build.write_artifact). It lets
        # the disk write while the next records are decoded.
        self.env = lmdb.open(str(path), map_size=MAP_SIZE, subdir=True, sync=False)
        super().__init__()

    def begin(self):
        return self.env.begin(write=True)

    def commit(self):
        self.batch.commit()

    def finish(self):
        self.env.sync(True)  # force: the environment was opened with sync=False
        self.env.close()

    def abandon(self):
        self.batch.abort()
        self.env.close()


@register
class LMDBBackend(datum.DatumBackend, Backend):
    name, label, color = "lmdb", "LMDB", "#1b9e77"
    db = "LMDB"
    options = (Option("lmdb_read", "how Caffe reads the LMDB: mmap, its own memory-mapped cursor, or "
                             "coalesced, a thread reading records ahead in large pread()s (LMDBIO's DIO + COAL)",
                      kind="choice", choices=("mmap", "coalesced"), proto_enum="LMDBRead", patch="0013"),
               Option("lmdb_read_kb", "coalesced: KiB per pread() (default 4096; at least one 4 KiB page)",
                      minimum=4, patch="0013"),
               Option("lmdb_ahead_mb", "coalesced: MiB of records kept read ahead of the cursor (default 64)",
                      minimum=1, patch="0013"))

    def writer(self, split, dest, ctx):
        return _Writer(self.paths(dest, split.phase)[0])

    def items(self, path):
        return raw_items(path)


def raw_items(path):
    """Every (key, value) of an LMDB, in key order, streamed."""
    env = lmdb.open(str(path), readonly=True, lock=False)
    try:
        with env.begin() as txn:
            yield from txn.cursor()
    finally:
        env.close()
