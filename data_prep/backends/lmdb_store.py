"""LMDB (B+tree, memory-mapped) holding Datum records; read by Caffe's Data layer."""
import os
import pwd
import re
import stat
import sys
from pathlib import Path

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
    options = (Option("lmdb_read", "how Caffe reads the LMDB: mmap, its own memory-mapped cursor; "
                             "coalesced, a thread reading records ahead in large pread()s (LMDBIO's DIO + COAL); "
                             "or shared, one coalesced reader per host filling a ring in /dev/shm that every "
                             "solver on the host reads (LMDBIO's LMM; for --concurrent)",
                      kind="choice", choices=("mmap", "coalesced", "shared"), proto_enum="LMDBRead",
                      patch="0012, 0013"),
               Option("lmdb_read_kb", "coalesced, shared: KiB per pread() (default 4096; at least one 4 KiB page)",
                      minimum=4, patch="0012"),
               Option("lmdb_ahead_mb", "coalesced, shared: MiB of records kept read ahead of the cursor (default 64)",
                      minimum=1, patch="0012"),
               Option("lmdb_shared_mb", "shared: MiB of the ring in /dev/shm, one per database, shared by the "
                             "host's solvers (default 64; counted once, in the memory of the solver that wrote it)",
                      minimum=1, patch="0013"),
               datum.TRANSFORM_THREADS)

    def writer(self, split, dest, ctx):
        return _Writer(self.paths(dest, split.phase)[0])

    def items(self, path):
        return raw_items(path)

    def remove_leftovers(self):
        """Every ring of this user's in /dev/shm that no process holds (its solvers died, the
        last before it could remove it), of this artifact's data.mdb or of any other, a file
        replaced since among them: each would otherwise keep its memory from the page cache.
        A file there under this user's ring name that another user owns is left (said once);
        nothing here stops the run."""
        removed = []
        for ring in unused_rings():
            try:
                ring.unlink()  # /dev/shm is sticky: no other user can have put a file at this name since
                removed.append(ring)
            except FileNotFoundError:
                pass
            except OSError as e:
                _say_once(ring, f"{ring}: a ring left in /dev/shm that could not be removed ({e.strerror}); "
                                "it keeps its memory until it is")
        return removed


SHM = Path("/dev/shm")
RING_PREFIX = "caffe-lmdb-shared-"
# caffe/patches/0013: UID-DEVICE-INODE-SIZE-MTIME, the mtime in seconds.nanoseconds
RING_NAME = re.compile(re.escape(RING_PREFIX) + r"\d+-\d+-\d+-\d+-\d+\.\d+")
_said = set()  # what a leftover pass said it left, once per process


def shared_rings(data_mdb):
    """The lmdb_read SHARED rings of this data.mdb (caffe/patches/0013 names them after the
    file's device and inode, then its size and mtime)."""
    st = os.stat(data_mdb)
    return sorted(SHM.glob(f"{RING_PREFIX}{os.getuid()}-{st.st_dev}-{st.st_ino}-*"))


def unused_rings():
    """This user's rings that no process holds a lock on: a live solver always holds one (its
    place among the ring's readers, or, while it makes the ring, the set-up byte). Only a
    regular file, not a link, named as Caffe names a ring of this uid and owned by this
    process's effective user: the names are known to every user of the host, and a file
    another user put there is theirs (it is left, said once)."""
    locked = locked_inodes()
    rings = []
    for path in SHM.glob(f"{RING_PREFIX}{os.getuid()}-*"):
        if not RING_NAME.fullmatch(path.name):
            continue
        try:
            st = path.lstat()
        except FileNotFoundError:  # its last solver removed it meanwhile
            continue
        if st.st_uid != os.geteuid():
            _say_once(path, f"{path}: left in place, not a ring of this user's: it is owned by {_user(st.st_uid)}")
        elif stat.S_ISREG(st.st_mode) and st.st_ino not in locked:
            rings.append(path)
    return sorted(rings)


def _user(uid):
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def _say_once(path, message):
    try:
        key = (str(path), path.lstat().st_ino)
    except OSError:
        key = (str(path), None)
    if key not in _said:
        _said.add(key)
        print(message, file=sys.stderr, flush=True)


def locked_inodes():
    """The inodes that some process holds a file lock on now (/proc/locks)."""
    inodes = set()
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        where = next((f for f in fields if f.count(":") == 2), None)  # MAJ:MIN:INODE
        if where:
            inodes.add(int(where.rsplit(":", 1)[1]))
    return inodes


def raw_items(path):
    """Every (key, value) of an LMDB, in key order, streamed."""
    env = lmdb.open(str(path), readonly=True, lock=False)
    try:
        with env.begin() as txn:
            yield from txn.cursor()
    finally:
        env.close()
