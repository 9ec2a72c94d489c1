#!/usr/bin/env python3
"""make docs: the site of README.md and docs/, with the HTML reports, built by MkDocs --strict
(a broken link fails the build). The README becomes the home page; every results folder with a
report gets a page of its own under Reports. Everything is staged in .build/docs-src and built
into .build/site (open .build/site/index.html).

  .venv-docs/bin/python scripts/docs_site.py [--mkdocs PATH]
"""
import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGE = ROOT / ".build" / "docs-src"
SITE = ROOT / ".build" / "site"
REPORT_FILES = ("report.html",)  # its .md twin would become a page of the same name


def home_page(readme):
    """README.md as the site's index: its links into docs/ made relative to docs/."""
    text = re.sub(r"\]\(docs/", "](", readme)
    return text.replace("src=\"docs/", "src=\"")


def stage_reports(stage):
    """Copy every results/*/report/ (HTML report and figures) and list them on reports.md."""
    lines = ["# Reports", "", "The HTML report of each results folder (`make report`), with its figures. Each "
             "folder's NOTES.md says on which machine and when its runs were made.", ""]
    for report in sorted((ROOT / "results").glob("*/report")):
        if not (report / "report.html").exists():
            continue
        folder = report.parent.name
        target = stage / "reports" / folder
        target.mkdir(parents=True)
        for f in report.iterdir():
            if f.is_file() and (f.suffix == ".png" or f.name in REPORT_FILES):
                shutil.copy2(f, target / f.name)
        lines.append(f"- [{folder}](reports/{folder}/report.html)")
    (stage / "reports.md").write_text("\n".join(lines) + "\n")


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
