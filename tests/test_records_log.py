"""The records log (experiments/records_log.py): appends racing supersede and rederive in other
processes all land; an append the kernel cuts short leaves the file as it was and says so; a
damaged file is named with its lines by load, skipped and counted by a report, refused by a
run, and repaired by `imgstore records repair` into a file that loads again."""
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import catalogue
from experiments import record, rederive, supersede

IMGSTORE = Path(sys.executable).parent / "imgstore"
APPENDER = textwrap.dedent("""
    import sys, time
    from experiments import record
    path, prefix, count, pause = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    for i in range(count):
        record.append(path, record.Record(run_id=f"{prefix}{i}", dataset="mnist", backend="lmdb", cache="warm",
                                          status="ok"))
        time.sleep(pause)
""")


def made(run_id, **fields):
    return record.Record(run_id=run_id, dataset="mnist", backend="lmdb", cache="warm", status="ok", **fields)


def appenders(path, count, prefix="a", pause=0.0):
    return subprocess.Popen([sys.executable, "-c", APPENDER, str(path), prefix, str(count), str(pause)],
                            stderr=subprocess.PIPE, text=True)


def run_ids(path):
    return [json.loads(line)["run_id"] for line in Path(path).read_text().splitlines()]


def test_appends_racing_supersede_in_other_processes_all_land(tmp_path):
    """supersede rewrites the file (a rename) while three processes append 30 records: every one
    of them and every superseded mark is in the file after."""
    path = tmp_path / "mnist" / "records.jsonl"
    for i in range(800):  # a rewrite long enough for appends to queue behind it
        record.append(path, made(f"r{i}", command=["caffe", "train"] * 20))
    marker = ("import sys\nfrom experiments import supersede\n"
              "for i in range(0, 800, 40):\n"
              "    assert supersede.supersede(sys.argv[1], [f'r{i}'], 'a test') == []\n")
    rewriter = subprocess.Popen([sys.executable, "-c", marker, str(path)], stderr=subprocess.PIPE, text=True)
    writers = [appenders(path, 10, prefix=f"{w}-", pause=0.02) for w in "abc"]
    for p in writers + [rewriter]:
        assert p.wait(timeout=300) == 0, p.stderr.read()
    ids = run_ids(path)
    assert sorted(i for i in ids if "-" in i) == sorted(f"{w}-{i}" for w in "abc" for i in range(10))
    assert len(ids) == 830
    superseded = {r.run_id for r in record.load([tmp_path]) if r.superseded}
    assert superseded == {f"r{i}" for i in range(0, 800, 40)}


def test_appends_racing_rederive_in_another_process_all_land(tmp_path):
    """rederive reads 600 runs' Caffe logs (a second or more) and rewrites the file while 30
    records are appended, one every 0.1 s: all of them stay, and the 600 are re-derived."""
    src = catalogue.folder("ci-2core-paper2016") / "imagenet"
    line = next(json.loads(x) for x in (src / "records.jsonl").read_text().splitlines()
                if '"backend": "lmdb"' in x and '"cache": "warm"' in x)
    shutil.copytree(catalogue.folder("ci-2core-paper2016") / line["run_dir"], tmp_path / line["run_dir"])
    path = tmp_path / "imagenet" / "records.jsonl"
    path.write_text("".join(json.dumps(dict(line, run_id=f"old{i}", revised=None, initial_test_seconds=None),
                                       sort_keys=True) + "\n" for i in range(600)))
    writer = appenders(path, 30, pause=0.1)
    rewriter = subprocess.Popen([sys.executable, "-m", "experiments.rederive", str(tmp_path)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = rewriter.communicate(timeout=300)
    assert rewriter.returncode == 0, err
    assert writer.wait(timeout=300) == 0, writer.stderr.read()
    assert re.search(r": 600 of \d+ records re-derived", out), out
    ids = run_ids(path)
    assert sorted(i for i in ids if i.startswith("a")) == sorted(f"a{i}" for i in range(30)), out
    assert [r.revised for r in record.load([tmp_path]) if r.run_id.startswith("old")] == [rederive.REVISION] * 600


def test_an_append_the_kernel_cuts_short_leaves_the_file_as_it_was_and_says_so(tmp_path):
    """RLIMIT_FSIZE 100 bytes past the file's end (SIGXFSZ ignored, as Python does): the kernel
    writes up to the limit, then EFBIG, as it does a full disk's ENOSPC."""
    path = tmp_path / "mnist" / "records.jsonl"
    record.append(path, made("r0"))
    before = path.read_bytes()
    limit = len(before) + 100

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    child = ("import sys\nfrom experiments import record\n"
             "try:\n"
             "    record.append(sys.argv[1], record.Record('r1', 'mnist', 'lmdb', 'warm'))\n"
             "except Exception as e:\n"
             "    print(type(e).__name__, isinstance(e, OSError), e, file=sys.stderr)\n"
             "    sys.exit(4)\n")
    p = subprocess.run([sys.executable, "-c", child, str(path)], capture_output=True, text=True,
                       preexec_fn=small_files, timeout=120)
    assert p.returncode == 4, p.stderr
    assert path.read_bytes() == before
    name, is_os_error, message = p.stderr.strip().split(" ", 2)
    assert (name, is_os_error) == ("RecordWriteError", "True")
    assert str(path) in message and "File too large" in message and "100 of" in message
    record.append(path, made("r1"))
    assert [r.run_id for r in record.recorded(tmp_path, "mnist")] == ["r0", "r1"]


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs of this test's own (root only; skipped where it cannot be mounted)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], capture_output=True,
                       text=True, timeout=60)
    if p.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True, timeout=60)


