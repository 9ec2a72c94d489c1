"""The installed project and its one command: `imgstore --help` lists every sub-command, each
sub-command's --help is its module's own, the script paths the docs name run from anywhere
without the tree on sys.path, and no module puts the tree there itself."""
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import cli
from conftest import ROOT

IMGSTORE = Path(sys.executable).parent / "imgstore"
# the only lines allowed to change sys.path, each with why
SYS_PATH_ALLOWED = {
    "benchmarks/peers.py": "run as a script its own folder leads sys.path, where the file's name hides the peers "
                           "package: it takes that folder out",
    "tests/test_redis_external.py": "a child script that imports a helper of tests/ (conftest's pytest does it "
                                    "for the tests themselves)",
}
CHANGES_SYS_PATH = re.compile(r"sys\.path\s*(\.\s*(insert|append|extend|remove|pop|clear)\s*\(|\[[^\]]*\]\s*=|\+?=[^=])")


def clean_env():
    """The environment without a PYTHONPATH that could put the tree on sys.path behind the test's back."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def script_of(command):
    return ROOT / (command.module.replace(".", "/") + ".py")


def help_of(words, capsys, monkeypatch):
    """(exit status, what it printed) of `imgstore WORDS --help`, in this process."""
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # dispatch names the sub-command in argv[0]
    try:
        status = cli.main(words + ["--help"])
    except SystemExit as e:
        status = e.code
    return status or 0, capsys.readouterr().out


def test_the_command_lists_every_sub_command_with_its_help():
    p = subprocess.run([str(IMGSTORE), "--help"], capture_output=True, text=True, cwd="/", env=clean_env())
    assert p.returncode == 0, p.stderr
    for command in cli.COMMANDS:
        assert re.search(rf"^  {re.escape(command.name)} +{re.escape(command.help)}$", p.stdout, re.M), command.name


@pytest.mark.parametrize("command", cli.COMMANDS, ids=lambda c: c.name)
def test_each_sub_command_help_is_its_modules_own(command, capsys, monkeypatch):
    status, text = help_of(command.name.split(), capsys, monkeypatch)
    assert status == 0
    first_line = importlib.import_module(command.module).__doc__.strip().splitlines()[0]
    assert " ".join(first_line.split()) in " ".join(text.split())
    assert text.startswith(f"usage: imgstore {command.name} ")


def test_a_group_lists_its_commands_and_a_wrong_name_is_one_line(capsys, monkeypatch):
    status, text = help_of(["bench"], capsys, monkeypatch)
    bench = [c for c in cli.COMMANDS if c.name.startswith("bench ")]
    assert status == 0 and all(c.name in text for c in bench) and "prepare" not in text
    p = subprocess.run([str(IMGSTORE), "bench", "no-such"], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.strip() == "imgstore: no sub-command bench 'no-such' (imgstore --help lists them)"


def test_the_script_paths_run_from_another_folder_without_the_tree_on_sys_path(tmp_path):
    p = subprocess.run([sys.executable, str(ROOT / "experiments" / "run.py"), "--help"], capture_output=True,
                       text=True, cwd=tmp_path, env=clean_env())
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("usage: run.py ") and "--accelerator" in p.stdout


@pytest.mark.parametrize("command", cli.COMMANDS, ids=lambda c: c.name)
def test_every_sub_commands_script_runs_as_a_script(command, tmp_path):
    p = subprocess.run([sys.executable, str(script_of(command)), "--help"], capture_output=True, text=True,
                       cwd=tmp_path, env=clean_env(), timeout=120)
    assert p.returncode == 0 and p.stdout.startswith("usage: "), p.stderr[-2000:]


def test_every_script_is_a_sub_command_or_said_to_be_internal():
    scripts = {str(f.relative_to(ROOT)) for f in tracked("*.py")
               if not f.is_relative_to(ROOT / "tests") and not f.is_relative_to(ROOT / "results")
               and '__name__ == "__main__"' in f.read_text()} - {"cli.py"}
    commands = {str(script_of(c).relative_to(ROOT)) for c in cli.COMMANDS}
    assert scripts - commands - set(cli.INTERNAL) == set()
    assert (commands | set(cli.INTERNAL)) - scripts == set()


def test_no_module_puts_the_tree_on_sys_path():
    """The project is installed (scripts/venv.sh): nothing patches sys.path to find its own modules.
    benchmarks/history/ holds past measurements' scripts as they were run."""
    patching = {str(f.relative_to(ROOT)) for f in tracked("*.py")
                if not f.is_relative_to(ROOT / "benchmarks" / "history") and CHANGES_SYS_PATH.search(f.read_text())}
    assert patching - set(SYS_PATH_ALLOWED) == set()


def tracked(pattern):
    out = subprocess.run(["git", "ls-files", "-z", pattern], capture_output=True, text=True, cwd=ROOT, check=True)
    return [ROOT / name for name in out.stdout.split("\0") if name]
