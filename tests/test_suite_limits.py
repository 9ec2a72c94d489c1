"""The suite cannot hang: every test has a time limit (tests/conftest.py), and a test past it
fails by name with every thread's stack, in bounded time."""
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_hanging_test_fails_by_name_within_its_limit(tmp_path):
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_hangs.py").write_text(
        "import subprocess, pytest\n"
        "def test_waits_for_a_child_that_never_ends():\n"
        "    subprocess.run(['sleep', '120'])\n"
        "@pytest.mark.timeout(30)\n"
        "def test_with_a_limit_of_its_own():\n"
        "    pass\n")
    started = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                       capture_output=True, text=True, timeout=90, cwd=tmp_path,
                       env={"PATH": "/usr/bin:/bin", "IMGSTORE_TEST_TIMEOUT": "3"})
    assert time.monotonic() - started < 60
    assert p.returncode == 1, p.stdout + p.stderr
    assert "test_waits_for_a_child_that_never_ends ran past its 3 s limit" in p.stdout
    assert "1 failed, 1 passed" in p.stdout
