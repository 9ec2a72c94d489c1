"""Every result number in the prose of README.md and docs/*.md is accounted for. A number is found
in prose: outside generated blocks (`<!-- X: written by ... -->` to `<!-- end of X -->`), fenced
code, inline code spans, HTML comments and link targets. Its kinds: percentages (11%, 103-104%),
ratios (17x, 1.56-1.84x), AU values (AU 0.96), rates (images/s, records per CPU second), solvers or
accelerators fed (18 solvers, 4 H100s) and durations (638-645 s, 30 ms, 1.0 µs). Each must be

  (a) claimed: it stands in the span of a `<!-- claim: NAME -->` marker (the span of
      tests/test_claims_numbers.py: from the previous marker or the start of its paragraph to the
      marker; a marker alone on its line spans the block above it) and the text claims.NAME()
      returns contains it, so the records recompute it;
  (b) quoted: a `<!-- source: NAME, where -->` marker whose NAME is one of SOURCES (a seed paper, a
      tool's own page or source), or `<!-- source: NOTES, results/FOLDER -->` whose NOTES.md holds the
      number (a measurement no record holds), quotes it: the marker closes a parenthesis that
      holds it, or it is the one number right before the marker in its paragraph; or
  (c) a threshold or setting the code defines: after words that set a threshold (">=", "at most",
      "within", ...), it reads as one of THRESHOLDS' constants, imported from the modules that
      define them (record.WARM_AT_LEAST as "95%", the AU goal as "0.90" or "90%"); or it is an
      accelerator profile's time per iteration (models/accelerators.json: "197.2 ms").

    python tests/test_prose_numbers.py     # count per file and kind, and what is unaccounted for
"""
import collections
import re
import sys
from pathlib import Path

import catalogue
from analysis import capacity, claims, fidelity, readme
from experiments import accelerators, data_path_cpu, record

# The pages checked: README.md and every page of docs/ (the script above counts their numbers).
CHECKED = ("README.md", "docs/answer.md", "docs/architecture.md", "docs/capacity-method.md", "docs/capacity.md", "docs/emulation.md",
           "docs/faults.md", "docs/lmdb.md", "docs/peers.md", "docs/redis-method.md", "docs/redis.md",
           "docs/results.md", "docs/running.md", "docs/testing.md")

# The sources a quoted figure may name: the seed papers and the pages or source of tools the docs compare
# with or build on.
SOURCES = {
    "Lim 2016": "Lim, Young & Patton, An analysis of image storage systems for scalable training of deep "
                "neural networks (ORNL, 2016)",
    "Pumma 2019": "Pumma et al., Scalable deep learning via I/O analysis and optimization (LMDBIO), 2019",
    "FFCV": "FFCV's own benchmark page (ffcv.io)",
    "MLPerf Storage": "MLPerf Storage's rules and results (mlcommons.org)",
    "Redis": "Redis 7's source (cluster.c) and its Cluster specification (redis.io)",
}
# A measurement a results folder's NOTES.md holds and no record does (a profiler's figure, a reader's
# log line): `<!-- source: NOTES, results/FOLDER -->`, and that NOTES.md must hold the number itself.
NOTES = "NOTES"

# Thresholds and conditions the code defines, as fractions: a number that reads as one is no result.
THRESHOLDS = {
    "record.WARM_AT_LEAST": record.WARM_AT_LEAST,
    "record.COLD_AT_MOST": record.COLD_AT_MOST,
    "data_path_cpu.THRESHOLD (the AU goal)": data_path_cpu.THRESHOLD,
    "fidelity.GOAL": fidelity.GOAL,
    "capacity.STORAGE_BUSY": capacity.STORAGE_BUSY,
    "capacity.THREAD_BUSY": capacity.THREAD_BUSY,
    "capacity.CORES_BUSY": capacity.CORES_BUSY,
    "capacity.SERVER_BUSY": capacity.SERVER_BUSY,
    "capacity.READS_RISE": capacity.READS_RISE,
    "fidelity.EFFECT_GOAL (the paper's effects, at most)": fidelity.EFFECT_GOAL[1],
}
# A number reads as a threshold only after words that set one: a measured "AU 5%" is not COLD_AT_MOST.
THRESHOLD_WORDS = re.compile(r"(>=|<=|at least|at most|more than|less than|within|goal|needs?|past|threshold|limit|over"
                             r"|under)\W*(?:(?:about|the)\W*)?$")

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
CLAIM = re.compile(r"<!-- claim: (\w+) -->")
SOURCE = re.compile(r"<!-- source: ([^>]*?) -->")
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


