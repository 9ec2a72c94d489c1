"""Every child process the project starts dies with its starter. A benchmark SIGKILLed while its
child runs leaves no process carrying its environment (a marker variable set for it alone, as
test_killed_run looks for run.py's): the child got a death signal (processes.child_setup). The
child is stopped (SIGSTOP) once seen, so that one which would end by itself cannot pass for one
that was killed. And every place in the project's own Python that starts a process gives it a
death signal, or is named below as short-lived, with the reason."""
import ast
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from conftest import ROOT, stderr_tail
from test_killed_run import MARK, describe, marked

SEEN_WAIT_S = 300  # the most the benchmark's child is waited for on a loaded 2-core machine
GONE_WAIT_S = 10  # a death signal acts at once; this bounds the wait for it


def kill_benchmark_while(argv, program, tmp_path):
    """Starts the benchmark `argv` with a marker in its environment, waits (bounded) for a child
    of it running `program` and stops that child, SIGKILLs the benchmark, and asserts that no
    marked process is left within GONE_WAIT_S."""
    mark = uuid.uuid4().hex
    scratch = tmp_path / "tmp"  # the benchmark's temporary folders, which its SIGKILL leaves
    scratch.mkdir()
    env = dict(os.environ, IMGSTORE_LOCK=str(tmp_path / "run.lock"), TMPDIR=str(scratch), **{MARK: mark})
    bench = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True)
    try:
        deadline = time.monotonic() + SEEN_WAIT_S
        while not (child := _running(bench.pid, program)):
            assert bench.poll() is None, f"{argv[1]} ended before starting {program}: {stderr_tail(bench)}"
            assert time.monotonic() < deadline, f"{argv[1]} started no {program} within {SEEN_WAIT_S} s"
            time.sleep(0.01)
        child.send_signal(signal.SIGSTOP)
        bench.kill()
        bench.wait(timeout=10)
        deadline = time.monotonic() + GONE_WAIT_S
        while marked(mark) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not marked(mark), f"left running after {argv[1]} was killed: {describe(marked(mark))}"
    finally:
        bench.kill()
        bench.wait(timeout=10)
        for p in marked(mark):  # only what this test's benchmark started
            p.kill()


def _running(pid, program):
    """The child of `pid` whose program's file name is `program`, or None."""
    try:
        children = psutil.Process(pid).children()
    except psutil.Error:
        return None
    for child in children:
        try:
            if Path(child.cmdline()[0]).name == program:
                return child
        except (psutil.Error, IndexError):
            pass
    return None


@pytest.mark.timeout(600)
def test_gpu_time_killed_leaves_no_caffe_time(tmp_path):
    argv = [sys.executable, str(ROOT / "benchmarks" / "gpu_time.py"), "--cpu", "--nets", "mnist",
            "--iterations", "100000000"]
    kill_benchmark_while(argv, "caffe", tmp_path)


@pytest.mark.timeout(600)
def test_convert_speed_killed_leaves_no_convert_imageset(tmp_path):
    argv = [sys.executable, str(ROOT / "benchmarks" / "convert_speed.py"), "--images", "40", "--jobs", "1"]
    kill_benchmark_while(argv, "convert_imageset", tmp_path)


# The project's own Python (tracked, tests aside) and the calls in it that start a process.
SPAWNERS = {"Popen", "run", "call", "check_call", "check_output"}
DEATH_SIGNAL = ("child_setup", "dies_with", "death_signal")  # what a preexec_fn giving one is named by

# (file, program) that starts a short-lived process, which ends by itself soon: no death signal needed
SHORT_LIVED = {
    ("benchmarks/convert_speed.py", "sync"): "flushes the dirty pages and exits",
    ("benchmarks/io_limit.py", "sync"): "flushes the dirty pages and exits",
    ("data_prep/cache.py", "sync"): "flushes the dirty pages and exits",
    ("experiments/hosts.py", "ip"): "one namespace or link change, then exits",
    ("toolchain.py", "gcc"): "compiles one small C file (the delay proxy, the CPU probe)",
    ("toolchain.py", "ldd"): "lists one library's dependencies, under a 30 s timeout",
    ("device/gpu_calibrate.py", "git"): "git ls-files of the checkout",
    ("catalogue.py", "git"): "git ls-files of the results, under a 60 s timeout",
    ("device/steps.py", "nvidia-smi"): "one query of the GPU's name, under a 30 s timeout",
    ("device/gpu_calibrate.py", "sources_digest.sh"): "hashes a few source files",
    ("scripts/docs_site.py", "a.mkdocs"): "mkdocs build, run in the foreground of a make target",
}

