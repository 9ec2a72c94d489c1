"""Shared fixtures: the project's Caffe, and small real artifacts made once per session."""
import faulthandler
import fcntl
import importlib.metadata
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# quiet pycaffe in the test process; runs that parse Caffe logs ask for INFO themselves
os.environ.setdefault("GLOG_minloglevel", "2")

# Redis ports. A cluster whose first node listens on PORT uses PORT+I for its nodes, PORT+100+I for
# its delay proxies and PORT+10000+I for its cluster bus (data_prep/redis_cluster/cluster.py). Each user
# gets a block of its own: BLOCK_WIDTH node ports; blocks are laid out ten to a group of 200 ports,
# the first 100 of a group for nodes, the second 100 for their proxies, so no block's proxies land
# on another's nodes; the bus ports, 10000 higher, are above all of them.
PORTS_FROM = int(os.environ.get("IMGSTORE_TEST_REDIS_PORT", "7510"))
BLOCK_WIDTH = 10
PROXY_OFFSET, BUS_OFFSET = 100, 10000
BLOCKS = 100  # PORTS_FROM .. PORTS_FROM + 2000, buses up to PORTS_FROM + 12000
PORT_LOCKS = Path(tempfile.gettempdir()) / f"imgstore-test-ports-{os.getuid()}"


