#!/usr/bin/env python3
"""make docs: the site of README.md and docs/, with the HTML reports, built by MkDocs --strict
(a broken link fails the build). The README becomes the home page; every results folder with a
report gets a page of its own under Reports, the archived ones (results/archive/) too, each
labelled archived and superseded by the folder results/catalogue.toml names. Everything is staged
in .build/docs-src and built into .build/site (open .build/site/index.html).

  .venv-docs/bin/python scripts/docs_site.py [--mkdocs PATH]
"""
import argparse
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGE = ROOT / ".build" / "docs-src"
SITE = ROOT / ".build" / "site"
REPORT_FILES = ("report.html",)  # its .md twin would become a page of the same name
CATALOGUE = ROOT / "results" / "catalogue.toml"


def home_page(readme):
    """README.md as the site's index: its links into docs/ made relative to docs/."""
    text = re.sub(r"\]\(docs/", "](", readme)
    return text.replace("src=\"docs/", "src=\"")


def stage_reports(stage):
    """Copy every results/*/report/ (HTML report and figures) and, under reports/archive/, every
    archived folder's, and list them on reports.md: an archived one labelled as such, with the
    folder that superseded it."""
    lines = ["# Reports", "", "The HTML report of each results folder (`make report`), with its figures. Each "
             "folder's NOTES.md says on which machine and when its runs were made.", ""]
    current = [report.parent.name for report in sorted((ROOT / "results").glob("*/report"))
               if (report / "report.html").exists()]
    for folder in current:
        copy_report(ROOT / "results" / folder / "report", stage / "reports" / folder)
        lines.append(f"- [{folder}](reports/{folder}/report.html)")
    archived = archived_reports()
    if archived:
        lines += ["", "## Archived", "", "Folders wholly superseded by a later one, kept with their records under "
                  "results/archive/.", ""]
    for folder, report, by in archived:
        copy_report(report, stage / "reports" / "archive" / folder, banner=archived_banner(by, by in current))
        superseder = f"[{by}](reports/{by}/report.html)" if by in current else f"`{by}`"
        lines.append(f"- [{folder}](reports/archive/{folder}/report.html): archived, superseded by {superseder}")
    (stage / "reports.md").write_text("\n".join(lines) + "\n")


def archived_reports():
    """[(folder, its report folder, the folder that superseded it)] of the archived results folders
    with an HTML report, as results/catalogue.toml lists them (read here, not through catalogue.py:
    the docs' venv does not install the project)."""
    folders = tomllib.loads(CATALOGUE.read_text())["folders"]
    return [(name, ROOT / "results" / entry["path"] / "report", entry.get("superseded_by"))
            for name, entry in sorted(folders.items())
            if entry["path"].startswith("archive/")
            and (ROOT / "results" / entry["path"] / "report" / "report.html").exists()]


def archived_banner(by, by_has_report):
    """The line an archived report opens with (staged at reports/archive/FOLDER/)."""
    name = f'<a href="../../{by}/report.html">{by}</a>' if by_has_report else f"<code>{by}</code>"
    return (f'<p style="border:1px solid #c60;padding:6px 10px"><strong>Archived</strong>: superseded by '
            f"{name} (its runs are kept with their records, not current).</p>")


def copy_report(report, target, banner=None):
    """A report folder's HTML report and figures into `target`; banner: HTML put first in its body."""
    target.mkdir(parents=True)
    for f in report.iterdir():
        if f.is_file() and (f.suffix == ".png" or f.name in REPORT_FILES):
            shutil.copy2(f, target / f.name)
    if banner:
        page = target / "report.html"
        page.write_text(re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + banner, page.read_text(), count=1))


def stage():
    shutil.rmtree(STAGE, ignore_errors=True)
    shutil.copytree(ROOT / "docs", STAGE, ignore=shutil.ignore_patterns("requirements.txt", "apt-packages.txt"))
    (STAGE / "index.md").write_text(home_page((ROOT / "README.md").read_text()))
    stage_reports(STAGE)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mkdocs", default=str(ROOT / ".venv-docs" / "bin" / "mkdocs"))
    a = p.parse_args(argv)
    stage()
    done = subprocess.run([a.mkdocs, "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml")], cwd=ROOT)
    if done.returncode == 0:
        print(f"site: {SITE / 'index.html'}")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
