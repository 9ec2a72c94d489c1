"""The readable answer: a README a reviewer reads in minutes, docs/ without the project's own
history, and a site that builds strictly and loads in a real browser without errors."""
import functools
import http.server
import json
import re
import shutil
import subprocess
import threading

import pytest

from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# "#22", "issue #7" (not "&#8212;" nor a colour "#1b9e77"), and numbered work periods
HISTORY = re.compile(r"(^|[^&A-Za-z0-9])#[0-9]{1,3}\b|\bsessions?\b", re.IGNORECASE)


def prose(page):
    """(line number, line) of a page outside its fenced code (a program's output may hold a "#")."""
    fenced = False
    for i, line in enumerate(page.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            yield i, line


def test_the_readme_is_short_and_the_pages_speak_of_no_issue_numbers_or_sessions():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200
    found = [f"{p.name}:{i}: {line.strip()[:80]}" for p in PAGES for i, line in prose(p)
             if HISTORY.search(line) and not line.lstrip().startswith(("|", "<!--"))]
    assert found == []


# a block a tool writes between its markers (analysis/readme.py): its layout is the tool's
GENERATED = re.compile(r"<!-- [^\n]*?: written by .*?<!-- end of [^\n]*?-->", re.DOTALL)
LINE_CHARS = 120  # a source line longer than this counts as several lines of its paragraph
MAX_PARAGRAPH_LINES, MAX_TABLE_COLUMNS, MAX_SUMMARY_LINES = 12, 6, 10
LIST_ITEM = re.compile(r"\s*([-*]|[0-9]+\.) ")


def outside_generated(text):
    """The page with each generated block blanked (its line numbers kept)."""
    return GENERATED.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def blocks(text):
    """(first line number, lines) of each paragraph, list item and table outside fenced code: a blank
    line, a heading or a fence ends one, a list item starts one."""
    found, current, fenced = [], [], False
    for number, line in enumerate(text.splitlines(), 1):
        fence = line.lstrip().startswith("```")
        fenced ^= fence
        prose = not (fenced or fence or not line.strip() or line.startswith("#"))
        new_item = prose and current and LIST_ITEM.match(line) and not is_table([current[0][1]])
        if current and (not prose or new_item):
            found.append((current[0][0], [l for _, l in current]))
            current = []
        if prose:
            current.append((number, line))
    if current:
        found.append((current[0][0], [l for _, l in current]))
    return found


def is_table(lines):
    return lines[0].lstrip().startswith("|")


def paragraph_lines(lines):
    return sum(-(-len(line) // LINE_CHARS) for line in lines)


def table_columns(lines):
    return max(len(re.findall(r"(?<!\\)\|", line.strip().strip("|"))) + 1 for line in lines if line.lstrip().startswith("|"))


def too_long_or_too_wide(name, text):
    """'PAGE:LINE: ...' for each paragraph over MAX_PARAGRAPH_LINES and each table over MAX_TABLE_COLUMNS."""
    out = []
    for number, lines in blocks(text):
        if is_table(lines) and table_columns(lines) > MAX_TABLE_COLUMNS:
            out.append(f"{name}:{number}: a table of {table_columns(lines)} columns (at most {MAX_TABLE_COLUMNS}: "
                       "split it in two)")
        elif not is_table(lines) and paragraph_lines(lines) > MAX_PARAGRAPH_LINES:
            out.append(f"{name}:{number}: a paragraph of {paragraph_lines(lines)} lines (at most {MAX_PARAGRAPH_LINES})")
    return out


def opening_faults(name, text):
    """What keeps a page from opening with its finding: a summary of at most MAX_SUMMARY_LINES
    right under the title, and a figure, table or generated block before the first section."""
    head = text.split("\n## ", 1)[0]
    found = blocks(outside_generated(head))  # the title, a heading, is in no block
    out = []
    if not found or is_table(found[0][1]) or paragraph_lines(found[0][1]) > MAX_SUMMARY_LINES:
        out.append(f"{name}: no summary of at most {MAX_SUMMARY_LINES} lines under the title")
    if not (GENERATED.search(head) or "![" in head or any(is_table(lines) for _, lines in found)):
        out.append(f"{name}: no figure or table before the first section")
    return out


def test_paragraphs_and_tables_fit_the_page():
    found = [fault for p in PAGES for fault in too_long_or_too_wide(p.name, outside_generated(p.read_text()))]
    assert found == [], "\n".join(found)


def test_every_docs_page_opens_with_a_summary_and_its_figure_or_table():
    found = [fault for p in PAGES[1:] for fault in opening_faults(p.name, p.read_text())]
    assert found == [], "\n".join(found)


# each tool that writes a block into a page, and the page: the tool's tables and notes must fit it too
GENERATED_BY = {"README.md": "analysis/answer.py's table() and notes", "capacity.md": "analysis/capacity.py's compact()",
                "emulation.md": "analysis/fidelity.py's tables()"}


@pytest.mark.parametrize("name", GENERATED_BY)
def test_the_generated_blocks_fit_the_page_too(name):
    page = next(p for p in PAGES if p.name == name)
    # each block without its opening marker, which is no paragraph of its own or part of the one after it
    found = [fault for block in GENERATED.findall(page.read_text())
             for fault in too_long_or_too_wide(name, block.split("\n", 1)[1])]
    assert found == [], f"{GENERATED_BY[name]} writes:\n" + "\n".join(found)


def test_the_page_checks_see_a_long_paragraph_a_wide_table_and_a_page_without_its_finding():
    assert too_long_or_too_wide("p", "\n".join(["# T", ""] + ["a line"] * 13)) == ["p:3: a paragraph of 13 lines (at most 12)"]
    assert too_long_or_too_wide("p", "# T\n\n" + "x" * LINE_CHARS * 13 + "\n") == ["p:3: a paragraph of 13 lines (at most 12)"]
    assert too_long_or_too_wide("p", "\n".join(["# T", ""] + ["a line"] * 12)) == []
    wide = "| " + " | ".join("abcdefg") + " |\n|" + "---|" * 7 + "\n"
    assert too_long_or_too_wide("p", wide) == ["p:1: a table of 7 columns (at most 6: split it in two)"]
    assert too_long_or_too_wide("p", wide.replace("| g ", "").replace("---|---|\n", "---|\n")) == []
    assert too_long_or_too_wide("p", "- one\n- two\n") == []
    assert opening_faults("p", "# T\n\n## Method\n\ntext\n") == [
        "p: no summary of at most 10 lines under the title", "p: no figure or table before the first section"]
    assert opening_faults("p", "# T\n\nSummary.\n\n| a | b |\n|---|---|\n\n## Method\n") == []


def test_the_readme_answer_is_generated_from_the_records():
    from analysis import answer
    text = (ROOT / "README.md").read_text()
    block = text.split(answer.README_BEGIN, 1)[1].split(answer.README_END, 1)[0]
    assert block.strip() == answer.table(answer.rows()).strip()
    assert (ROOT / answer.FIGURE).exists() and answer.FIGURE in text


def test_the_testing_page_names_every_test_file():
    """docs/testing.md says which tests hold which claim: a test file it does not name holds nothing a
    reader can find."""
    page = (ROOT / "docs" / "testing.md").read_text()
    unnamed = [p.name for p in sorted((ROOT / "tests").glob("test_*.py")) if f"`{p.name}`" not in page]
    assert not unnamed, f"docs/testing.md names no claim for {', '.join(unnamed)}"


def test_the_site_stages_the_archived_reports_each_labelled_with_the_folder_that_superseded_it(tmp_path):
    import importlib.util
    import tomllib
    spec = importlib.util.spec_from_file_location("docs_site", ROOT / "scripts" / "docs_site.py")
    docs_site = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(docs_site)
    docs_site.stage_reports(tmp_path)
    listed = (tmp_path / "reports.md").read_text()
    folders = tomllib.loads((ROOT / "results" / "catalogue.toml").read_text())["folders"]
    archived = {name: entry["superseded_by"] for name, entry in folders.items() if entry["path"].startswith("archive/")
                and (ROOT / "results" / entry["path"] / "report" / "report.html").exists()}
    assert archived  # the catalogue's archived folders with a report
    staged = {p.parent.name for p in (tmp_path / "reports" / "archive").glob("*/report.html")}
    assert staged == set(archived)
    for name, by in archived.items():
        line = next((x for x in listed.splitlines() if f"(reports/archive/{name}/report.html)" in x), None)
        assert line and (f"archived, superseded by [{by}]" in line or f"archived, superseded by `{by}`" in line), name
        report = (tmp_path / "reports" / "archive" / name / "report.html").read_text()
        assert re.search(rf"<body[^>]*><p[^>]*><strong>Archived</strong>: superseded by .*{re.escape(by)}", report), name
    assert not any(f"(reports/{name}/" in listed for name in archived)  # listed only as archived


@pytest.fixture(scope="module")
def site():
    done = subprocess.run(["make", "docs"], cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return ROOT / ".build" / "site"


CHECK_PAGE = """<!doctype html><html><body><iframe id="f" src="{page}" style="width:1000px;height:800px"></iframe>
<script>
// a table a tool writes follows a comment "NAME: written by ..." and precedes one "end of ..."
function generated(t) {{
  for (let n = t.previousSibling; n; n = n.previousSibling)
    if (n.nodeType === Node.COMMENT_NODE) {{
      if (/: written by /.test(n.data)) return true;
      if (/^ *end of /.test(n.data)) return false;
    }}
  return false;
}}
// the lines a cell's text takes: the tops of its text's boxes, those within half a line counted once
function lines_of(doc, cell) {{
  const style = getComputedStyle(cell), tops = [];  // line-height "normal" is about 1.2 em
  const half = (parseFloat(style.lineHeight) || 1.2 * parseFloat(style.fontSize)) / 2;
  const walk = doc.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {{
    const range = doc.createRange(); range.selectNodeContents(n);
    for (const r of range.getClientRects()) if (r.width > 0) tops.push(r.top);
  }}
  tops.sort((a, b) => a - b);
  return tops.filter((top, i) => i === 0 || top - tops[i - 1] > half).length;
}}
// how wide a table is against the content column, and the cells of 3 words or more that wrap to a
// word a line (a column squeezed to its longest word)
function table_fit(doc, t) {{
  const squeezed = Array.from(t.querySelectorAll('th, td')).filter(c => {{
    const words = c.textContent.trim().split(/\\s+/).length;
    return words >= 3 && lines_of(doc, c) >= words;
  }}).map(c => c.textContent.trim());
  return {{generated: generated(t), width: Math.round(t.getBoundingClientRect().width),
          column: Math.round(t.parentElement.clientWidth), squeezed: squeezed,
          head: t.rows[0].textContent.trim().replace(/\\s+/g, ' ').slice(0, 60)}};
}}
const f = document.getElementById('f');
f.addEventListener('load', () => setTimeout(() => {{
  const doc = f.contentDocument, imgs = Array.from(doc.images);
  const pre = document.createElement('pre'); pre.id = 'result';
  pre.textContent = JSON.stringify({{images: imgs.length,
    broken: imgs.filter(i => !(i.naturalWidth > 0)).map(i => i.getAttribute('src')),
    tables: Array.from(doc.querySelectorAll('table')).map(t => table_fit(doc, t))}});
  document.body.appendChild(pre);
}}, 500));
</script></body></html>"""


def open_in_chromium(site, page):
    """({"images": n, "broken": [...]}, console errors) of `page` loaded from a local server."""
    (site / "_check.html").write_text(CHECK_PAGE.format(page=page))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        out = subprocess.run([shutil.which("chromium"), "--headless=new", "--no-sandbox", "--disable-gpu",
                              "--enable-logging=stderr", "--v=0", "--virtual-time-budget=15000", "--dump-dom",
                              f"http://127.0.0.1:{server.server_address[1]}/_check.html"],
                             capture_output=True, text=True, timeout=120)
    finally:
        server.shutdown()
        (site / "_check.html").unlink()
    found = re.search(r'<pre id="result">(.*?)</pre>', out.stdout)
    assert found, f"the page did not finish loading: {out.stderr[-1500:]}"
    # Chromium logs every console message at one level: an error is an uncaught exception, an
    # error object or a resource that failed to load (the search worker's progress note is none)
    console = [line for line in out.stderr.splitlines()
               if ":CONSOLE" in line and re.search(r"Uncaught|Error|Failed to load resource", line)]
    return json.loads(found.group(1).replace("&quot;", '"')), console


@pytest.mark.parametrize("page", ["index.html", "results.html", "reports/ci-2core-emulated-h100-calibrated/report.html",
                                  "reports/archive/ci-2core-paper2016/report.html"])
def test_the_site_loads_in_a_browser_with_every_image_and_no_console_error(site, page):
    assert (site / page).exists()
    result, console = open_in_chromium(site, page)
    assert result["broken"] == [] and console == []
    if page != "results.html":
        assert result["images"] >= 1


SITE_PAGES = ["index.html", *(f"{p.stem}.html" for p in PAGES[1:])]


def misfits(tables):
    """'table "HEAD": ...' for each table wider than the content column or with cells squeezed to a
    word a line (each cell of 3 words or more on as many lines)."""
    out = []
    for t in tables:
        if t["width"] > t["column"]:
            out.append(f'table "{t["head"]}": {t["width"]} px wide in a column of {t["column"]} px')
        if t["squeezed"]:
            out.append(f'table "{t["head"]}": a word a line in {t["squeezed"][:3]}')
    return out


@pytest.mark.parametrize("page", SITE_PAGES)
def test_every_table_fits_the_content_column(site, page):
    result, _ = open_in_chromium(site, page)
    assert misfits([t for t in result["tables"] if not t["generated"]]) == []


@pytest.mark.parametrize("page", ["index.html", "capacity.html", "emulation.html"])
def test_the_generated_tables_fit_the_content_column_too(site, page):
    result, _ = open_in_chromium(site, page)
    assert misfits([t for t in result["tables"] if t["generated"]]) == []


def test_the_table_check_sees_a_table_too_wide_and_one_squeezed_to_a_word_a_line(site):
    (site / "_tables.html").write_text(
        '<html><body><div style="width:300px"><table><tr><td>fits</td></tr></table>'
        '<table><tr><td style="white-space:nowrap">' + "x" * 200 + "</td></tr></table>"
        '<table><tr><td style="width:1px">0.93 / 0.84</td><td>' + "a long cell beside it " * 40 + "</td></tr></table>"
        "<!-- t: written by a tool --><table><tr><td>" + "y" * 400 + "</td></tr></table></div></body></html>")
    try:
        result, _ = open_in_chromium(site, "_tables.html")
    finally:
        (site / "_tables.html").unlink()
    fits, wide, squeezed, generated = result["tables"]
    assert misfits([fits]) == [] and generated["generated"] and not wide["generated"]
    assert "px wide in a column of 300 px" in misfits([wide])[0]
    assert len(misfits([squeezed])) == 1 and misfits([squeezed])[0].endswith(": a word a line in ['0.93 / 0.84']")


def test_the_browser_check_sees_a_broken_image_and_a_console_error(site):
    (site / "_broken.html").write_text('<html><body><img src="absent.png"><script>undefinedFn();</script></body></html>')
    try:
        result, console = open_in_chromium(site, "_broken.html")
    finally:
        (site / "_broken.html").unlink()
    assert result["broken"] == ["absent.png"] and any("undefinedFn" in line for line in console)


def test_run_help_fits_a_screen_and_help_all_has_every_option(capsys):
    from experiments import run
    assert run.main(["--help"]) == 0
    short = capsys.readouterr().out
    assert len(short.splitlines()) <= 50 and "--help-all" in short and "AU" in short
    assert "--lmdb-read" not in short and "--riops" not in short
    assert run.main(["--help-all"]) == 0
    full = capsys.readouterr().out
    assert "--lmdb-read" in full and "--riops" in full and "--rtt" in full
