"""The suite cannot hang: every test has a time limit over its setup, call and teardown
(tests/conftest.py), a test past it fails by name with every thread's stack, and a hang the limit
cannot interrupt (a call into C that never returns) ends the run with the stacks, in bounded time;
a wait for a child's line has its own deadline. The cases on limits run pytest on tests written
here, with the suite's conftest and a limit of seconds."""
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ended_within, given_up, line_within

ROOT = Path(__file__).resolve().parents[1]


def pytest_on(folder, files, limit):
    """pytest run on `files` ({name: source}) in `folder` beside a copy of the suite's conftest,
    with a default limit of `limit` seconds: (the finished process, its wall seconds)."""
    shutil.copy(ROOT / "tests" / "conftest.py", folder / "conftest.py")
    for name, source in files.items():
        (folder / name).write_text(source)
    started = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder)],
                       capture_output=True, text=True, timeout=60, cwd=folder,
                       env={"PATH": "/usr/bin:/bin", "IMGSTORE_TEST_TIMEOUT": str(limit)})
    return p, time.monotonic() - started


def test_a_hanging_test_fails_by_name_within_its_limit(tmp_path):
    p, seconds = pytest_on(tmp_path, {"test_hangs.py":
                                      "import subprocess, pytest\n"
                                      "def test_waits_for_a_child_that_never_ends():\n"
                                      "    subprocess.run(['sleep', '120'])\n"
                                      "@pytest.mark.timeout(30)\n"
                                      "def test_with_a_limit_of_its_own():\n"
                                      "    pass\n"}, limit=3)
    assert seconds < 40
    assert p.returncode == 1, p.stdout + p.stderr
    assert "test_waits_for_a_child_that_never_ends ran past its 3 s limit in its call" in p.stdout
    assert "1 failed, 1 passed" in p.stdout


def test_a_module_fixture_that_never_starts_or_never_stops_fails_the_test_by_name(tmp_path):
    """A module's fixtures start in its first test's setup and stop in its last test's teardown
    (a Redis Cluster, prepared data): the limit holds there too."""
    p, seconds = pytest_on(tmp_path, {
        "test_setup_hangs.py": "import subprocess, pytest\n"
                               "@pytest.fixture(scope='module')\n"
                               "def cluster():\n"
                               "    subprocess.run(['sleep', '120'])\n"
                               "    yield\n"
                               "def test_needs_a_fixture_that_never_starts(cluster):\n"
                               "    pass\n",
        "test_teardown_hangs.py": "import subprocess, pytest\n"
                                  "@pytest.fixture(scope='module')\n"
                                  "def cluster():\n"
                                  "    yield\n"
                                  "    subprocess.run(['sleep', '120'])\n"
                                  "def test_last_of_a_module_whose_fixture_never_stops(cluster):\n"
                                  "    pass\n"}, limit=2)
    assert seconds < 40
    assert p.returncode == 1, p.stdout + p.stderr
    assert "test_needs_a_fixture_that_never_starts ran past its 2 s limit in its setup" in p.stdout
    assert "test_last_of_a_module_whose_fixture_never_stops ran past its 2 s limit in its teardown" in p.stdout
    assert "1 passed, 2 errors" in p.stdout


def test_a_hang_in_c_ends_the_run_with_every_threads_stack_naming_the_test(tmp_path):
    """A mutex locked twice by one thread, the GIL held (as Caffe's forward holds it): SIGALRM's
    handler never runs. The backstop ends the run at twice the limit: later tests do not run."""
    p, seconds = pytest_on(tmp_path, {"test_deadlocks.py":
                                      "import ctypes, threading\n"
                                      "def waits_beside_it(): threading.Event().wait()\n"
                                      "def test_deadlocks_in_c():\n"
                                      "    threading.Thread(target=waits_beside_it, daemon=True).start()\n"
                                      "    mutex = ctypes.create_string_buffer(64)  # zeroed: a normal mutex\n"
                                      "    libc = ctypes.PyDLL(None)  # holds the GIL through the call\n"
                                      "    libc.pthread_mutex_lock(mutex)\n"
                                      "    libc.pthread_mutex_lock(mutex)\n"
                                      "def test_after_it():\n"
                                      "    open('after-it-ran', 'w').close()\n"}, limit=2)
    assert seconds < 40
    assert p.returncode == 1, p.stdout + p.stderr
    backstop = "Timeout (0:00:04)!"
    assert backstop in p.stderr, p.stderr
    stacks = p.stderr[p.stderr.index(backstop):]
    assert 'test_deadlocks.py", line 8 in test_deadlocks_in_c' in stacks, stacks  # the hung test, named
    assert "in waits_beside_it" in stacks, stacks  # the other thread's stack too
    assert not (tmp_path / "after-it-ran").exists()


@pytest.mark.timeout(60)
def test_a_wait_for_a_childs_line_ends_at_its_deadline_naming_what_it_awaited():
    p = subprocess.Popen(["sh", "-c", "echo first; echo why it hangs >&2; exec sleep 120"], text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert line_within(p, "the first line", time.monotonic() + 30) == "first\n"
    started = time.monotonic()
    with pytest.raises(pytest.fail.Exception) as failed:
        line_within(p, "the second line", started + 1)
    assert time.monotonic() - started < 15
    assert str(failed.value).startswith(f"no line by the deadline: the second line (pid {p.pid}, now killed)")
    assert "why it hangs" in str(failed.value)
    assert p.wait(timeout=10) == -signal.SIGKILL


@pytest.mark.timeout(60)
def test_a_child_given_up_shows_the_log_it_wrote_while_running():
    """Its stderr is read after the kill: read before it, a running child's would never end."""
    p = subprocess.Popen(["sh", "-c", "echo what it was doing >&2; exec sleep 120"], text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(0.5)
    started = time.monotonic()
    with pytest.raises(pytest.fail.Exception) as failed:
        given_up(p, "a sign of progress")
    assert time.monotonic() - started < 5
    assert str(failed.value).startswith(f"a sign of progress (pid {p.pid}, now killed); its stderr ended:\n")
    assert "what it was doing" in str(failed.value)
    assert p.wait(timeout=10) == -signal.SIGKILL


@pytest.mark.timeout(60)
def test_a_child_that_does_not_end_in_time_is_killed_naming_what_was_awaited():
    """communicate() reads the stderr before its timeout: the message still holds it."""
    p = subprocess.Popen(["sh", "-c", "echo why it hangs >&2; exec sleep 120"], text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    started = time.monotonic()
    with pytest.raises(pytest.fail.Exception) as failed:
        ended_within(p, "its end", 1)
    assert time.monotonic() - started < 15
    assert str(failed.value).startswith(f"its end within 1 s (pid {p.pid}, now killed); its stderr ended:\n")
    assert "why it hangs" in str(failed.value)
    assert p.wait(timeout=10) == -signal.SIGKILL
    ok = subprocess.Popen(["cat"], text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert ended_within(ok, "cat's end", 30, stdin="echoed\n") == ("echoed\n", "")
