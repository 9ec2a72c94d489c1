"""LMDB (B+tree, memory-mapped) holding Datum records; read by Caffe's Data layer."""
import lmdb

from data_prep.backends import Backend, register
from data_prep.backends import datum

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
    read_options = ("lmdb_read",)
    read_paths = ("mmap", "coalesced")  # lmdb_read: LMDB's memory map (Caffe's own), or LMDBIO's DIO + COAL

    def layer_options(self, read_options):
        options = dict(read_options or {})
        if "lmdb_read" in options:
            from caffe.proto import caffe_pb2
            from data_prep.errors import SourceError
            if "lmdb_read" not in caffe_pb2.DataParameter.DESCRIPTOR.fields_by_name:
                raise SourceError("this Caffe build has no lmdb_read (caffe/patches/0013: run make caffe)")
            if options["lmdb_read"] not in self.read_paths:
                raise SourceError(f"lmdb_read {options['lmdb_read']!r}: choose from {', '.join(self.read_paths)}")
            options["lmdb_read"] = caffe_pb2.DataParameter.LMDBRead.Value(options["lmdb_read"].upper())
        return options

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