def test_an_append_to_a_full_disk_leaves_the_file_as_it_was_and_says_so(small_disk):
    """The file ends 100 bytes short of a page and the disk's other pages are taken: the kernel
    writes those 100 bytes of the record, then ENOSPC."""
    path = small_disk / "mnist" / "records.jsonl"
    path.parent.mkdir()
    line = json.dumps(made("r0", command=[""]).to_dict(), sort_keys=True)
    pad = 4096 - 100 - len(line) - 1
    path.write_text(json.dumps(made("r0", command=["x" * pad]).to_dict(), sort_keys=True) + "\n")
    before = path.read_bytes()
    assert len(before) == 4096 - 100
    with open(small_disk / "filler", "wb", buffering=0) as f, pytest.raises(OSError, match="No space left"):
        while True:
            f.write(b"\0" * 4096)
    with pytest.raises(record.RecordWriteError) as e:
        record.append(path, made("r1"))
    assert path.read_bytes() == before
    assert str(path) in str(e.value) and "No space left on device after 100 of" in str(e.value)
    (small_disk / "filler").unlink()
    record.append(path, made("r1"))
    assert run_ids(path) == ["r0", "r1"]


def test_an_append_after_a_cut_line_moves_it_aside_and_starts_a_line_of_its_own(tmp_path, capfd):
    path = tmp_path / "mnist" / "records.jsonl"
    record.append(path, made("r0"))
    whole = path.read_text()
    path.write_text(whole + whole[:40])  # a writer killed mid-line
    record.append(path, made("r1"))
    assert run_ids(path) == ["r0", "r1"]
    rejected, = (tmp_path / "mnist").glob("rejected-records-*.jsonl")
    assert json.loads(rejected.read_text()) == {"file": "records.jsonl", "line": 2, "text": whole[:40],
                                                "why": json.loads(rejected.read_text())["why"]}
    assert f"{path}: line 2 was cut short" in capfd.readouterr().err
    path.write_text(path.read_text().rstrip("\n"))  # a whole record missing only its newline keeps it
    record.append(path, made("r2"))
    assert run_ids(path) == ["r0", "r1", "r2"]


def test_a_reader_waits_for_a_writer_a_bounded_time_and_names_the_folder(tmp_path, monkeypatch):
    from experiments import records_log
    path = tmp_path / "mnist" / "records.jsonl"
    record.append(path, made("r0"))
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               "fd = os.open(sys.argv[1], os.O_RDONLY)\nfcntl.flock(fd, fcntl.LOCK_EX)\n"
                               "print('held', flush=True)\ntime.sleep(60)\n", str(path.parent)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        monkeypatch.setattr(records_log, "LOCK_WAIT_S", 1)
        with pytest.raises(record.RecordsLocked, match=f"the records lock of {path.parent} .* over 1 s"):
            record.recorded(tmp_path, "mnist")
        with pytest.raises(record.RecordWriteError, match=f"{path}: the record was not appended"):
            record.append(path, made("r1"))
    finally:
        holder.kill()
        holder.wait(timeout=60)
    assert [r.run_id for r in record.recorded(tmp_path, "mnist")] == ["r0"]


