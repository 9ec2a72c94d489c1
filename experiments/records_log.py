"""The records log: RESULTS/DATASET/records*.jsonl, one JSON object per line, which runs append
to and a few tools rewrite (supersede, rederive, records repair). What keeps it whole:

- One lock per dataset folder: flock on the folder itself. Appends and rewrites take it
  exclusive, readers shared. It is the folder's and not the file's because a rewrite swaps the
  file (rename): a writer blocked on the old file's lock would then append to the unlinked
  inode and its record would be lost. The folder survives the swap, and needs no lock file
  (read-only copies of results load too). Every wait for it is bounded (LOCK_WAIT_S).
- An append writes its whole line under that lock and checks it: a write that fails or is cut
  short (ENOSPC, EFBIG, EIO) is cut back to the length the file had, and RecordWriteError says
  which file and why. A file left ending in a cut line (an append killed mid-write, or by an
  older writer) gets nothing glued onto it: the append first moves that cut line aside (below);
  a whole record missing only its newline gets the newline.
- A rewrite reads the file under the lock (so it holds every append made so far, and none can
  land meanwhile), writes FILE.tmp beside it, fsyncs it, renames it over FILE and fsyncs the
  folder. Killed at any point, FILE is either the old content or the new one, never half; a
  stale FILE.tmp is overwritten by the next rewrite.
- Bad lines (not JSON, not an object, no run_id, dataset, backend or cache, several records glued
  on one line) are never dropped: set_aside() writes them, each with its line number and why, to
  rejected-STEM-UTCSTAMP.jsonl beside the file (a name records*.jsonl does not match, so no
  reader takes them for records) and fsyncs it before the records file loses them.
"""
import errno
import fcntl
import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from data_prep.errors import SourceError

LOCK_WAIT_S = 60  # a writer holds the lock for one line's write, or one rewrite of a file kept in memory
REQUIRED = ("run_id", "dataset", "backend", "cache")  # the fields a Record has no default for
REPAIR_HINT = "`imgstore records repair {file}` moves them aside"


class RecordWriteError(OSError):
    """A record could not be appended: the file is as it was before; the message names the file
    and the OS error."""


class RecordsLocked(TimeoutError):
    """The folder's records lock was held longer than LOCK_WAIT_S (a writer stopped or stuck): the
    message names the folder."""


class RecordsDamaged(SourceError):
    """A records file holds lines that are not records (a cut write, glued records): the message
    names the file and the lines, and how to repair it."""

    def __init__(self, path, bad):
        self.path, self.bad = Path(path), bad
        lines = ", ".join(f"line {n}: {why}" for n, why, _ in bad[:3]) + (", ..." if len(bad) > 3 else "")
        super().__init__(f"{path}: {len(bad)} bad line{'s' * (len(bad) > 1)} ({lines}); "
                         + REPAIR_HINT.format(file=path))


@contextmanager
def locked(path, shared=False):
    """The lock of the dataset folder holding records file `path`, for the block; RecordsLocked
    after LOCK_WAIT_S."""
    folder, wait = Path(path).parent, LOCK_WAIT_S
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RecordsLocked(errno.ETIMEDOUT, f"the records lock of {folder} (flock on the folder) "
                                                        f"was held by another process for over {wait} s") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


def parse(text):
    """The record (a dict) one line holds, or ValueError saying why it holds none whole. Records
    glued together are an error here; split() takes them apart."""
    try:
        d = json.loads(text)
    except ValueError as e:
        cut, records = split(text)
        if records and cut.strip():
            raise ValueError(f"a cut record with {len(records)} glued after it") from None
        raise ValueError(f"{len(records)} records glued on one line" if records else f"not JSON ({e})") from None
    if not isinstance(d, dict):
        raise ValueError(f"not an object (a JSON {type(d).__name__})")
    missing = [k for k in REQUIRED if not isinstance(d.get(k), str)]
    if missing:
        raise ValueError(f"an object with no {', '.join(missing)}")
    return d


