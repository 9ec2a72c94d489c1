"""Tables in README.md and the pages of docs/ written by the tools that compute them, between a
pair of markers, so that no page keeps a hand-copied number."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def pages():
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def replace_block(begin, end, text, readme=None):
    """Replace what stands between the markers `begin` and `end` with `text` (atomically), in the
    page that holds them (README.md or a page of docs/, unless `readme` names one)."""
    found = [p for p in ([readme] if readme else pages()) if p.exists() and begin in p.read_text()]
    if not found:
        raise SystemExit(f"the markers {begin!r} and {end!r} are in none of {', '.join(p.name for p in pages())}")
    readme = found[0]
    old = readme.read_text()
    if end not in old:
        raise SystemExit(f"{readme}: the marker {end!r} is missing")
    head, rest = old.split(begin, 1)
    tail = rest.split(end, 1)[1]
    tmp = readme.with_suffix(".md.tmp")
    tmp.write_text(head + begin + "\n" + text + end + tail)
    tmp.replace(readme)