def offsets(text):
    """The offset in `text` of each line's start (line numbers from 1: offsets(text)[line - 1])."""
    starts, at = [], 0
    for line in text.splitlines(keepends=True):
        starts.append(at)
        at += len(line)
    return starts


def paragraph_start(text, at):
    """The offset of the start of the paragraph that holds offset `at` (after the last blank line)."""
    blank = [m.end() for m in re.finditer(r"\n[ \t]*\n", text[:at])]
    return blank[-1] if blank else 0


def claim_spans(text):
    """(NAME, start, end) offsets of every claim marker's span, as tests/test_claims_numbers.py reads
    it: from the previous claim marker or the start of its paragraph to the marker; a marker alone
    on its line spans the block above it (a table)."""
    out, previous_end = [], 0
    for m in CLAIM.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        line_end = text.find("\n", m.end())
        if text[line_start:line_end if line_end >= 0 else None].strip() == m.group(0):
            end = len(text[:line_start].rstrip())
            out.append((m.group(1), paragraph_start(text, end), end))
        else:
            out.append((m.group(1), max(paragraph_start(text, m.start()), previous_end), m.start()))
        previous_end = m.end()
    return out


def source_spans(text, found):
    """(source, start, end) offsets of what each source marker quotes: the parenthesis it closes
    ("... (its documentation: 172,801 images/s ...) <!-- source: FFCV, ... -->"), else the one
    number right before it in its paragraph ("17x slower ... on ImageNet <!-- source: ... -->");
    `found`: the offsets of the page's numbers."""
    out = []
    for m in SOURCE.finditer(text):
        start = paragraph_start(text, m.start())
        before = text[start:m.start()].rstrip()
        if before.endswith(")"):
            depth = 0
            for i in range(len(before) - 1, -1, -1):
                depth += {")": 1, "(": -1}.get(before[i], 0)
                if depth == 0:
                    out.append((m.group(1), start + i, m.start()))
                    break
        else:
            last = [at for at in found if start <= at < m.start()]
            if last:
                out.append((m.group(1), max(last), m.start()))
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
    shares = {form for v in THRESHOLDS.values() for form in (f"{v:.0%}", f"{v:.2f}", f"{v:g}")}
    times = {f"{ms:{f}} ms" for profile in accelerators.profiles().values() for net in profile.values()
             if isinstance(net, dict) and "train_ms" in net for ms in (net["train_ms"],) for f in ("g", ".1f", ".0f")}
    return shares, times


def is_threshold(before, kind, token, number, shares):
    """Whether a number is one of the thresholds, written after words that set one (`before`: its line up to it)."""
    value = number if kind == "AU" else token.rstrip("x%") if kind == "ratio" else token
    return value in shares and THRESHOLD_WORDS.search(before.rstrip(" (")) is not None


def source_name(detail):
    return detail.split(",")[0].strip()


def notes_of(detail):
    """The NOTES.md a `NOTES, results/FOLDER` source names (None where it names none that exists)."""
    folder = detail.split(",", 1)[1].strip() if "," in detail else ""
    path = readme.ROOT / folder / "NOTES.md"
    return path if folder.startswith("results/") and path.is_file() else None


def quotes(detail, kind, token, number):
    """Whether a source marker's source holds a number: a listed source is taken at its word; a
    NOTES.md must hold the number as the page writes it."""
    if source_name(detail) != NOTES:
        return source_name(detail) in SOURCES
    return notes_of(detail) is not None and contains(notes_of(detail).read_text(), kind, token, number)


def unaccounted(page, text):
    """One line per result number of a page that no claim recomputes, no source quotes and no
    threshold of the code explains, naming page, line, kind and number; and one per bad source."""
    starts, lines = offsets(text), text.splitlines()
    found = numbers(text)
    at = [starts[line - 1] + column for line, column, *_ in found]
    claimed = claim_spans(text)
    quoted = source_spans(text, at)
    texts = {name: said(name) for name, _, _ in claimed}
    out = [f"{page}:{text.count(chr(10), 0, m.start()) + 1}: source {m.group(1)!r}: not one of the sources of "
           f"tests/test_prose_numbers.py ({', '.join(SOURCES)}, or NOTES, results/FOLDER)"
           for m in SOURCE.finditer(text) if source_name(m.group(1)) not in SOURCES and notes_of(m.group(1)) is None]
    out += [f"{page}:{i}: a source marker that starts a line must stand alone on it (Markdown would take the rest of "
            "the line as raw HTML)" for i, line in enumerate(lines, 1)
            if line.lstrip().startswith("<!-- source:") and not SOURCE.fullmatch(line.strip())]
    shares, times = threshold_forms()
    for (line, column, kind, token, number), offset in zip(found, at):
        if any(start <= offset < end and quotes(s, kind, token, number) for s, start, end in quoted):
            continue
        inside = [name for name, start, end in claimed if start <= offset < end]
        if any(texts[name] and contains(texts[name], kind, token, number) for name in inside):
            continue
        if token in times or is_threshold(lines[line - 1][:column], kind, token, number, shares):
            continue
        where = f" (claim {', '.join(inside)} does not say it)" if inside else ""
        out.append(f"{page}:{line}: {kind} {token!r}: no claim, source or threshold of the code{where}")
    return out