def damaged(folder):
    """records.jsonl of four committed runs whose second append was cut (ENOSPC) and the third
    glued onto it, then a line that is JSON but no record: lines 2 and 3 are bad. Returns (the
    file, the four records' lines)."""
    src = catalogue.folder("ci-2core-paper2016") / "mnist" / "records.jsonl"
    lines = [line for line in src.read_text().splitlines() if '"status": "ok"' in line][:4]
    path = folder / "mnist" / "records.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(f"{lines[0]}\n{lines[1][:60]}{lines[2]}\n[1, 2]\n{lines[3]}\n")
    return path, lines


def test_load_names_the_file_and_lines_and_a_run_refuses(tmp_path):
    path, lines = damaged(tmp_path)
    with pytest.raises(record.RecordsDamaged) as e:
        record.recorded(tmp_path, "mnist")  # what run.py asks before it runs a cell
    assert isinstance(e.value, ValueError)
    assert str(e.value).startswith(f"{path}: 2 bad lines (line 2: a cut record with 1 glued after it, "
                                   "line 3: not an object (a JSON list))")
    assert f"`imgstore records repair {path}`" in str(e.value)
    with pytest.raises(record.RecordsDamaged):
        record.load([tmp_path], strict=True)
    run = subprocess.run([str(IMGSTORE), "run", "mnist", "lmdb", "warm", "--iters", "10", "--out", str(tmp_path),
                          "--data", str(tmp_path / "data")], capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stderr
    assert run.stderr.splitlines()[-1].startswith(f"error: {path}: 2 bad lines (line 2: ")
    assert not (tmp_path / "data").exists()  # refused before it prepared anything


def test_a_report_over_a_damaged_folder_skips_and_counts_its_bad_lines(tmp_path):
    path, lines = damaged(tmp_path)
    p = subprocess.run([str(IMGSTORE), "report", str(tmp_path), "--out", str(tmp_path / "report")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    said = [line for line in p.stderr.splitlines() if "bad line" in line]
    assert said == [f"{path}: 2 bad lines skipped (line 2, 3): `imgstore records repair {path}` moves them aside"]
    assert "from 2 records" in p.stdout


def test_records_repair_moves_the_bad_lines_aside_and_the_folder_loads_again(tmp_path):
    path, lines = damaged(tmp_path)
    p = subprocess.run([str(IMGSTORE), "records", "repair", str(tmp_path / "mnist")], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    kept = [json.loads(lines[i])["run_id"] for i in (0, 2, 3)]  # the third taken off the cut line
    assert [r.run_id for r in record.recorded(tmp_path, "mnist")] == kept
    rejected, = (tmp_path / "mnist").glob("rejected-records-*.jsonl")
    aside = [json.loads(line) for line in rejected.read_text().splitlines()]
    assert [(a["line"], a["text"]) for a in aside] == [(2, lines[1][:60]), (3, "[1, 2]")]
    assert path.read_text().splitlines() == [lines[0], lines[2], lines[3]]
    assert f"2 bad lines (line 2, 3) moved to {rejected}" in p.stdout and "line 2: 1 record" in p.stdout
    assert record.load([tmp_path]) and rejected.exists()
    again = subprocess.run([str(IMGSTORE), "records", "repair", str(path)], capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 0 and "nothing to repair" in again.stdout
    missing = subprocess.run([str(IMGSTORE), "records", "repair", str(tmp_path / "nope")], capture_output=True,
                             text=True, timeout=120)
    assert missing.returncode == 2 and f"{tmp_path / 'nope'}: no records file" in missing.stderr


def test_records_glued_whole_are_split_back_and_rewriters_refuse_a_damaged_file(tmp_path):
    path = tmp_path / "mnist" / "records.jsonl"
    for i in range(3):
        record.append(path, made(f"r{i}"))
    lines = path.read_text().splitlines()
    path.write_text(f"{lines[0]}{lines[1]}\n{lines[2]}\n")
    assert supersede.main([str(path.parent), "r0", "--why", "a test"]) == 2
    assert rederive.main([str(tmp_path)]) == 2
    from experiments import records_log, records_repair
    assert records_log.read(path)[1][0][:2] == (1, "2 records glued on one line")
    said = records_repair.repair(path)
    assert said.startswith(f"{path}: 3 records kept in order; records glued") and "bad line" not in said
    assert run_ids(path) == ["r0", "r1", "r2"] and not list(path.parent.glob("rejected-*"))
    assert os.listdir(path.parent) == ["records.jsonl"]
