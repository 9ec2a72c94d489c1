"""LMDB's third read path (caffe/patches/0013, DataParameter lmdb_read: SHARED, LMDBIO's LMM):
one reader per host fills a ring in /dev/shm that every solver's Data layer reads. Alone, a
solver sees the stock cursor's sequence; several at once each see every record once per pass,
in the stock order from where they joined, while the file is read about once for all of them;
a solver killed (the writer among them) does not stop the others; one that stops reading is
left behind and its record says how many records it skipped; a group stopped together and
continued goes on as before; the ring's file goes with the last solver."""
import glob
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, ended_within, given_up, line_within, run
from test_lmdb_read import SIZES, databases, net_file, sequence  # noqa: F401 (a fixture)

# A solver's Data layer, driven over stdin: "N" runs N forward passes and prints the records'
# digests as one JSON line.
DRIVER = """
import hashlib, json, sys, caffe
net = caffe.Net(sys.argv[1], caffe.TEST)
print("ready", flush=True)
for line in sys.stdin:
    out = []
    for _ in range(int(line)):
        net.forward()
        out += [hashlib.sha1(row.tobytes()).hexdigest() + ":%g" % label
                for row, label in zip(net.blobs["data"].data, net.blobs["label"].data)]
    print(json.dumps(out), flush=True)
"""


# How long a line from a solver is waited for: its net built, or its forward passes' records.
# Minutes more than any takes on the 2-core CI machine, well inside the test's limit.
WAIT_S = 300


def rings():
    return glob.glob("/dev/shm/caffe-lmdb-shared-*")


@pytest.fixture(autouse=True)
def no_ring_left_behind():
    before = set(rings())
    yield
    assert set(rings()) <= before, "a ring's file outlived its solvers"


