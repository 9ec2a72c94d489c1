"""The committed results folders, by name: results/catalogue.toml says where each lives (under
results/, or results/archive/ once wholly superseded), what it is, the host that ran it, the
docs it answers and its status. Code asks here for a folder instead of writing its path."""
import dataclasses
import fnmatch
import functools
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results"
CATALOGUE = RESULTS / "catalogue.toml"
ARCHIVE = RESULTS / "archive"
STATUSES = ("current", "baseline", "superseded")


class NotCatalogued(LookupError):
    """A folder name the catalogue does not list."""


@dataclasses.dataclass(frozen=True)
class Entry:
    name: str
    path: str                 # under results/
    status: str               # one of STATUSES
    what: str
    answers: tuple
    machine: str
    superseded_by: str = ""

    @property
    def folder(self):
        return RESULTS / self.path

    @property
    def archived(self):
        return self.folder.parent == ARCHIVE


@functools.cache
def entries():
    """Every catalogued folder by name, as the catalogue lists them."""
    folders = tomllib.loads(CATALOGUE.read_text())["folders"]
    return {name: Entry(name=name, path=e["path"], status=e["status"], what=e["what"],
                        answers=tuple(e["answers"]), machine=e["machine"],
                        superseded_by=e.get("superseded_by", ""))
            for name, e in folders.items()}


def entry(name):
    try:
        return entries()[name]
    except KeyError:
        raise NotCatalogued(f"{CATALOGUE.relative_to(ROOT)}: no results folder named {name!r}") from None


def folder(name):
    """The catalogued folder's absolute path."""
    return entry(name).folder


def relative(name):
    """The catalogued folder's path from the repository root, e.g. 'results/h100': for tables and
    messages that name the folder, and for code that joins it to ROOT itself."""
    return str(folder(name).relative_to(ROOT))


def superseded():
    """The superseded folders' entries, by name."""
    return sorted((e for e in entries().values() if e.status == "superseded"), key=lambda e: e.name)


def archived():
    """The entries that live under results/archive/, by name."""
    return sorted((e for e in entries().values() if e.archived), key=lambda e: e.name)


def current(name):
    """The entry that replaces a superseded folder, followed to the end of the chain (the entry
    itself where it is not superseded)."""
    seen, e = [name], entry(name)
    while e.status == "superseded":
        e = entry(e.superseded_by)
        if e.name in seen:
            raise NotCatalogued(f"{CATALOGUE.relative_to(ROOT)}: superseded_by goes round: {' -> '.join(seen)}")
        seen.append(e.name)
    return e


def named(pattern):
    """Catalogued names matching a glob pattern (fnmatch), sorted: e.g. '*-calibrate*'."""
    return sorted(n for n in entries() if fnmatch.fnmatch(n, pattern))


def tracked(folder, pattern="*"):
    """The files git tracks under `folder` whose name matches `pattern` (fnmatch), sorted: the
    committed results, without the runs a user made beside them (make mnist-all, make host-check
    write into results/ too). Checks of committed results read these, never a glob of the folder."""
    names = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--", str(Path(folder).relative_to(ROOT))],
                           capture_output=True, text=True, check=True, timeout=60).stdout.split("\0")
    return sorted(ROOT / n for n in names if n and fnmatch.fnmatch(Path(n).name, pattern))


def tracked_records(name):
    """The record files (DATASET/records*.jsonl, as experiments.record.load reads a folder) git
    tracks in the catalogued folder `name`."""
    top = folder(name)
    return [f for f in tracked(top, "records*.jsonl") if len(f.relative_to(top).parts) == 2]
