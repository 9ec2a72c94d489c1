"""Caffe's second LMDB read path (caffe/patches/0012, DataParameter lmdb_read: COALESCED): the
same records in the same order as the stock memory-mapped cursor, read in large pread()s; a
truncated or changed data.mdb stops it with a message; the runner records it, and several
solvers at once are recorded one by one and as a group."""
import hashlib
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import ROOT, line_within, net_process, run

WAIT_S = 120  # the most a net's 'ready' or 'done' is waited for

# (channels, height, width, records): MNIST-, CIFAR-10- and ImageNet-sized Datums, written in
# transactions of 1,000 as data_prep writes them (so pages move between commits)
SIZES = {"mnist": (1, 28, 28, 2500), "cifar10": (3, 32, 32, 1500), "imagenet": (3, 256, 256, 60)}


@pytest.fixture(scope="module")
def databases(tmp_path_factory):
    """{size name: an LMDB of random Datums of that size}."""
    from caffe.proto import caffe_pb2
    from data_prep.backends import lmdb_store
    root, rng, out = tmp_path_factory.mktemp("lmdb-read"), np.random.default_rng(7), {}
    for name, (c, h, w, count) in SIZES.items():
        out[name] = root / name
        with lmdb_store._Writer(out[name]) as writer:
            for i in range(count):
                datum = caffe_pb2.Datum(channels=c, height=h, width=w, label=i % 1000,
                                        data=rng.integers(0, 256, c * h * w, dtype=np.uint8).tobytes())
                writer.add((f"{i:08d}".encode(), datum.SerializeToString()))
    return out


def net_file(path, source, batch, **options):
    import caffe
    from caffe import layers as L, params as P
    from data_prep import backends
    options = backends.get("lmdb").layer_options(options)
    n = caffe.NetSpec()
    n.data, n.label = L.Data(source=str(source), backend=P.Data.LMDB, batch_size=batch, ntop=2, **options)
    path.write_text(str(n.to_proto()))
    return path


def sequence(path, forwards, train=False, seed=None):
    """A digest per record (its pixels and label) of `forwards` batches, in the order Caffe gave them;
    train: in the TRAIN phase (random crops and mirrors), seeded by `seed`."""
    import caffe
    if seed is not None:
        caffe.set_random_seed(seed)
    net, out = caffe.Net(str(path), caffe.TRAIN if train else caffe.TEST), []
    for _ in range(forwards):
        net.forward()
        out += [hashlib.sha1(row.tobytes()).hexdigest() + f":{label:g}"
                for row, label in zip(net.blobs["data"].data, net.blobs["label"].data)]
    del net
    return out