def driver(net):
    env = dict(os.environ, GLOG_minloglevel="0", GLOG_logtostderr="1")
    p = subprocess.Popen([sys.executable, "-c", DRIVER, str(net)], env=env, text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    ready = line_within(p, "'ready' from a solver building its net", time.monotonic() + WAIT_S)
    if ready.strip() != "ready":
        given_up(p, f"'ready' from a solver building its net, not {ready!r}")
    return p


def forward(solvers, n):
    """n forward passes in every solver at once (the ring moves at the slowest one's pace: one
    at a time, the first would wait for the others for ever); each one's records."""
    for p in solvers:
        p.stdin.write(f"{n}\n")
        p.stdin.flush()
    deadline = time.monotonic() + WAIT_S
    lines = [line_within(p, f"the records of {n} forward passes", deadline) for p in solvers]
    for p, line in zip(solvers, lines):
        if not line:
            given_up(p, f"the records of {n} forward passes, not the end of its stdout")
    return [json.loads(line) for line in lines]


def finish(p):
    """Its stdin closed, the solver ends within WAIT_S, exit status 0: its log."""
    _, err = ended_within(p, "the solver's end after its stdin's", WAIT_S)  # closes its stdin
    assert p.returncode == 0, err[-3000:]
    return err


def assert_stock_order_from_where_it_joined(seen, stock):
    """Every record once per pass, in the stock cursor's order, starting anywhere."""
    start = stock.index(seen[0])
    assert seen == [stock[(start + i) % len(stock)] for i in range(len(seen))]


@pytest.mark.parametrize("name", list(SIZES))
@pytest.mark.parametrize("ring_mb", [1, 64])
def test_alone_the_same_records_in_the_same_order_as_the_stock_cursor(databases, tmp_path, name, ring_mb):
    """ring_mb 1: the ring wraps every few records (ImageNet's hold 5 at once)."""
    count, batch = SIZES[name][3], 7
    forwards = -(-count * 23 // 10) // batch  # 2.3 passes: batches straddle the wrap-around
    stock = sequence(net_file(tmp_path / "mmap.prototxt", databases[name], batch), forwards)
    shared = sequence(net_file(tmp_path / "s.prototxt", databases[name], batch, lmdb_read="shared",
                               lmdb_shared_mb=ring_mb, lmdb_read_kb=64, lmdb_ahead_mb=1), forwards)
    assert shared == stock


def test_solvers_at_once_each_see_every_record_in_order_and_the_file_is_read_once(databases, tmp_path):
    name, batch = "cifar10", 10
    count = SIZES[name][3]
    stock = sequence(net_file(tmp_path / "mmap.prototxt", databases[name], batch), count // batch)
    net = net_file(tmp_path / "s.prototxt", databases[name], batch, lmdb_read="shared", lmdb_shared_mb=1)
    solvers = [driver(net) for _ in range(3)]
    seen = [[] for _ in solvers]
    for _ in range(4):  # 2.7 passes each
        for i, records in enumerate(forward(solvers, 100)):
            seen[i] += records
    logs = [finish(p) for p in solvers]
    for s in seen:
        assert_stock_order_from_where_it_joined(s, stock)
    assert seen[0][:count] == stock  # the first found the ring new
    written = [int(m) for log in logs for m in re.findall(r"the ring took (\d+) records from the file", log)]
    consumed = len(seen[0])
    # one walk for all three (what the ring and the prefetch queues hold beyond it), not three
    assert consumed <= max(written) <= consumed * 1.25, (written, consumed)
    assert "removed it" in logs[-1]


def small_ring(databases, tmp_path, batch=5):
    """(records, their stock order, a shared-ring net of 2 MiB) over the ImageNet stand-in."""
    count = SIZES["imagenet"][3]
    stock = sequence(net_file(tmp_path / "mmap.prototxt", databases["imagenet"], batch), count // batch)
    net = net_file(tmp_path / "s.prototxt", databases["imagenet"], batch, lmdb_read="shared", lmdb_shared_mb=2,
                   lmdb_read_kb=256, lmdb_ahead_mb=1)
    return count, stock, net


def test_a_killed_solver_does_not_stop_the_others_even_the_writer(databases, tmp_path):
    count, stock, net = small_ring(databases, tmp_path)
    writer = driver(net)  # alone at first: its feeder is the ring's writer
    other = driver(net)
    first, seen = forward([writer, other], 4)
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait(timeout=30)
    seen += forward([other], 40)[0]  # 200 records: more than three passes, written by the survivor
    err = finish(other)
    assert_stock_order_from_where_it_joined(first, stock)
    assert_stock_order_from_where_it_joined(seen, stock)
    assert f"the solver with pid {writer.pid} left ring" in err and "(it died)" in err
    assert "writes the ring now, from record" in err
    assert "1 writer takeovers; removed it" in err


def test_a_writer_that_died_after_the_databases_last_key_is_followed_from_its_first(tmp_path):
    """Deterministic where the test above is not: in a database of one record every record the
    writer wrote is the last key, so the solver that takes over finds nothing after it
    (MDB_SET_RANGE, then MDB_NEXT) and must begin again at the first, not stop or fail."""
    from caffe.proto import caffe_pb2
    from data_prep.backends import lmdb_store
    db = tmp_path / "one"
    with lmdb_store._Writer(db) as writer:
        # ImageNet-sized: a 1 MiB ring holds 5, so what follows the kill must be written anew
        datum = caffe_pb2.Datum(channels=3, height=256, width=256, label=7, data=bytes(range(256)) * 768)
        writer.add((b"00000000", datum.SerializeToString()))
    net = net_file(tmp_path / "s.prototxt", db, 4, lmdb_read="shared", lmdb_shared_mb=1)
    writer, other = driver(net), driver(net)
    before = forward([writer, other], 3)
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait(timeout=30)
    after = forward([other], 50)[0]  # far more than the ring and the prefetch queue held
    err = finish(other)
    assert len(set(before[1] + after)) == 1 and len(after) == 200 and after[0].endswith(":7")
    assert "writes the ring now, from record 0" in err and "1 writer takeovers; removed it" in err


def test_a_solver_that_stops_reading_is_left_behind_not_waited_for_for_ever(databases, tmp_path):
    """One solver reads on while the other takes nothing (a test pass of its own, a slower
    net): after 10 s the ring stops waiting for the idle one, which later skips ahead."""
    count, stock, net = small_ring(databases, tmp_path)
    busy, idle = driver(net), driver(net)
    seen = forward([busy], 40)[0]  # 200 records: the idle one's prefetch holds far fewer
    later = forward([idle], 40)[0]
    busy_log, idle_log = finish(busy), finish(idle)
    assert_stock_order_from_where_it_joined(seen, stock)
    assert f"the solver with pid {idle.pid} took no record for 1" in busy_log + idle_log
    skips = [int(n) for n in re.findall(r"was left behind; it skips (\d+) records", idle_log)]
    assert skips and skips[0] > 0
    from experiments import caffe_log
    ring, = caffe_log.shared_rings(idle_log)  # what its record holds
    from experiments.record import Record
    assert ring["records_skipped"] == sum(skips) == Record("r", "imagenet", "lmdb", "warm",
                                                           shared_rings=[ring]).records_skipped
    assert len(later) == 200 and len(set(later)) == count  # still whole passes in stock order from there
    tail = later[-count:]
    assert_stock_order_from_where_it_joined(tail, stock)


def test_solvers_stopped_together_and_continued_go_on_as_if_never_stopped(databases, tmp_path):
    """A group stopped at once (Ctrl-Z, SIGSTOP of every solver, a frozen cgroup) for longer than
    the ring's limits (10 s left behind, 20 s no record written) and continued: none is left
    behind, none stops, each reads every record once, in order. Stopped where those limits
    judge: one solver waits for records, the writer for room, the other holds the oldest."""
    count, stock, net = small_ring(databases, tmp_path)
    slow, fast = driver(net), driver(net)
    group = [slow, fast]
    fast.stdin.write("40\n")  # 200 records: it soon waits for the slow one, which reads none yet
    fast.stdin.flush()
    time.sleep(2)
    for p in group:
        os.kill(p.pid, signal.SIGSTOP)
    time.sleep(30)
    for p in group:
        os.kill(p.pid, signal.SIGCONT)
    slow.stdin.write("40\n")
    slow.stdin.flush()
    deadline = time.monotonic() + WAIT_S
    lines = [line_within(p, "the records of 40 forward passes after SIGCONT", deadline) for p in group]
    for p, line in zip(group, lines):
        if not line:  # it stopped: "writes nothing", say
            given_up(p, "the records of 40 forward passes after SIGCONT, not the end of its stdout")
    logs = [finish(p) for p in group]
    for seen in map(json.loads, lines):
        assert len(seen) == 200
        assert_stock_order_from_where_it_joined(seen, stock)  # no record skipped
    assert not any("left behind" in log for log in logs), logs
    stopped = re.search(r"was stopped for (\d+) s while it waited for records; not counted", logs[1])
    assert stopped and 25 <= int(stopped.group(1)) <= 40, logs[1][-3000:]  # stopped where it matters


def test_a_ring_too_small_for_a_record_is_an_error_naming_it(databases, tmp_path):
    """The solver stops; its ring's file stays (it died), for the runner to remove."""
    from caffe.proto import caffe_pb2
    from data_prep.backends import lmdb_store
    db = tmp_path / "big"
    with lmdb_store._Writer(db) as writer:
        datum = caffe_pb2.Datum(channels=3, height=640, width=640, label=1, data=bytes(3 * 640 * 640))
        writer.add((b"00000000", datum.SerializeToString()))
    net = net_file(tmp_path / "s.prototxt", db, 1, lmdb_read="shared", lmdb_shared_mb=1)
    p = subprocess.run([sys.executable, "-c", DRIVER, str(net)], input="1\n", capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, GLOG_minloglevel="0", GLOG_logtostderr="1"))
    assert p.returncode != 0
    assert re.search(rf"{db}/data.mdb: record 00000000 \(12288\d\d bytes\): the shared ring "
                     r"\(lmdb_shared_mb\) must hold four of the largest record", p.stderr), p.stderr[-2000:]
    left = lmdb_store.shared_rings(db / "data.mdb")
    assert len(left) == 1  # what the runner removes (test_runs_record_the_ring...)
    left[0].unlink()


def test_runs_record_the_ring_and_remove_rings_left_by_dead_solvers(mnist_small, tmp_path):
    from data_prep import backends
    from data_prep.backends import lmdb_store
    from experiments.record import load
    train_mdb = next(f for f in backends.get("lmdb").files(mnist_small / "lmdb", "train") if f.name == "data.mdb")
    st = train_mdb.stat()
    stale = lmdb_store.SHM / f"caffe-lmdb-shared-{os.getuid()}-{st.st_dev}-{st.st_ino}-{st.st_size}-0.0"
    stale.write_bytes(b"left by a solver that was killed")
    of_a_replaced_file = lmdb_store.SHM / f"caffe-lmdb-shared-{os.getuid()}-{st.st_dev}-1-1-0.0"
    of_a_replaced_file.write_bytes(b"left by a solver of a data.mdb since replaced")
    p = run([sys.executable, str(ROOT / "experiments" / "run.py"), "mnist", "lmdb", "cold", "--iters", "200",
         "--accelerator", "5ms", "--lmdb-read", "shared", "--lmdb-shared-mb", "8", "--concurrent", "2",
         "--data", str(mnist_small.parent), "--out", str(tmp_path)])
    for left in (stale, of_a_replaced_file):
        assert f"removed {left}, left by an earlier run" in p.stdout + p.stderr and not left.exists()
    records = load([tmp_path / "mnist" / "records.jsonl"])
    assert len(records) == 2 and all(r.ok and r.iterations == 200 for r in records)
    for r in records:
        assert r.read_options == {"lmdb_read": "shared", "lmdb_shared_mb": 8}
        rings_seen = {ring["database"]: ring for ring in r.shared_rings}
        assert len(rings_seen) == 2  # train and test
        assert all(ring["ring_bytes"] == 8 << 20 and ring["table_bytes"] > 0 for ring in r.shared_rings)
        assert all(ring["records_written"] > 0 for ring in r.shared_rings)
    assert sorted(ring["solvers_at_join"] for r in records for ring in r.shared_rings)[-1] == 2


def test_the_benchmark_measures_every_path_cold_and_the_analysis_tabulates_it(mnist_small, tmp_path):
    out = tmp_path / "b.json"
    run([sys.executable, str(ROOT / "benchmarks" / "lmdb_shared.py"), "--datasets", "mnist", "--solvers", "1,2",
         "--rounds", "1", "--passes", "2", "--batch", "64", "--data", str(mnist_small.parent), "--json", str(out)])
    cells = json.loads(out.read_text())["datasets"]["mnist"]["cells"]
    assert set(cells) == {f"{n}/{read}" for n in (1, 2) for read in ("mmap", "coalesced", "shared")}
    for runs in cells.values():
        assert len(runs) == 1 and not runs[0].get("failed")
        assert runs[0]["resident_before"] == 0 and runs[0]["cpu_seconds"] > 0
    table = run([sys.executable, str(ROOT / "analysis" / "lmdb_shared.py"), str(out)]).stdout
    assert "Data and limits: mnist (" in table and "| mnist | 1 |" in table