def page_texts():
    return {p.relative_to(readme.ROOT).as_posix(): p.read_text() for p in readme.pages()}


def test_every_result_number_of_the_checked_pages_is_claimed_quoted_or_a_threshold():
    texts = page_texts()
    found = [line for page in CHECKED for line in unaccounted(page, texts[page])]
    assert not found, f"{len(found)} numbers unaccounted for:\n" + "\n".join(found)


def test_every_page_of_the_docs_is_checked():
    unchecked = sorted(set(page_texts()) - set(CHECKED))
    assert not unchecked, f"pages not in tests/test_prose_numbers.py's CHECKED: {', '.join(unchecked)}"


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


def test_a_removed_marker_an_unlisted_source_a_changed_number_and_a_measured_au_at_a_threshold_are_named():
    text = page_texts()["README.md"]
    line = next(i for i, l in enumerate(text.splitlines(), 1) if "<!-- claim: readme_records_cheaper -->" in l)
    unmarked = text.replace(" <!-- claim: readme_records_cheaper -->", "")
    assert unaccounted("README.md", unmarked) == [
        f"README.md:{line}: ratio '2.7-18x': no claim, source or threshold of the code",
        f"README.md:{line}: ratio '3.7-18x': no claim, source or threshold of the code"]
    line = next(i for i, l in enumerate(text.splitlines(), 1) if "<!-- source: Lim 2016, abstract -->" in l)
    unlisted = text.replace("<!-- source: Lim 2016, abstract -->", "<!-- source: a blog -->")
    assert unaccounted("README.md", unlisted) == [
        f"README.md:{line}: source 'a blog': not one of the sources of tests/test_prose_numbers.py "
        f"({', '.join(SOURCES)}, or NOTES, results/FOLDER)",
        f"README.md:{next(i for i, l in enumerate(text.splitlines(), 1) if '17x' in l)}: ratio '17x': no claim, "
        "source or threshold of the code "
        "(claim readme_files_over_kv_imagenet_2016 does not say it)"]
    changed = text.replace("(3.7-18x with one thread", "(3.9-18x with one thread")
    assert [e for e in unaccounted("README.md", changed) if "3.9-18x" in e] == [
        f"README.md:{next(i for i, l in enumerate(changed.splitlines(), 1) if '3.9-18x' in l)}: ratio '3.9-18x': no "
        "claim, source or threshold of the code (claim readme_records_cheaper does not say it)"]
    peers = catalogue.relative("ci-2core-peers")
    notes = f"The walker read the file 4.6x <!-- source: NOTES, {peers} -->.\n"
    assert unaccounted("x.md", notes) == []
    assert unaccounted("x.md", notes.replace("4.6x", "4.7x")) == [
        "x.md:1: ratio '4.7x': no claim, source or threshold of the code"]
    assert unaccounted("x.md", notes.replace(peers, "results/no-such-folder")) == [
        "x.md:1: source 'NOTES, results/no-such-folder': not one of the sources of tests/test_prose_numbers.py "
        f"({', '.join(SOURCES)}, or NOTES, results/FOLDER)",
        "x.md:1: ratio '4.6x': no claim, source or threshold of the code"]
    measured = "The cold run had AU 5% at the end.\n\nA cold run needs at most 5% resident.\n"
    assert unaccounted("x.md", measured) == ["x.md:1: percent '5%': no claim, source or threshold of the code"]


def test_numbers_in_generated_blocks_code_and_comments_are_not_prose_and_each_kind_is_found():
    text = ("<!-- t: written by x.py -->\n| 17x | 5% |\n<!-- end of t -->\n```\n1.5 s\n```\n`12%` <!-- 3x -->\n"
            "AU 0.96, 11%, 1.56-1.84x, 3,119 images per CPU-second, 4 H100s, 638-645 s, 30 ms.\n")
    assert [(n[0], n[2], n[3]) for n in numbers(text)] == [
        (8, "AU", "AU 0.96"), (8, "percent", "11%"), (8, "ratio", "1.56-1.84x"),
        (8, "rate", "3,119 images per CPU-second"), (8, "fed", "4 H100s"), (8, "duration", "638-645 s"),
        (8, "duration", "30 ms")]
