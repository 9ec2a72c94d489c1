"""Tables in README.md written by the tools that compute them, between a pair of markers, so
the README keeps no hand-copied number."""
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def replace_block(begin, end, text, readme=README):
    """Replace what stands between the markers `begin` and `end` with `text` (atomically)."""
    old = readme.read_text()
    if begin not in old or end not in old:
        raise SystemExit(f"{readme}: the markers {begin!r} and {end!r} are missing")
    head, rest = old.split(begin, 1)
    tail = rest.split(end, 1)[1]
    tmp = readme.with_suffix(".md.tmp")
    tmp.write_text(head + begin + "\n" + text + end + tail)
    tmp.replace(readme)
