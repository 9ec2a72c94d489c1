"""The Caffe patch series as build.sh applies it: numbered without gaps, each patch opening with
the one line that says why, and every patch number the code names (caffe/patches/NNNN, a read
option's patch="NNNN") one that exists, so that renumbering the series cannot leave code
pointing at another patch or at none."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATCHES = ROOT / "caffe" / "patches"
# folders whose prose is history or is kept apart (docs/ names patches in its own pages)
NOT_CODE = ("docs/", "results/", "caffe/patches/", "README.md")
REFERENCE = re.compile(r'caffe/patches/(\d{4})|\bpatch="(\d{4}(?:, \d{4})*)"')


def series():
    return sorted(PATCHES.glob("*.patch"))


def test_the_series_is_numbered_from_0001_without_gaps():
    numbers = [int(p.name[:4]) for p in series()]
    assert numbers == list(range(1, len(numbers) + 1)), [p.name for p in series()]


def test_each_patch_opens_with_its_why_before_any_diff():
    for p in series():
        first = p.read_text().splitlines()[0]
        assert first and not re.match(r"(diff |--- |\+\+\+ |Index: |@@ )", first), p.name


def named_patches():
    """(file, line number, patch number) of every patch the tracked code names."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for name in files.split():
        if name.startswith(NOT_CODE) or not name.endswith((".py", ".sh", ".json", ".cpp", "Makefile")):
            continue
        for n, line in enumerate((ROOT / name).read_text(errors="replace").splitlines(), 1):
            for m in REFERENCE.finditer(line):
                for number in (m.group(1) or m.group(2)).split(", "):
                    yield name, n, number


def test_every_patch_the_code_names_exists():
    have = {p.name[:4] for p in series()}
    named = list(named_patches())
    assert len(named) > 20  # the code does name its patches: the scan found them
    missing = [f"{name}:{n} names caffe/patches/{number}" for name, n, number in named if number not in have]
    assert not missing, "\n".join(missing)
