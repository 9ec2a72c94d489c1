"""Faults and neighbours of the shared LMDB ring (caffe/patches/0013) and of the records Caffe's
Data layer reads (0014), each with real processes and files:

- a writer killed inside its locked section leaves no torn record: the next writer goes on
  from the record after the last one published, no record twice, none skipped;
- a ring left half made (its maker killed before setting it up) is made again at once;
- a file at the ring's name made by another user, or a symbolic link there, is refused;
- a writer that stops (SIGSTOP) while the others run stops them with an error naming it and
  saying it is stopped, not a hang, even when it stopped holding the ring's lock;
- a record cut short, or whose data does not fill its shape, is an error naming its key.

The ring's reader here is tests/native/ring_faults.cpp: Caffe's own ring code compiled with
CAFFE_RING_FAULT hooks that end the process at an exact point, as a kill there would.
"""
import os
import re
import signal
import stat
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, line_within, net_process
from test_lmdb_read import net_file

RECORDS = 300
NOBODY = 65534


@pytest.fixture(scope="module")
def ring_reader(tmp_path_factory):
    """tests/native/ring_faults.cpp against this build's patched ring source."""
    import toolchain
    build = Path(os.path.realpath(toolchain.ROOT / ".build" / "caffe-build"))
    source = build.parent / "src"
    prefix = toolchain.ROOT / ".build" / "caffe"
    if not (source / "src/caffe/util/db_lmdb_shared.cpp").exists():
        pytest.fail(f"no patched Caffe source beside {build} (make caffe)")
    out = tmp_path_factory.mktemp("ring") / "ring_faults"
    cmd = ["g++", "-O1", "-std=c++17", "-DCPU_ONLY", "-DUSE_LMDB", "-DCAFFE_RING_FAULT_HOOKS",
           f"-I{source / 'include'}", f"-I{prefix / 'include'}", str(ROOT / "tests/native/ring_faults.cpp"),
           str(source / "src/caffe/util/db_lmdb_shared.cpp"), "-o", str(out), f"-L{prefix / 'lib'}",
           f"-Wl,-rpath,{prefix / 'lib'}", "-lcaffe", "-lglog", "-lgflags", "-lprotobuf", "-lboost_system",
           "-llmdb", "-lpthread"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    """An LMDB of RECORDS records of 2 KiB, keys 00000000 ..."""
    from data_prep.backends import lmdb_store
    path = tmp_path_factory.mktemp("ring-db") / "db"
    with lmdb_store._Writer(path) as writer:
        for i in range(RECORDS):
            writer.add((f"{i:08d}".encode(), bytes([i % 256]) * 2048))
    return path


def ring_path(database):
    st = os.stat(database / "data.mdb")
    mtime = f"{st.st_mtime_ns // 10**9}.{st.st_mtime_ns % 10**9}"
    return Path(f"/dev/shm/caffe-lmdb-shared-{os.getuid()}-{st.st_dev}-{st.st_ino}-{st.st_size}-{mtime}")


@pytest.fixture(autouse=True)
def no_ring_left(database):
    ring = ring_path(database)
    ring.unlink(missing_ok=True)
    yield ring
    ring.unlink(missing_ok=True)


def read(reader, database, count, fault=None, timeout=60, **kw):
    env = dict(os.environ, GLOG_logtostderr="1", GLOG_minloglevel="0")
    env.pop("CAFFE_RING_FAULT", None)
    if fault:
        env["CAFFE_RING_FAULT"] = fault
    return subprocess.run([str(reader), str(database), str(count)], capture_output=True, text=True, env=env,
                          timeout=timeout, **kw)


def assert_one_walk(keys):
    """Consecutive records of the endless walk over the database: each the one after the last."""
    numbers = [int(k) for k in keys if k != "end-of-pass"]
    assert numbers, keys
    for a, b in zip(numbers, numbers[1:]):
        assert b == (a + 1) % RECORDS, f"record {b} after {a}: {numbers}"


def test_alone_the_reader_sees_the_stock_sequence(ring_reader, database):
    p = read(ring_reader, database, RECORDS + 5)
    assert p.returncode == 0, p.stderr[-2000:]
    keys = p.stdout.split()
    assert keys[:RECORDS] == [f"{i:08d}" for i in range(RECORDS)] and keys[RECORDS] == "end-of-pass"


@pytest.mark.parametrize("at", [1, 40, 120])
def test_a_writer_killed_inside_its_locked_section_tears_no_record(ring_reader, database, no_ring_left, at):
    killed = read(ring_reader, database, 10 * RECORDS, fault=f"write-locked:{at}")
    assert killed.returncode == 9, killed.stderr[-2000:]  # ended at the hook, holding the ring's lock
    assert no_ring_left.exists()  # its ring stays for the next solver
    after = read(ring_reader, database, 2 * RECORDS)
    assert after.returncode == 0, after.stderr[-3000:]
    assert ("writes the ring now, from record" in after.stderr) == (at > 1)  # took over from where it stopped
    assert "left ring" in after.stderr
    keys = after.stdout.split()
    assert_one_walk(keys)
    assert int(keys[0]) <= at - 1  # it starts among what the dead writer published, and goes on past it
    assert not no_ring_left.exists()


def test_a_ring_left_half_made_is_made_again(ring_reader, database, no_ring_left):
    killed = read(ring_reader, database, 10, fault="set-up:1")
    assert killed.returncode == 9 and no_ring_left.exists()
    started = time.monotonic()
    after = read(ring_reader, database, RECORDS)
    assert after.returncode == 0, after.stderr[-3000:]
    assert time.monotonic() - started < 8  # found dead within a second or so, not a 10 s abort
    assert "left half made by a solver that died; removing it" in after.stderr
    assert after.stdout.split() == [f"{i:08d}" for i in range(RECORDS)]


def as_nobody():
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def test_a_ring_made_by_another_user_is_refused(ring_reader, database, no_ring_left):
    shm_mode = os.stat(no_ring_left.parent).st_mode  # what lets another user put a file at the name
    assert shm_mode & (stat.S_ISVTX | 0o777) == stat.S_ISVTX | 0o777, oct(shm_mode)
    made = subprocess.run(["sh", "-c", f"head -c 1048576 /dev/zero > {no_ring_left}; chmod 666 {no_ring_left}"],
                          preexec_fn=as_nobody, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    assert os.stat(no_ring_left).st_uid == NOBODY
    p = read(ring_reader, database, 10, timeout=30)
    assert p.returncode != 0 and p.stdout == ""
    assert f"owned by uid {NOBODY} with mode 666, not a ring of this user" in p.stderr, p.stderr[-2000:]


def test_a_symbolic_link_at_the_rings_name_is_refused(ring_reader, database, no_ring_left, tmp_path):
    target = tmp_path / "elsewhere"
    target.write_bytes(b"\0" * 4096)
    no_ring_left.symlink_to(target)
    p = read(ring_reader, database, 10, timeout=30)
    assert p.returncode != 0 and "a symbolic link, not a ring" in p.stderr, p.stderr[-2000:]
    assert target.read_bytes() == b"\0" * 4096


def test_a_stopped_writer_stops_the_others_with_an_error_not_a_hang(ring_reader, database):
    env = dict(os.environ, GLOG_logtostderr="1", GLOG_minloglevel="0")
    writer = subprocess.Popen([str(ring_reader), str(database), str(100 * RECORDS)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert line_within(writer, "a first key from a ring's writer", time.monotonic() + 60)  # it made the ring
        os.kill(writer.pid, signal.SIGSTOP)
        started = time.monotonic()
        reader = read(ring_reader, database, 100 * RECORDS, timeout=90)
        assert reader.returncode != 0
        assert (f"its writer, pid {writer.pid}, holds the ring but writes nothing: it is stopped (state T"
                in reader.stderr), reader.stderr[-2000:]
        assert 15 < time.monotonic() - started < 60
    finally:
        writer.kill()
        writer.wait(timeout=10)


def test_a_solver_stopped_holding_the_rings_lock_stops_the_others_with_an_error_not_a_hang(ring_reader, database):
    """The writer stops (SIGSTOP) inside its locked section, as Ctrl-Z of it alone could: another
    solver waiting for the ring's lock stops after 20 s of waiting, naming it."""
    env = dict(os.environ, GLOG_logtostderr="1", GLOG_minloglevel="0", CAFFE_RING_FAULT="write-locked:20:stop")
    writer = subprocess.Popen([str(ring_reader), str(database), str(100 * RECORDS)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while process_state(writer.pid) != "T":  # stopped by its fault hook, holding the lock
            assert writer.poll() is None and time.monotonic() < deadline, "the writer did not stop holding the lock"
            time.sleep(0.05)
        started = time.monotonic()
        reader = read(ring_reader, database, 10, timeout=90)
        assert reader.returncode != 0
        assert re.search(r"the lock of ring \S+ held for 2\d s while this solver \(pid \d+\) waited for it; its "
                         rf"holder is pid {writer.pid}: it is stopped \(state T", reader.stderr), reader.stderr[-2000:]
        assert 15 < time.monotonic() - started < 60
    finally:
        writer.kill()
        writer.wait(timeout=10)


def process_state(pid):
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_solvers_joining_as_the_last_leaves_never_unlink_a_ring_in_use(ring_reader, database, no_ring_left):
    """Suspected: a solver attaches to a ring just unlinked and later unlinks a newer ring of the
    same name. It cannot: the last solver marks the ring removed and unlinks it under the ring's
    lock, a joiner checks the mark under the same lock after opening (and tries again), and the
    name is unlinked only while it still names the file being left. Tried here: rounds of
    solvers that start as others finish, each must read one unbroken walk, and no file stays."""
    env = dict(os.environ, GLOG_logtostderr="1", GLOG_minloglevel="0")
    for round_ in range(12):
        readers = []
        for i in range(4):
            readers.append(subprocess.Popen([str(ring_reader), str(database), str(20 + 15 * i)], env=env,
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            time.sleep(0.01 * (round_ % 4))
        for p in readers:
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0, err[-2000:]
            assert_one_walk(out.split())
        assert not no_ring_left.exists(), f"round {round_}: the ring outlived its solvers"


# --- records the Data layer reads ------------------------------------------------------------

def datum_db(path, values):
    from data_prep.backends import lmdb_store
    with lmdb_store._Writer(path) as writer:
        for i, value in enumerate(values):
            writer.add((f"{i:08d}".encode(), value))
    return path


def good_datum(label=3):
    from caffe.proto import caffe_pb2
    return caffe_pb2.Datum(channels=1, height=4, width=4, data=bytes(range(16)), label=label)


@pytest.mark.parametrize("damage, message", [
    ("no label", "record 00000001 has no label"),                 # cut after its data field
    ("cut in data", "record 00000001 is not a Datum"),             # cut inside its data field
    ("short data", "record 00000001 holds 10 values, its shape 1 x 4 x 4 needs 16"),
])
def test_a_damaged_record_stops_the_data_layer_naming_its_key(tmp_path, damage, message):
    good = good_datum().SerializeToString()
    bad = {"no label": good[:good.index(bytes(range(16))) + 16],
           "cut in data": good[:good.index(bytes(range(16))) + 10],
           "short data": good_datum().__class__(channels=1, height=4, width=4, data=bytes(10),
                                                label=1).SerializeToString()}[damage]
    assert bad != good
    db = datum_db(tmp_path / "db", [good, bad] + [good] * 6)
    net = net_file(tmp_path / "net.prototxt", db, 4)
    out, err = net_process(net, 2).communicate("go\n", timeout=120)
    assert "done" not in out
    assert f"{db}: {message}" in err, err[-2000:]


def test_undamaged_records_train_as_before(tmp_path):
    """The checks that stop the layer at a damaged record pass every whole one, as it is."""
    import caffe
    db = datum_db(tmp_path / "db", [good_datum(i).SerializeToString() for i in range(8)])
    net = caffe.Net(str(net_file(tmp_path / "net.prototxt", db, 4)), caffe.TEST)
    labels = []
    for _ in range(3):  # 12 records: one pass and the first half again
        net.forward()
        assert (net.blobs["data"].data == np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)).all()
        labels += net.blobs["label"].data.tolist()
    assert labels == [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3]