def block_port(index):
    """The first node port of block `index`."""
    group, place = divmod(index, PROXY_OFFSET // BLOCK_WIDTH)
    return PORTS_FROM + group * 2 * PROXY_OFFSET + place * BLOCK_WIDTH


def block_ports(port):
    """Every port a cluster whose first node is on `port` may listen on."""
    return [port + offset + i for offset in (0, PROXY_OFFSET, BUS_OFFSET) for i in range(BLOCK_WIDTH)]


def port_free(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as redis-server: TIME_WAIT is no owner
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _port_lock_folder():
    PORT_LOCKS.mkdir(mode=0o700, exist_ok=True)
    st = PORT_LOCKS.lstat()
    if PORT_LOCKS.is_symlink() or st.st_uid != os.getuid():
        what = "a link" if PORT_LOCKS.is_symlink() else f"owned by uid {st.st_uid}"
        pytest.fail(f"{PORT_LOCKS}: not a folder of this user's ({what}): remove it")
    return PORT_LOCKS


@contextmanager
def redis_ports():
    """A block of Redis ports of the caller's own, for one cluster (up to BLOCK_WIDTH nodes):
    yields its first node's port. No other user of this helper, in this session or another
    one of this user at the same time (a lock file each), holds it, and every port of it (nodes,
    proxies, buses) was free when it was handed out. Given back when the block ends; the
    caller stops its cluster before that."""
    folder = _port_lock_folder()
    for index in range(BLOCKS):
        port = block_port(index)
        lock = os.open(folder / f"{port}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock)
            continue
        if not all(port_free(p) for p in block_ports(port)):  # servers left by someone else
            os.close(lock)
            continue
        try:
            yield port
        finally:
            os.close(lock)
        return
    pytest.fail(f"no block of {BLOCK_WIDTH} free Redis ports from {PORTS_FROM} "
                f"(IMGSTORE_TEST_REDIS_PORT) in {BLOCKS} tries: other servers hold them")


@contextmanager
def environment_kept(*names, **values):
    """The environment variables `names` and those `values` sets (None: unset) as they were
    before, once the block ends, whatever was done to them inside (data_prep sets a password
    it generates, say). The only writer of os.environ in the tests."""
    before = {name: os.environ.get(name) for name in (*names, *values)}
    try:
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def redis_port_in_environment():
    """A block of ports (redis_ports) whose first port is IMGSTORE_REDIS_PORT inside, where
    data_prep's Cluster and the runs the test starts find it; the variable is put back after."""
    with redis_ports() as port, environment_kept(IMGSTORE_REDIS_PORT=str(port)):
        yield port


@pytest.fixture(scope="session", autouse=True)
def suite_redis_port():
    """The suite's own Redis Cluster (the data root's): a block of ports for the session, and a
    password made for this session (none taken from the caller's environment)."""
    with redis_port_in_environment() as port, environment_kept(IMGSTORE_REDIS_PASSWORD=None):
        yield port


@pytest.fixture
def redis_port():
    """A block of Redis ports for this test alone (redis_ports): its first port."""
    with redis_ports() as port:
        yield port


# Every test ends within its limit: a hang is a failure that names the test, never a stuck CI.
# @pytest.mark.timeout(SECONDS) gives a test another limit; IMGSTORE_TEST_TIMEOUT the default.
DEFAULT_TIMEOUT = int(os.environ.get("IMGSTORE_TEST_TIMEOUT", "900"))
BACKSTOP_MARGIN_MAX = 60
# The stderr the run was started with (pytest_configure): fd 2 is pytest's capture file while a
# test runs, and what the backstop writes there is never shown once it has ended the process.
_run_stderr = 2


class TestTimeout(Exception):
    pass


def installed_from():
    """The tree this venv's project is installed from (scripts/venv.sh: pip install -e .), or None.
    The tests' child processes import the project through that install, not through this tree."""
    try:
        url = json.loads(importlib.metadata.distribution("imgstore").read_text("direct_url.json") or "{}").get("url", "")
    except importlib.metadata.PackageNotFoundError:
        return None
    return Path(urllib.parse.urlparse(url).path).resolve() if url.startswith("file:") else None


def pytest_sessionstart(session):
    if not (ROOT / "pyproject.toml").exists():  # this file copied elsewhere (test_suite_limits.py)
        return
    where = installed_from()
    on_pythonpath = ROOT in [Path(p).resolve() for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if where != ROOT and not on_pythonpath:
        pytest.exit(f"this venv ({sys.prefix}) has the project installed from {where or 'nowhere'}, not from "
                    f"{ROOT}: run scripts/venv.sh (make venv) for this tree's own .venv", returncode=4)


def pytest_configure(config):
    config.addinivalue_line("markers", "timeout(seconds): this test's limit instead of the default "
                                       f"({DEFAULT_TIMEOUT} s)")
    global _run_stderr
    _run_stderr = os.dup(2)  # capture is suspended while pytest configures


def limit_of(item):
    marker = item.get_closest_marker("timeout")
    return int(marker.args[0]) if marker else DEFAULT_TIMEOUT


def backstop_after(seconds):
    """When the hard backstop ends the process, for a limit of `seconds`: past the limit, time for
    the test's failure and clean-up to run (the limit again, at most BACKSTOP_MARGIN_MAX)."""
    return seconds + min(seconds, BACKSTOP_MARGIN_MAX)


def every_threads_stack():
    names = {t.ident: t.name for t in threading.enumerate()}
    return "".join(f"\nThread {names.get(ident, ident)} (most recent call last):\n"
                   + "".join(traceback.format_stack(frame)) for ident, frame in sys._current_frames().items())


@contextmanager
def time_limit(item, phase):
    """The test's limit over one phase (setup, call, teardown: a module or session fixture starts
    and stops in the first and last test's). SIGALRM fails the test by name; a hang SIGALRM cannot
    interrupt (a C or C++ call that never returns to Python: Caffe runs in the test process in
    several files) meets the backstop, faulthandler's watchdog, a thread in C: it writes every
    thread's stack and ends the whole process with exit status 1."""
    seconds = limit_of(item)

    def expired(signum, frame):
        sys.stderr.write(every_threads_stack())
        raise TestTimeout(f"{item.nodeid} ran past its {seconds} s limit in its {phase} "
                          "(every thread's stack in its captured stderr)")
    previous = signal.signal(signal.SIGALRM, expired)
    faulthandler.dump_traceback_later(backstop_after(seconds), exit=True, file=_run_stderr)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        faulthandler.cancel_dump_traceback_later()
        signal.signal(signal.SIGALRM, previous)


# The backstop's stacks name the hung test by its frames (file, line, function): no line per test.
@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    with time_limit(item, "setup"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    with time_limit(item, "call"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    with time_limit(item, "teardown"):
        return (yield)


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


def line_within(p, awaited, deadline):
    """The next line of child `p`'s stdout ('' once it closed it), read by `deadline` (on
    time.monotonic()). A child that prints none by then is killed and the test fails, saying
    what it awaited, with the end of the child's stderr. A reader thread waits, so nothing in
    the test blocks past the deadline."""
    got = []
    reader = threading.Thread(target=lambda: got.append(p.stdout.readline()), daemon=True)
    reader.start()
    reader.join(max(0.0, deadline - time.monotonic()))
    if got:
        return got[0]
    given_up(p, f"no line by the deadline: {awaited}")


def given_up(p, awaited):
    """Kill child `p` and fail the test: `awaited` (what the test waited for), its pid and the end
    of its stderr, read after the kill so a child that was still running shows its log."""
    p.kill()
    pytest.fail(f"{awaited} (pid {p.pid}, now killed); its stderr ended:\n{stderr_tail(p)}")


def ended_within(p, awaited, seconds, stdin=None):
    """communicate(): child `p`'s (stdout, stderr) once it ended, `stdin` written to it first,
    within `seconds`. Past them it is killed and the test fails as in given_up. communicate()
    keeps what it read before its timeout, so the stderr is read by communicate() again."""
    try:
        return p.communicate(stdin, timeout=seconds)
    except subprocess.TimeoutExpired:
        p.kill()
    try:
        err = p.communicate(timeout=10)[1]
    except subprocess.TimeoutExpired:  # a grandchild holds the pipe
        err = "(still open 10 s after the kill)"
    err = "(not captured)" if err is None else err[-3000:]
    pytest.fail(f"{awaited} within {seconds} s (pid {p.pid}, now killed); its stderr ended:\n{err}")


def stderr_tail(p, seconds=10):
    """The last 3000 characters of the ended child `p`'s stderr, waited for at most `seconds`."""
    if p.stderr is None:
        return "(not captured)"
    got = []
    reader = threading.Thread(target=lambda: got.append(p.stderr.read()), daemon=True)
    reader.start()
    reader.join(seconds)
    return got[0][-3000:] if got else f"(still open after {seconds} s)"


def run(cmd, **kw):
    """Run a command, failing the test with its output when it fails."""
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        pytest.fail(f"{' '.join(map(str, cmd))} exited {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p
