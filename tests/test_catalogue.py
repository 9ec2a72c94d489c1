"""results/catalogue.toml against the tree: every committed results folder catalogued and every
entry there, the host each names read from its records, nothing but results inside results/,
and no code naming a committed folder by its path (catalogue.py is the one that does)."""
import collections
import json
import re
import shutil
import statistics
import subprocess
import tomllib

import pytest

import catalogue
from conftest import ROOT
from data_prep import datasets
from monitor import cpu_probe

# Files another change is moving (calibration into the library); their folder paths become
# catalogue lookups when it lands. Nothing else may name a committed folder by path.
MOVING = set()
CODE = ("*.py", "*.sh", "Makefile")
# Superseded folders still read by path by those files: they move to archive/ with them.
ARCHIVE_PENDING = set()


def committed_folders():
    """Folders holding committed files, relative to results/: NAME, or archive/NAME. Run
    outputs (results/DATASET/) are not catalogued."""
    files = subprocess.run(["git", "ls-files", "results"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    parts = [f.split("/")[1:] for f in files]
    found = {"/".join(p[:2]) if p[0] == "archive" else p[0] for p in parts if len(p) > 1 + (p[0] == "archive")}
    return {f for f in found if f not in datasets.REGISTRY}


def test_every_committed_folder_catalogued_and_every_entry_there():
    paths = {e.path for e in catalogue.entries().values()}
    assert sorted(committed_folders() - paths) == [], "results folders missing from results/catalogue.toml"
    assert sorted(e.name for e in catalogue.entries().values() if not e.folder.is_dir()) == [], \
        "catalogued folders missing under results/"


def test_statuses_and_archive():
    """Superseded folders live in archive/, each naming a folder that is not superseded; the rest
    name none and stay outside it."""
    entries = catalogue.entries().values()
    assert {e.status for e in entries} <= set(catalogue.STATUSES)
    for e in entries:
        assert e.path.split("/")[-1] == e.name and e.answers, e.name
        if e.status == "superseded":
            assert catalogue.current(e.name).status != "superseded", e.name
        else:
            assert not e.superseded_by and not e.archived, f"{e.name}: not superseded, so not in archive/"
    assert sorted(e.name for e in catalogue.superseded() if not e.archived) == sorted(ARCHIVE_PENDING)


def test_each_answer_names_a_page_that_names_the_folder():
    """What a folder answers: pages (README.md, docs/*.md) that name it, or 'named by no doc page'."""
    def names(page, name):
        return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", (ROOT / page).read_text())

    every_page = ["README.md", *(str(p.relative_to(ROOT)) for p in sorted((ROOT / "docs").glob("*.md")))]
    wrong = []
    for e in catalogue.entries().values():
        for answer in e.answers:
            pages = re.findall(r"README\.md|docs/[\w-]+\.md", answer)
            if answer.startswith("named by no doc page"):
                wrong += [(e.name, page) for page in every_page if names(page, e.name)]
            else:
                wrong += [(e.name, answer) for page in pages or [None] if not page or not names(page, e.name)]
    assert wrong == []


def test_lookups_and_their_errors():
    assert catalogue.folder("h100") == ROOT / "results" / "h100"
    assert catalogue.relative("h100") == "results/h100"
    archived = catalogue.archived()[0]
    assert catalogue.relative(archived.name) == f"results/archive/{archived.name}"
    assert catalogue.current(archived.name).status != "superseded"
    assert "h100-calibrate" in catalogue.named("*-calibrate*")
    with pytest.raises(catalogue.NotCatalogued, match=r"results/catalogue\.toml: no results folder named 'h100-nowhere'"):
        catalogue.folder("h100-nowhere")


def recorded_hosts(folder):
    """(cpu_model, cores, gpu) counts and the pixel probes of a folder's committed ok records; in a
    folder without records, of its committed JSON files (benchmarks' output: every machine and probe
    they hold). A user's own runs beside them (untracked) are no part of what the catalogue says."""
    hosts, probes = collections.Counter(), []
    for path in catalogue.tracked(folder, "records*.jsonl"):
        for line in filter(str.strip, path.read_text().splitlines()):
            r = json.loads(line)
            env = r.get("environment", {})
            hosts[(env.get("cpu_model"), env.get("cpu_cores"), env.get("gpu_model"))] += 1
            if r.get("status") == "ok" and cpu_probe.rate(env, cpu_probe.PIXELS):
                probes.append(cpu_probe.rate(env, cpu_probe.PIXELS))
    if not hosts:
        for path in catalogue.tracked(folder, "*.json"):
            machines_in(json.loads(path.read_text()), hosts, probes)
    return hosts, probes


def machines_in(value, hosts, probes):
    if isinstance(value, dict):
        if "cpu_model" in value:
            hosts[(value["cpu_model"], value.get("cpu_cores"), value.get("gpu_model"))] += 1
        if isinstance(value.get("cpu_probe"), dict) and cpu_probe.PIXELS in value["cpu_probe"]:
            probes.append(value["cpu_probe"][cpu_probe.PIXELS])
        value = list(value.values())
    for v in value if isinstance(value, list) else ():
        machines_in(v, hosts, probes)


PER_SUBFOLDER = "one per subfolder"  # a folder of several hosts' checks (host-check), each in its own subfolder


def test_machines_are_the_records_hosts():
    """Each folder with records names the host its records name, and their median probe; a folder
    of several hosts' checks claims no one host, and each of its subfolders holds one host's."""
    raw = tomllib.loads(catalogue.CATALOGUE.read_text())["folders"]
    for name, e in raw.items():
        if e.get("hosts") == PER_SUBFOLDER:
            assert "cpu_model" not in e and "probe" not in e, f"{name}: its checks are of several hosts"
            subfolders = {f.relative_to(catalogue.folder(name)).parts[0] for f in catalogue.tracked(catalogue.folder(name))
                          if len(f.relative_to(catalogue.folder(name)).parts) > 1}
            for sub in sorted(subfolders):
                hosts, _ = recorded_hosts(catalogue.folder(name) / sub)
                assert len(hosts) == 1, f"{name}/{sub}: records of several hosts: {dict(hosts)}"
            continue
        hosts, probes = recorded_hosts(catalogue.folder(name))
        if not hosts:
            assert e["machine"] == "none in its records", name
            continue
        assert len(hosts) == 1, f"{name}: records of several hosts: {dict(hosts)}"
        (model, cores, gpu), = hosts
        probe = round(statistics.median(probes)) if probes else "not measured"
        assert (e["cpu_model"], e["cores"], e["probe"], e.get("gpu")) == (model, cores, probe, gpu), name
        assert e["machine"].startswith(f"{model}, {cores} cores") and str(probe) in e["machine"], name


def test_no_script_or_patch_inside_results():
    files = subprocess.run(["git", "ls-files", "results"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    assert [f for f in files if re.search(r"\.(py|sh|patch|diff)$", f)] == []


def folder_paths_named(text):
    """results/NAME (or "results" / "NAME") where NAME is a catalogued folder."""
    names = "|".join(sorted(map(re.escape, catalogue.entries()), key=len, reverse=True))
    return re.findall(rf"""results(?:/|["']\s*/\s*["'])(?:archive/)?({names})(?![\w-])""", text)


def code_files():
    files = subprocess.run(["git", "ls-files", *CODE, *(f"**/{c}" for c in CODE)], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    return sorted(set(files) - {"catalogue.py", "tests/test_catalogue.py"} - MOVING)  # this one: examples


def test_no_code_names_a_committed_folder_by_path():
    named = {f: sorted(set(found)) for f in code_files()
             if (found := folder_paths_named((ROOT / f).read_text(errors="replace")))}
    assert named == {}, "ask catalogue.folder(NAME) instead"


def test_the_path_finder_finds_both_spellings():
    assert folder_paths_named('x = "results/h100-calibrate" + ROOT / "results" / "ci-2core-peers"') == \
        ["h100-calibrate", "ci-2core-peers"]
    assert folder_paths_named('out = ROOT / "results" / dataset  # results/DATASET, results/h100x') == []


CATALOGUE_CHECKS = (test_every_committed_folder_catalogued_and_every_entry_there, test_statuses_and_archive,
                    test_machines_are_the_records_hosts, test_no_script_or_patch_inside_results)


def test_a_users_own_host_check_beside_the_committed_ones_breaks_no_check():
    """make host-check on another host writes its folder into results/host-check/ of the checkout,
    untracked: the catalogue's checks read what git tracks and still pass with it there."""
    folder = catalogue.folder("host-check")
    committed = sorted({f.relative_to(folder).parts[0] for f in catalogue.tracked(folder, "records*.jsonl")})[0]
    mine = folder / "Intel-Xeon-Test-16c-probe421-untracked"
    assert not mine.exists(), f"{mine}: left by an earlier run; remove it"
    try:
        shutil.copytree(folder / committed, mine)
        for path in mine.rglob("records*.jsonl"):
            rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            for r in rows:
                r["environment"] = dict(r.get("environment") or {}, cpu_model="Intel(R) Xeon(R) Test", cpu_cores=16)
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        assert recorded_hosts(mine)[0] == {}  # untracked: no committed record
        for check in CATALOGUE_CHECKS:
            check()
    finally:
        shutil.rmtree(mine, ignore_errors=True)
