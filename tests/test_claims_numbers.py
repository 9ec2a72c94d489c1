"""Every number marked in the prose of README.md and docs/*.md is recomputed from the committed
records (analysis/claims.py): a claim ends with `<!-- claim: NAME -->`, and the text that
claims.NAME() returns (or each of its texts, in order) must stand in its span. Inline, the span
runs from the previous marker or the start of the paragraph to the marker; a marker alone on its
line spans the block above it (a table)."""
import ast
import re

from analysis import claims, readme
from experiments import record

MARKER = re.compile(r"<!-- claim: (\w+) -->")


def squeeze(text):
    return " ".join(text.split())


def spans(text):
    """(line number, NAME, span) of every marker of a page's text."""
    lines = text.splitlines()
    found = []
    for i, line in enumerate(lines):
        for m in MARKER.finditer(line):
            if line.strip() == m.group(0):  # alone on its line: the block above
                above = i - 1
                while above >= 0 and not lines[above].strip():
                    above -= 1
                start = above
                while start >= 0 and lines[start].strip():
                    start -= 1
                block = lines[start + 1:above + 1]
            else:
                start = i
                while start > 0 and lines[start - 1].strip():
                    start -= 1
                block = lines[start:i] + [line[:m.start()]]
            text_before = "\n".join(block)
            text_before = MARKER.split(text_before)[-1] if MARKER.search(text_before) else text_before
            found.append((i + 1, m.group(1), squeeze(text_before)))
    return found


def mismatches(page_texts):
    """One line per claim whose text the records do not bear out, naming page, line and both texts."""
    out = []
    for page, text in page_texts.items():
        for number, line in enumerate(text.splitlines(), 1):
            if line.lstrip().startswith("<!-- claim:") and not MARKER.fullmatch(line.strip()):
                out.append(f"{page}:{number}: a marker that starts a line must stand alone on it (Markdown would "
                           "take the rest of the line as raw HTML)")
        for line, name, span in spans(text):
            function = claims.CLAIMS.get(name)
            if function is None:
                out.append(f"{page}:{line}: claim {name}: no function of that name in analysis/claims.py")
                continue
            wanted = function()
            at = 0
            for want in (wanted,) if isinstance(wanted, str) else wanted:  # in this order
                found = span.find(squeeze(want), at)
                if found < 0:
                    out.append(f"{page}:{line}: claim {name}: the records make it read {squeeze(want)!r}; "
                               f"the page reads {span[at:]!r}")
                    break
                at = found + len(squeeze(want))
    return out


def page_texts():
    return {p.relative_to(readme.ROOT).as_posix(): p.read_text() for p in readme.pages()}


def test_every_marked_number_in_the_readme_and_docs_is_what_the_records_say():
    found = mismatches(page_texts())
    assert not found, "\n".join(found)


def test_every_claim_function_has_a_marker_in_some_page():
    marked = {name for text in page_texts().values() for _, name, _ in spans(text)}
    assert not set(claims.CLAIMS) - marked, f"claims with no marker: {sorted(set(claims.CLAIMS) - marked)}"


def test_a_changed_number_a_broader_claim_an_unknown_marker_and_a_marker_starting_a_line_are_named():
    text = page_texts()["README.md"]
    wanted = claims.readme_records_cheaper()
    assert wanted in squeeze(text)
    changed = text.replace("3.7-18x with one thread", "3.9-18x with one thread")
    broader = text.replace(" (3.7-18x with one thread or no worker)", "")
    unknown = text + "\nA figure. <!-- claim: no_such_claim -->\n"
    leading = text + "\nA figure\n<!-- claim: readme_records_cheaper --> read on.\n"
    line = next(n for n, name, _ in spans(text) if name == "readme_records_cheaper")
    for page in (changed, broader):
        found = mismatches({"README.md": page})
        assert len(found) == 1 and found[0].startswith(f"README.md:{line}: claim readme_records_cheaper:"), found
        assert repr(wanted) in found[0]
    assert "3.9-18x" in mismatches({"README.md": changed})[0]
    assert mismatches({"README.md": unknown}) == [
        f"README.md:{len(unknown.splitlines())}: claim no_such_claim: no function of that name in analysis/claims.py"]
    assert mismatches({"README.md": leading})[0].startswith(f"README.md:{len(leading.splitlines())}: a marker that "
                                                            "starts a line must stand alone")


def test_a_table_marker_spans_the_block_above_it():
    text = "Intro.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n<!-- claim: t -->\n\nAfter. x <!-- claim: u -->\n"
    assert spans(text) == [(7, "t", "| a | b | |---|---| | 1 | 2 |"), (9, "u", "After. x")]


# Claims over cells whose runs asked for a warm cache and held less than record.WARM_AT_LEAST of
# their data (ImageNet in a 1 GiB cgroup: 38-84% resident): each must say "partly warm".
OVER_PARTLY_WARM = ("readme_files_over_kv_imagenet_2016", "peers_storage_or_decoding", "peers_imagenet_2016_storage",
                    "peers_lmdb_on_the_h100", "redis_io_thread_lmdb_resident", "redis_io_thread_training",
                    "redis_io_thread_goal", "redis_first_training_table", "results_imagenet_table",
                    "results_imagenet_headline", "lmdb_lmdbio_memory")


def said(name):
    wanted = claims.CLAIMS[name]()
    return " ".join((wanted,) if isinstance(wanted, str) else wanted)


def test_a_claim_over_partly_warm_runs_says_so_and_calls_them_warm_only_where_they_were(monkeypatch):
    assert [name for name in OVER_PARTLY_WARM if "partly warm" not in said(name)] == []
    monkeypatch.setattr(record, "WARM_AT_LEAST", 0.3)  # below every one of those runs' residency: now they were warm
    assert [name for name in OVER_PARTLY_WARM if "partly warm" in said(name)] == []
    assert "21x warm" in said("readme_files_over_kv_imagenet_2016")


def test_claims_select_runs_by_the_cache_they_had_never_by_the_one_they_asked():
    """record.cache is the state a run asked for; claims read record.cache_state (through claims.as_had)."""
    tree = ast.parse((readme.ROOT / "analysis" / "claims.py").read_text())
    asked = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "cache"
             and not (isinstance(node.value, ast.Name) and node.value.id == "functools")]
    assert asked == [], f"analysis/claims.py reads the cache a run asked for (record.cache) at lines {asked}"


def test_as_had_takes_the_runs_that_bore_their_cache_out_else_names_the_state_they_had():
    imagenet = claims.paper2016_runs("imagenet", "images")
    warm, state = claims.as_had(imagenet, "warm")
    assert state == "partly warm" and warm and {r.cache_state for r in warm} == {"partly warm"}
    cold, state = claims.as_had(imagenet, "cold")
    assert state == "cold" and {r.cache_state for r in cold} == {"cold"}
    # ImageNet LMDB at three disk steps: warm at 388 IOPS, partly warm at 287 and 188; cell by cell,
    # each keeps its own runs, and the state said for them all is the one that missed
    steps, state = claims.as_had([r for r in claims.runs(claims.PAPER2016) if (r.dataset, r.backend) == ("imagenet", "lmdb")],
                                 "warm")
    assert {r.cache_state for r in steps} == {"warm", "partly warm"} and state == "partly warm"