# (file, function or * for the whole file) whose long-lived child has no death signal yet: another
# change's files, each to give its child one (processes.child_setup) and leave this list;
# test_owed_calls_are_still_owed says when an entry is no longer needed
OWED = {
    ("benchmarks/decoder.py", "minimal_opencv_lib"): "device/opencv_minimal.sh, a build of OpenCV",
    ("benchmarks/history/ab_buffers_not_applied.py", "*"): "a past A/B, kept as it was run",
    ("benchmarks/history/ab_lmdb_0024.py", "*"): "a past A/B, kept as it was run",
    ("benchmarks/history/ab_read_thread_0025.py", "*"): "a past A/B, kept as it was run",
}


def project_python():
    listed = subprocess.run(["git", "ls-files", "-z", "*.py"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout
    return [p for p in listed.split("\0") if p and not p.startswith("tests/")]


def spawning_calls(rel):
    """(line, function, program, has a death signal) of each subprocess call in file `rel`;
    function: its qualified name (Class.method), or <module>."""
    source = (ROOT / rel).read_text()
    out = []

    def walk(node, function, function_source):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = child.name if function == "<module>" else f"{function}.{child.name}"
                walk(child, name, ast.get_source_segment(source, child))
                continue
            if (isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute)
                    and isinstance(child.func.value, ast.Name) and child.func.value.id == "subprocess"
                    and child.func.attr in SPAWNERS):
                out.append((child.lineno, function, program(child), gives_death_signal(child, function_source)))
            walk(child, function, function_source)
    walk(ast.parse(source, rel), "<module>", source)
    return out


def program(call):
    """The started program, in words: argv's first item's file name where it is spelt in the call."""
    first = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "args"), None)
    if isinstance(first, ast.List) and first.elts:
        first = first.elts[0]
    if first is None:
        return "?"
    constants = sorted((n for n in ast.walk(first) if isinstance(n, ast.Constant) and isinstance(n.value, str)),
                       key=lambda n: (n.lineno, n.col_offset))
    return Path(constants[-1].value).name if constants else ast.unparse(first)


def gives_death_signal(call, function_source):
    """A preexec_fn named by DEATH_SIGNAL, or a local one defined in a function that calls one."""
    given = next((k.value for k in call.keywords if k.arg == "preexec_fn"), None)
    if given is None:
        return False
    text = ast.unparse(given)
    if isinstance(given, ast.Name):
        text = function_source
    return any(word in text for word in DEATH_SIGNAL)


def owed(rel, function):
    return (rel, function) in OWED or (rel, "*") in OWED


def test_every_started_process_gets_a_death_signal_or_is_named_short_lived():
    unprotected = [f"{rel}:{line} ({function}: {prog})" for rel in project_python()
                   for line, function, prog, signalled in spawning_calls(rel)
                   if not signalled and (rel, prog) not in SHORT_LIVED and not owed(rel, function)]
    assert not unprotected, (
        "processes started without a death signal (a SIGKILLed starter leaves them running): give each "
        "preexec_fn=processes.child_setup(...) (from the thread that outlives the child), or, for a "
        f"command that ends by itself at once, name it in SHORT_LIVED with the reason: {unprotected}")


def test_owed_calls_are_still_owed():
    unsignalled = {key for rel in project_python() for _, function, _, signalled in spawning_calls(rel)
                   if not signalled for key in ((rel, function), (rel, "*"))}
    done = [key for key in OWED if key not in unsignalled]
    assert not done, f"these give a death signal now (or are gone): remove them from OWED: {done}"