def split(text):
    """A line of records glued together, as (the text before the first whole record, [records]):
    what a cut append followed by the next one leaves. The records run to the end of the line;
    the text before them is "" when the line is several whole records. (text, []) when none parses."""
    decoder, text = json.JSONDecoder(), text.rstrip()
    for start in [i for i, c in enumerate(text) if c == "{"]:
        records, at = [], start
        try:
            while at < len(text):
                d, at = decoder.raw_decode(text, at)
                if not (isinstance(d, dict) and all(isinstance(d.get(k), str) for k in REQUIRED)):
                    break
                records.append(d)
                at = len(text) - len(text[at:].lstrip())
        except ValueError:
            continue
        if at >= len(text) and records:
            return text[:start], records
    return text, []


def read(path):
    """([(line number, record dict)], [(line number, why bad, the line)]) of one file. The caller
    holds the lock, or reads a file no one writes."""
    good, bad = [], []
    for n, line in enumerate(Path(path).read_text(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            good.append((n, parse(line)))
        except ValueError as e:
            bad.append((n, str(e), line))
    return good, bad


def read_locked(path):
    """read(path) under a shared lock: no append is half there."""
    with locked(path, shared=True):
        return read(path)


def set_aside(path, bad):
    """Writes the bad lines [(line number, why, text)] of records file `path` to a new rejected
    file beside it, durably; returns its path. Never overwrites one."""
    path = Path(path)
    stem = f"rejected-{path.stem}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    target, n = path.with_name(stem + ".jsonl"), 1
    while True:
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            break
        except FileExistsError:
            n += 1
            target = path.with_name(f"{stem}-{n}.jsonl")
    with os.fdopen(fd, "w") as f:
        for number, why, text in bad:
            f.write(json.dumps({"file": path.name, "line": number, "why": why, "text": text}) + "\n")
        f.flush()
        os.fsync(f.fileno())
    _fsync_folder(path)
    return target


def rewrite(path, lines):
    """Replaces records file `path` with `lines` (text, no newlines), crash-safe (see above). The
    caller holds the exclusive lock."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write("".join(line + "\n" for line in lines))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_folder(path)


def _fsync_folder(path):
    fd = os.open(Path(path).parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def append_line(path, line):
    """Appends `line` (one record's JSON, no newline) to records file `path`, whole or not at all."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with locked(path):
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                data = (_end_of_last_line(fd, path) + line + "\n").encode()
                _write_whole(fd, path, data)
            finally:
                os.close(fd)
    except RecordWriteError:
        raise
    except OSError as e:
        raise RecordWriteError(e.errno, f"{path}: the record was not appended ({e.strerror or e})") from e


def _end_of_last_line(fd, path):
    """What to write before a record so it starts a line of its own: "" when the file ends in a
    newline; "\\n" when its last line is a whole record without one; else that cut line is moved
    aside (set_aside) and cut off the file, and "" (said on stderr)."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return ""
    text = os.pread(fd, size, 0)
    start = text.rfind(b"\n") + 1
    tail = text[start:].decode(errors="replace")
    try:
        parse(tail)
        return "\n"
    except ValueError as e:
        number = text.count(b"\n") + 1
        aside = set_aside(path, [(number, f"cut short ({e})", tail)])
        os.ftruncate(fd, start)
        os.fsync(fd)
        print(f"{path}: line {number} was cut short (a write that did not finish); moved to {aside.name}",
              file=sys.stderr)
        return ""


def _write_whole(fd, path, data):
    """Writes data at the end of the file; on any failure cuts the file back and raises RecordWriteError."""
    before, done = os.fstat(fd).st_size, 0
    try:
        while done < len(data):
            written = os.write(fd, data[done:])
            if written == 0:
                raise OSError(errno.EIO, "the write made no progress")
            done += written
        os.fsync(fd)
    except OSError as e:
        why = f"{e.strerror or e} after {done} of {len(data)} bytes"
        try:
            os.ftruncate(fd, before)
            os.fsync(fd)
        except OSError as undo:
            why += f"; and it could not be cut back to its {before} bytes ({undo.strerror or undo}): " \
                   + REPAIR_HINT.format(file=path) + " (the cut line)"
        raise RecordWriteError(e.errno, f"{path}: the record was not appended ({why})") from e
