"""Every result number in the prose of README.md and docs/*.md is accounted for. A number is found
in prose: outside generated blocks (`<!-- X: written by ... -->` to `<!-- end of X -->`), fenced
code, inline code spans, HTML comments and link targets. Its kinds: percentages (11%, 103-104%),
ratios (17x, 1.56-1.84x), AU values (AU 0.96), rates (images/s, records per CPU second), solvers or
accelerators fed (18 solvers, 4 H100s) and durations (638-645 s, 30 ms, 1.0 µs). Each must be

  (a) claimed: it stands in the span of a `<!-- claim: NAME -->` marker (the span of
      tests/test_claims_numbers.py: from the previous marker or the start of its paragraph to the
      marker; a marker alone on its line spans the block above it) and the text claims.NAME()
      returns contains it, so the records recompute it;
  (b) quoted: it stands in the span of a `<!-- source: NAME, where -->` marker whose NAME is one of
      SOURCES (a seed paper or a tool's own page), the same span rule; or
  (c) a threshold or setting the code defines: it reads as one of THRESHOLDS' constants, imported from the
      modules that define them (record.WARM_AT_LEAST as "95%", the AU goal as "0.90" or "90%"), or
      an accelerator profile's time per iteration (models/accelerators.json: "197.2 ms").

    python tests/test_prose_numbers.py     # count per file and kind, and what is unaccounted for
"""
import collections
import re
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis import capacity, claims, fidelity, readme
from experiments import accelerators, data_path_cpu, record

# The pages checked. The other pages of docs/ follow (their numbers are counted by the script
# above, not yet marked): capacity-method, emulation, faults, lmdb, running, and architecture,
# redis-method and testing, which are edited elsewhere.
CHECKED = ("README.md", "docs/capacity.md", "docs/peers.md")

# The sources a quoted figure may name: the seed papers and the pages of tools the docs compare with.
SOURCES = {
    "Lim 2016": "Lim, Young & Patton, An analysis of image storage systems for scalable training of deep "
                "neural networks (ORNL, 2016)",
    "Pumma 2019": "Pumma et al., Scalable deep learning via I/O analysis and optimization (LMDBIO), 2019",
    "FFCV": "FFCV's own benchmark page (ffcv.io)",
    "MLPerf Storage": "MLPerf Storage's rules and results (mlcommons.org)",
}

# Thresholds and conditions the code defines, as fractions: a number that reads as one is no result.
THRESHOLDS = {
    "record.WARM_AT_LEAST": record.WARM_AT_LEAST,
    "record.COLD_AT_MOST": record.COLD_AT_MOST,
    "data_path_cpu.THRESHOLD (the AU goal)": data_path_cpu.THRESHOLD,
    "fidelity.GOAL": fidelity.GOAL,
    "capacity.STORAGE_BUSY": capacity.STORAGE_BUSY,
}

NUMBER = r"\d(?:[\d,]*\d)?(?:\.\d+)?(?:-\d(?:[\d,]*\d)?(?:\.\d+)?)?"
ALONE = r"(?<![\w.,-])"  # not the tail of a word, a decimal, a list or a range
KINDS = {
    "percent": re.compile(ALONE + rf"({NUMBER})%"),
    "ratio": re.compile(ALONE + rf"({NUMBER})x(?!\w)"),
    "AU": re.compile(rf"\bAU (?:of |= |\(|median )?(\d\.\d+(?:-\d\.\d+)?)(?![\d%.]|-\d)"),
    "rate": re.compile(ALONE + rf"({NUMBER}) (?:images|records|PNGs|reads)(?:/s| per (?:(?:CPU|core)[- ])?second)"),
    "fed": re.compile(ALONE + rf"({NUMBER}) (?:solvers|H100s|accelerators)\b"),
    "duration": re.compile(ALONE + rf"({NUMBER}) (?:s|ms|µs)\b"),
}
GENERATED_BEGIN = re.compile(r"<!-- [^>]*?: written by [^>]*-->")
GENERATED_END = re.compile(r"<!-- (?:end of |/)[^>]*-->")
MARKER = re.compile(r"<!-- (claim|source): ([^>]*?) -->")
HIDDEN = re.compile(r"`[^`]*`|<!--.*?-->|\]\([^)]*\)")  # code spans, comments, link targets


def blank(match):
    return " " * len(match.group())


def prose(text):
    """(line number, line) of a page's prose, code spans, comments and link targets blanked."""
    generated = fenced = False
    for i, line in enumerate(text.splitlines(), 1):
        if generated:
            generated = not GENERATED_END.match(line.strip())
        elif GENERATED_BEGIN.match(line.strip()):
            generated = True
        elif line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced:
            yield i, HIDDEN.sub(blank, line)


def numbers(text):
    """(line number, column, kind, token, number) of every result number in a page's prose."""
    found = []
    for i, line in prose(text):
        for kind, pattern in KINDS.items():
            found += [(i, m.start(1), kind, m.group(0), m.group(1)) for m in pattern.finditer(line)]
    return sorted(found)