@pytest.mark.parametrize("name", list(SIZES))
@pytest.mark.parametrize("read", [{"lmdb_read_kb": 64, "lmdb_ahead_mb": 1}, {}], ids=["small-reads", "defaults"])
def test_the_same_records_in_the_same_order_as_the_stock_cursor_across_wrap_around(databases, tmp_path, name, read):
    count, batch = SIZES[name][3], 7  # 7 divides none of the counts: batches straddle the wrap-around
    forwards = -(-count * 23 // 10) // batch  # 2.3 passes
    stock = sequence(net_file(tmp_path / "mmap.prototxt", databases[name], batch), forwards)
    coalesced = sequence(net_file(tmp_path / "c.prototxt", databases[name], batch, lmdb_read="coalesced", **read),
                         forwards)
    assert coalesced == stock
    assert len(set(stock[:count])) == count and stock[count:2 * count] == stock[:count]


def test_large_records_are_read_in_a_few_large_reads(databases, tmp_path):
    net = net_file(tmp_path / "c.prototxt", databases["imagenet"], 10, lmdb_read="coalesced")
    out, err = net_process(net, 12).communicate("go\n", timeout=120)
    assert "done" in out, err[-2000:]
    passes = [line for line in err.splitlines() if "lmdb_read COALESCED" in line]
    assert passes and "a pass over 60 records read " in passes[0]
    mib, rest = passes[0].split(" records read ")[1].split(" MiB in ")
    assert 11.2 <= float(mib) <= 12.5  # 60 records of 196 KB, each read once
    assert int(rest.split()[0]) <= 6  # in 4 MiB reads, a leaf page or two away from the run


def thread_names(pid):
    names = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            names.append(open(f"/proc/{pid}/task/{task}/comm").read().strip())
        except OSError:  # ended while listed
            pass
    return names


def test_the_reads_ahead_run_on_one_named_thread_per_walker(databases, tmp_path):
    """Not a thread per 4 MiB read (each lived ~1 ms, unseen by the records' thread samples):
    one "lmdb-pread" beside each walker, before and after the reads."""
    net = net_file(tmp_path / "c.prototxt", databases["imagenet"], 10, lmdb_read="coalesced", lmdb_read_kb=1024)
    script = ("import sys, caffe\nnet = caffe.Net(sys.argv[1], caffe.TEST)\nprint('ready', flush=True)\n"
              "sys.stdin.readline()\nfor _ in range(24): net.forward()\nprint('done', flush=True)\nsys.stdin.readline()\n")
    with open(tmp_path / "log", "w") as log:
        p = subprocess.Popen([sys.executable, "-c", script, str(net)], text=True, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=log, env=dict(os.environ, GLOG_minloglevel="2"))
    try:
        seen = []
        for step in ("ready", "done"):
            said = line_within(p, f"'{step}' from a net reading ahead", time.monotonic() + WAIT_S)
            assert said.strip() == step, (tmp_path / "log").read_text()[-2000:]
            seen.append(thread_names(p.pid))
            p.stdin.write("go\n")
            p.stdin.flush()
        assert p.wait(timeout=60) == 0
    finally:
        p.kill()
    for names in seen:
        assert names.count("lmdb-pread") == names.count("lmdb-read-ahead") >= 1, names


@pytest.fixture(scope="module")
def committed(tmp_path_factory):
    """Data sets larger than one 4 MiB read, written in commits of 1,000 records as data_prep
    writes them: at every commit LMDB puts a record or two leaf pages in pages it reuses from an
    earlier commit, megabytes before the run. {size name: (path, records)}."""
    from caffe.proto import caffe_pb2
    from data_prep.backends import lmdb_store
    root, rng, out = tmp_path_factory.mktemp("committed"), np.random.default_rng(11), {}
    for name, (c, h, w), count in (("mnist", (1, 28, 28), 20000), ("cifar10", (3, 32, 32), 8000)):
        out[name] = (root / name, count)
        with lmdb_store._Writer(root / name) as writer:
            for i in range(count):
                datum = caffe_pb2.Datum(channels=c, height=h, width=w, label=i % 10,
                                        data=rng.integers(0, 256, c * h * w, dtype=np.uint8).tobytes())
                writer.add((f"{i:08d}".encode(), datum.SerializeToString()))
    return out


@pytest.mark.parametrize("name", ["mnist", "cifar10"])
def test_records_away_from_the_run_are_read_on_their_own_and_a_pass_reads_the_file_once(committed, tmp_path, name):
    """Moving the whole window to such a record and back read MNIST-sized data sets 8.8x per pass
    and CIFAR-10-sized ones 2.9x; read on their own, a pass reads data.mdb about once, in the
    stock cursor's sequence."""
    path, count = committed[name]
    batch = 100
    forwards = count * 13 // 10 // batch  # 1.3 passes
    stock = sequence(net_file(tmp_path / "mmap.prototxt", path, batch), forwards)
    net = net_file(tmp_path / "c.prototxt", path, batch, lmdb_read="coalesced")
    assert sequence(net, forwards) == stock
    out, err = net_process(net, count // batch + 1).communicate("go\n", timeout=300)
    assert "done" in out, err[-2000:]
    line = next(line for line in err.splitlines() if "lmdb_read COALESCED" in line)
    mib = float(line.split(" records read ")[1].split(" MiB")[0])
    alone = int(line.split(" of them away from the previous one, ")[1].split()[0])
    assert alone > 0 and mib <= 1.1 * (path / "data.mdb").stat().st_size / 2**20, line


@pytest.mark.parametrize("read", ["mmap", "coalesced"])
def test_a_truncated_data_mdb_is_refused_at_open(databases, tmp_path, read):
    copy = tmp_path / "db"
    shutil.copytree(databases["cifar10"], copy)
    mdb = copy / "data.mdb"
    os.truncate(mdb, mdb.stat().st_size // 2)
    p = net_process(net_file(tmp_path / "t.prototxt", copy, 7, lmdb_read=read), 1)
    out, err = p.communicate("go\n", timeout=60)
    assert p.returncode != 0 and "ready" not in out
    assert f"{copy}: the database file is truncated" in err


@pytest.mark.parametrize("change", ["touched", "truncated"])
def test_a_data_mdb_changed_while_read_stops_training_with_a_message(databases, tmp_path, change):
    copy = tmp_path / "db"
    shutil.copytree(databases["imagenet"], copy)
    mdb = copy / "data.mdb"
    net = net_file(tmp_path / "c.prototxt", copy, 5, lmdb_read="coalesced", lmdb_read_kb=256, lmdb_ahead_mb=1)
    p = net_process(net, 40)
    assert line_within(p, "'ready' from a net over an LMDB copy", time.monotonic() + WAIT_S).strip() == "ready"
    if change == "touched":
        os.utime(mdb, (1, 1))
    else:
        os.truncate(mdb, mdb.stat().st_size // 3)
    out, err = p.communicate("go\n", timeout=60)
    assert p.returncode != 0 and "done" not in out
    assert f"{mdb} changed while open" in err or f"{mdb} ends at byte" in err, err[-2000:]


def test_a_data_mdb_read_whole_at_once_is_still_checked_for_change(databases, tmp_path):
    """MNIST-sized: one read takes the whole file, and no read follows; the walker checks the
    file at the end of every pass (before: a change went unseen for the whole run)."""
    copy = tmp_path / "db"
    shutil.copytree(databases["mnist"], copy)
    mdb = copy / "data.mdb"
    assert mdb.stat().st_size < 8 << 20
    # 1 MiB ahead, under one pass: the records of the second pass come after the walker's check
    net = net_file(tmp_path / "c.prototxt", copy, 50, lmdb_read="coalesced", lmdb_read_kb=8192, lmdb_ahead_mb=1)
    p = net_process(net, 120)  # 2.4 passes
    assert line_within(p, "'ready' from a net over an LMDB copy", time.monotonic() + WAIT_S).strip() == "ready"
    os.utime(mdb, (1, 1))
    out, err = p.communicate("go\n", timeout=60)
    assert p.returncode != 0 and "done" not in out
    assert f"{mdb} changed while open" in err, err[-2000:]


def test_no_room_ahead_is_refused_not_a_wait_forever(databases, tmp_path):
    """lmdb_ahead_mb: 0 used to hang at net construction: the cursor waited for a record the
    walker would not read without room. Refused by the option's declaration and by Caffe."""
    import caffe
    from caffe import layers as L, params as P
    from data_prep import backends
    from data_prep.options import OptionError
    with pytest.raises(OptionError, match="at least 1"):
        backends.get("lmdb").layer_options({"lmdb_read": "coalesced", "lmdb_ahead_mb": 0})
    n = caffe.NetSpec()
    n.data, n.label = L.Data(source=str(databases["mnist"]), backend=P.Data.LMDB, batch_size=5, ntop=2,
                             lmdb_read=P.Data.COALESCED, lmdb_ahead_mb=0)
    net = tmp_path / "zero.prototxt"
    net.write_text(str(n.to_proto()))
    out, err = net_process(net).communicate(timeout=60)
    assert "ready" not in out and "lmdb_ahead_mb must be at least 1" in err


def test_runs_record_the_read_path_and_solvers_at_once_their_group(mnist_small, tmp_path):
    from experiments.record import load
    run([sys.executable, str(ROOT / "experiments" / "run.py"), "mnist", "lmdb", "cold", "--iters", "300",
         "--accelerator", "5ms", "--lmdb-read", "coalesced", "--concurrent", "2", "--data", str(mnist_small.parent),
         "--out", str(tmp_path), "--quiet"])
    records = load([tmp_path / "mnist" / "records.jsonl"])
    assert len(records) == 2 and all(r.ok and r.iterations == 300 for r in records)
    assert [r.concurrent["member"] for r in records] == [0, 1]
    group = records[0].concurrent
    assert group["solvers"] == 2 and all(r.concurrent["group"] == group["group"] for r in records)
    assert group["makespan_seconds"] >= max(r.wall_seconds for r in records) - 0.01
    assert group["device_read_bytes"] > 0
    assert all(r.read_options == {"lmdb_read": "coalesced"} for r in records)
    assert all("LMDB read-ahead" in r.process["thread_cpu_seconds"] for r in records)
    assert records[0].setup()[2].endswith("2 solvers at once")
    assert len({r.run_dir for r in records}) == 2
    for r in records:
        assert "lmdb_read: COALESCED" in (tmp_path / r.run_dir / "caffe.log").read_text()


def test_lmdb_read_for_a_backend_without_it_is_an_error(mnist_small, tmp_path):
    p = subprocess.run([sys.executable, str(ROOT / "experiments" / "run.py"), "mnist", "images", "warm",
                        "--lmdb-read", "coalesced", "--data", str(mnist_small.parent), "--out", str(tmp_path)],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "--lmdb-read applies to lmdb only" in p.stderr
