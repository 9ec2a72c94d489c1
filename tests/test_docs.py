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


def test_the_readme_answer_is_generated_from_the_records():
    from analysis import answer
    text = (ROOT / "README.md").read_text()
    block = text.split(answer.README_BEGIN, 1)[1].split(answer.README_END, 1)[0]
    assert block.strip() == answer.table(answer.rows()).strip()
    assert (ROOT / answer.FIGURE).exists() and answer.FIGURE in text


@pytest.fixture(scope="module")
def site():
    done = subprocess.run(["make", "docs"], cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return ROOT / ".build" / "site"


CHECK_PAGE = """<!doctype html><html><body><iframe id="f" src="{page}" style="width:1000px;height:800px"></iframe>
<script>
const f = document.getElementById('f');
f.addEventListener('load', () => setTimeout(() => {{
  const imgs = Array.from(f.contentDocument.images);
  const pre = document.createElement('pre'); pre.id = 'result';
  pre.textContent = JSON.stringify({{images: imgs.length,
    broken: imgs.filter(i => !(i.naturalWidth > 0)).map(i => i.getAttribute('src'))}});
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


@pytest.mark.parametrize("page", ["index.html", "results.html", "reports/ci-2core-emulated-h100-calibrated/report.html"])
def test_the_site_loads_in_a_browser_with_every_image_and_no_console_error(site, page):
    assert (site / page).exists()
    result, console = open_in_chromium(site, page)
    assert result["broken"] == [] and console == []
    if page != "results.html":
        assert result["images"] >= 1


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