def marker_spans(text):
    """(kind, name, first (line, column), end (line, column)) of every claim or source marker: the
    span runs from the previous marker or the start of its paragraph to the marker; a marker alone
    on its line spans the block above it (tests/test_claims_numbers.py reads them the same way)."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        previous_end = None
        for m in MARKER.finditer(line):
            if line.strip() == m.group(0):
                end = i - 1
                while end >= 0 and not lines[end].strip():
                    end -= 1
                start = end
                while start > 0 and lines[start - 1].strip():
                    start -= 1
                out.append((m.group(1), m.group(2), (start + 1, 0), (end + 1, len(lines[end]))))
                continue
            if previous_end is not None:
                first = (i + 1, previous_end)
            else:
                start = i
                while start > 0 and lines[start - 1].strip() and not MARKER.search(lines[start - 1]):
                    start -= 1
                first = (start + 1, 0)
                if start > 0 and lines[start - 1].strip():  # a marker on the line above ends the span before
                    last = list(MARKER.finditer(lines[start - 1]))[-1]
                    if lines[start - 1][last.end():].strip():
                        first = (start, last.end())
            out.append((m.group(1), m.group(2), first, (i + 1, m.start())))
            previous_end = m.end()
    return out


def said(name):
    """The text claims.NAME() makes, its parts joined, whitespace squeezed (None: no such claim)."""
    function = claims.CLAIMS.get(name)
    if function is None:
        return None
    wanted = function()
    return " ".join(" ".join(w.split()) for w in ((wanted,) if isinstance(wanted, str) else wanted))


def contains(text, kind, token, number):
    """Whether a claim's text holds the number as the page writes it (percent and ratio with their sign)."""
    want = token if kind in ("percent", "ratio") else number
    return re.search(rf"(?<![\d.,]){re.escape(want)}(?![\d]|[.,]\d)", text) is not None


def threshold_forms():
    """How the prose writes THRESHOLDS (95%, 0.95) and the accelerator profiles' times per training
    iteration (the emulated Titan X's 197.2 ms on CaffeNet: a setting, not a result)."""
    shares = {form for v in THRESHOLDS.values() for form in (f"{v:.0%}", f"{v:.2f}")}
    times = {f"{ms:{f}} ms" for profile in accelerators.profiles().values() for net in profile.values()
             if isinstance(net, dict) and "train_ms" in net for ms in (net["train_ms"],) for f in ("g", ".1f", ".0f")}
    return shares | times


def source_name(detail):
    return detail.split(",")[0].strip()


def unaccounted(page, text):
    """One line per result number of a page that no claim recomputes, no source quotes and no
    threshold of the code explains, naming page, line, kind and number; and one per bad source."""
    spans = marker_spans(text)
    texts = {name: said(name) for kind, name, _, _ in spans if kind == "claim"}
    out = [f"{page}:{first[0]}: source {detail!r}: not one of the sources of tests/test_prose_numbers.py "
           f"({', '.join(SOURCES)})" for kind, detail, first, _ in spans
           if kind == "source" and source_name(detail) not in SOURCES]
    out += [f"{page}:{i}: a source marker that starts a line must stand alone on it (Markdown would take the rest of "
            "the line as raw HTML)" for i, line in enumerate(text.splitlines(), 1)
            if line.lstrip().startswith("<!-- source:") and not MARKER.fullmatch(line.strip())]
    forms = threshold_forms()
    for line, column, kind, token, number in numbers(text):
        inside = [(k, name) for k, name, first, end in spans if first <= (line, column) < end]
        if any(k == "source" and source_name(name) in SOURCES for k, name in inside):
            continue
        if any(k == "claim" and texts[name] and contains(texts[name], kind, token, number) for k, name in inside):
            continue
        if token.rstrip("x") in forms or token in forms or (kind == "AU" and number in forms):
            continue
        where = f" (claim {', '.join(name for k, name in inside if k == 'claim')} does not say it)" if inside else ""
        out.append(f"{page}:{line}: {kind} {token!r}: no claim, source or threshold of the code{where}")
    return out


def page_texts():
    return {p.relative_to(readme.ROOT).as_posix(): p.read_text() for p in readme.pages()}


def test_every_result_number_of_the_checked_pages_is_claimed_quoted_or_a_threshold():
    texts = page_texts()
    found = [line for page in CHECKED for line in unaccounted(page, texts[page])]
    assert not found, f"{len(found)} numbers unaccounted for:\n" + "\n".join(found)


def counts(texts):
    """{page: Counter(kind)} of the result numbers, and {page: how many are unaccounted for}."""
    return ({page: collections.Counter(n[2] for n in numbers(t)) for page, t in texts.items()},
            {page: len(unaccounted(page, t)) for page, t in texts.items()})


if __name__ == "__main__":
    found, missing = counts(page_texts())
    for page, kinds in found.items():
        print(f"{page}: {sum(kinds.values())} numbers, {missing[page]} unaccounted ({dict(kinds)})")
    total = sum(found.values(), collections.Counter())
    print(f"all: {sum(total.values())} numbers, {sum(missing.values())} unaccounted ({dict(total)})")
    for page in sys.argv[1:]:
        print("\n".join(unaccounted(page, page_texts()[page])))
