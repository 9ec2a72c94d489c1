"""Shared fixtures: the project's Caffe, and small real artifacts made once per session."""
import faulthandler
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# quiet pycaffe in the test process; runs that parse Caffe logs ask for INFO themselves
os.environ.setdefault("GLOG_minloglevel", "2")
sys.path.insert(0, str(ROOT))
# the tests' own Redis Cluster: ports of its own, a password made for this session
os.environ["IMGSTORE_REDIS_PORT"] = os.environ.get("IMGSTORE_TEST_REDIS_PORT", "7510")
os.environ.pop("IMGSTORE_REDIS_PASSWORD", None)


# Every test ends within its limit: a hang is a failure that names the test, never a stuck CI.
# @pytest.mark.timeout(SECONDS) gives a test another limit; IMGSTORE_TEST_TIMEOUT the default.
DEFAULT_TIMEOUT = int(os.environ.get("IMGSTORE_TEST_TIMEOUT", "900"))


class TestTimeout(Exception):
    pass


def pytest_configure(config):
    config.addinivalue_line("markers", "timeout(seconds): this test's limit instead of the default "
                                       f"({DEFAULT_TIMEOUT} s)")


@pytest.fixture(autouse=True)
def _time_limit(request):
    marker = request.node.get_closest_marker("timeout")
    seconds = int(marker.args[0]) if marker else DEFAULT_TIMEOUT

    def expired(signum, frame):
        raise TestTimeout(f"{request.node.nodeid} ran past its {seconds} s limit (stacks of every thread above)")
    previous = signal.signal(signal.SIGALRM, expired)
    faulthandler.dump_traceback_later(seconds - 1, exit=False)  # where each thread was, should it hang
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        faulthandler.cancel_dump_traceback_later()
        signal.signal(signal.SIGALRM, previous)


def caffe_tool(name):
    import toolchain
    try:
        return str(toolchain.caffe_tool(name))
    except toolchain.MissingBuild as e:
        pytest.fail(f"{e} (make test does it)")


def local_backends():
    """The registered backends whose artifact is a folder on this machine (no server)."""
    from data_prep import backends, locations
    return [n for n, b in backends.REGISTRY.items() if b.location == locations.LocalFolder.name]


@pytest.fixture(scope="session")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


@pytest.fixture(scope="session")
def mnist_small(data_root):
    """Fashion-MNIST, the first 640 train and 640 test images, in every backend (Redis: in
    the data root's cluster, started for the writing and stopped again)."""
    from data_prep import backends, build
    build.prepare("mnist", list(backends.REGISTRY), data_root,
                  limit=640, progress=False, log=lambda *_: None)
    return data_root / "mnist"


@pytest.fixture(scope="session")
def cifar_small(data_root):
    """The CIFAR-10 stand-in, 400 train + 200 test images, in every local backend."""
    from data_prep import build
    build.prepare("cifar10", local_backends(), data_root,
                  count=400, progress=False, log=lambda *_: None)
    return data_root / "cifar10"


NET_SCRIPT = """
import sys, caffe
net = caffe.Net(sys.argv[1], caffe.TEST)
print("ready", flush=True)
if len(sys.argv) > 2:
    sys.stdin.readline()
    for _ in range(int(sys.argv[2])):
        net.forward()
print("done", flush=True)
"""


def net_process(net_file, forwards=None, **env):
    """A Python process that builds the net in `net_file` (prints "ready"), then, given
    `forwards`, waits for a line on stdin and runs that many forward passes (prints "done").
    Caffe's log goes to its stderr; `env` is added to its environment."""
    env = dict(os.environ, GLOG_minloglevel="0", GLOG_logtostderr="1", **env)
    args = [] if forwards is None else [str(forwards)]
    return subprocess.Popen([sys.executable, "-c", NET_SCRIPT, str(net_file), *args], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def run(cmd, **kw):
    """Run a command, failing the test with its output when it fails."""
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        pytest.fail(f"{' '.join(map(str, cmd))} exited {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p
