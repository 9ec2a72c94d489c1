"""Several hosts on one machine: network namespaces, each with an address of its own, joined
by veth pairs to a bridge, so that servers (a Redis Cluster) and clients (solvers) talk over a
network of their own instead of loopback, as they would from different machines.

  with hosts.Hosts(clients=2, servers=1) as net:
      server = net.start("server-0", ["redis-server", ...])     # a process inside that host
      net.address("server-0")                                    # "10.213.0.1"
      net.command("client-1", ["python3", "train.py"])           # argv that runs there

Everything is made inside namespaces this project creates (the bridge too, in a "switch"
namespace), named imgstore-PID-..., so nothing of the machine's own network changes and the
addresses are reachable from these hosts only. Leaving the `with` stops the processes started
there and removes the namespaces; a start first removes what an owner that died left (its
processes too: `ip netns pids`), so a SIGKILLed run leaves nothing behind for long. Only
namespaces provably abandoned by this project are removed: their creator wrote a marker
(MARKERS/NAME: the namespace, its owner's pid and start time, its pid namespace) before making
them, and that owner no longer runs. A namespace of this name without such a marker (a
container's sharing /run/netns, one made from another pid namespace) is left, and said so once.
Needs root.
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from processes import process_id
from experiments import training

PREFIX = "imgstore-"
SUBNET = "10.213.0"   # /24 inside the switch namespace: servers .1 up, clients .101 up
BRIDGE = "br0"
MARKERS = Path("/run/imgstore-hosts")  # tmpfs, as /run/netns: gone with the namespaces at a reboot


def _ip(*args, check=True):
    p = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise HostsError(f"ip {' '.join(args)}: {p.stderr.strip()}")
    return p.stdout


class HostsError(RuntimeError):
    pass


def namespaces():
    """The names of this project's namespaces on the machine (any owner's)."""
    return [line.split()[0] for line in _ip("netns", "list").splitlines() if line.startswith(PREFIX)]


def missing(names):
    """Those of these namespace names (any owner's) that do not exist on the machine."""
    present = {line.split()[0] for line in _ip("netns", "list").splitlines() if line.strip()}
    return [n for n in names if n not in present]


def command_in(namespace, argv):
    """argv run inside a network namespace (`ip netns exec` execs it: the same process)."""
    return ["ip", "netns", "exec", namespace, *argv]


def _owner(name):
    try:
        return int(name[len(PREFIX):].split("-")[0])
    except ValueError:
        return None


def _pid_namespace():
    return os.readlink("/proc/self/ns/pid")


def _markers():
    """MARKERS, made if missing; refused unless it is a folder of this user's that no one else
    can write to (its files vouch for namespaces that remove_abandoned removes)."""
    MARKERS.mkdir(mode=0o700, exist_ok=True)
    st = MARKERS.lstat()
    if not MARKERS.is_dir() or MARKERS.is_symlink() or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise HostsError(f"{MARKERS} is not a folder of uid {os.getuid()}'s that only it can write to: "
                         "remove it (namespaces are marked as this project's there)")
    return MARKERS


def _mark(name, owner=None):
    """Notes, before the namespace `name` is made, that `owner` ([pid, start]; default this
    process) makes it and stops it."""
    marker = _markers() / name
    tmp = marker.with_name(f".{name}.partial")
    tmp.write_text(json.dumps({"namespace": name, "owner": owner or process_id(os.getpid()),
                               "pid_namespace": _pid_namespace()}) + "\n")
    tmp.replace(marker)


def _marker(name):
    """What the marker of namespace `name` says ({"namespace", "owner", "pid_namespace"}), or
    None without one of this user's."""
    path = MARKERS / name
    try:
        st = path.lstat()
        if not path.is_file() or path.is_symlink() or st.st_uid != os.getuid() or MARKERS.lstat().st_uid != os.getuid():
            return None
        marker = json.loads(path.read_text())
        pid, started = marker["owner"]
        whole = marker["namespace"] == name and isinstance(marker["pid_namespace"], str)
        return marker if whole and isinstance(pid, int) and isinstance(started, int) else None
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return None


def _why_not_abandoned(name):
    """None when namespace `name` is provably abandoned by this project (its marker's owner no
    longer runs); else why it stays, in words."""
    marker = _marker(name)
    if marker is None:
        return f"no marker of this project's says who made it ({MARKERS / name})"
    if marker["pid_namespace"] != _pid_namespace():
        return f"it was made from another pid namespace ({marker['pid_namespace']}), whose processes are not seen here"
    if marker["owner"] == process_id(marker["owner"][0]):
        return ""  # its owner runs: in use, nothing to say
    return None


_said = set()  # namespaces left, said once


def remove(name):
    """Stops every process inside the namespace, then deletes it (with its links) and its marker."""
    try:
        inside = f"net:[{os.stat(f'/run/netns/{name}').st_ino}]"
    except OSError:
        inside = None  # no namespace of that name: nothing in it to stop
    for pid in _ip("netns", "pids", name, check=False).split() if inside else []:
        if pid.isdigit():
            _kill_if_inside(int(pid), inside)
    _ip("netns", "del", name, check=False)
    if _marker(name) is not None:
        (MARKERS / name).unlink(missing_ok=True)


def _kill_if_inside(pid, inside):
    """SIGKILLs process `pid` if it is in network namespace `inside` ("net:[INODE]") now: the pid
    `ip netns pids` listed may have exited and its number gone to another process since. A pidfd
    holds the process found, so the one checked is the one signalled."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        if os.readlink(f"/proc/{pid}/ns/net") == inside:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
    except (ProcessLookupError, FileNotFoundError):
        pass  # it exited meanwhile
    finally:
        os.close(fd)


def remove_abandoned():
    """Removes this project's namespaces whose owner no longer runs (a marker says whose they
    are); returns their names. Those it cannot prove abandoned are left, said once on stderr."""
    gone, present = [], namespaces()
    for name in present:
        why = _why_not_abandoned(name)
        if why is None:
            remove(name)
            gone.append(name)
        elif why and name not in _said:
            _said.add(name)
            print(f"left network namespace {name}: {why}", file=sys.stderr)
    for marker in MARKERS.glob(f"{PREFIX}*") if MARKERS.is_dir() else []:  # of a namespace gone since
        if marker.name not in present and _why_not_abandoned(marker.name) is None:
            marker.unlink(missing_ok=True)
    return gone


class Hosts:
    """`servers` + `clients` namespaces on one bridge; names server-0.., client-0.."""

    def __init__(self, clients=1, servers=1):
        if not 0 < servers <= 100 or not 0 <= clients <= 100:
            raise HostsError(f"1-100 servers and 0-100 clients, not {servers} and {clients}")
        self.names = [f"server-{i}" for i in range(servers)] + [f"client-{i}" for i in range(clients)]
        self.tag = f"{PREFIX}{os.getpid()}-{int(time.time() * 1000) % 100000}"
        self.switch = f"{self.tag}-switch"
        self.processes = []
        self.made = []

    def namespace(self, host):
        if host not in self.names:
            raise HostsError(f"no host {host!r}: {', '.join(self.names)}")
        return f"{self.tag}-{host}"

    def address(self, host):
        kind, index = host.split("-")
        self.namespace(host)
        return f"{SUBNET}.{(1 if kind == 'server' else 101) + int(index)}"

    def command(self, host, argv):
        """argv run inside `host`'s namespace."""
        return command_in(self.namespace(host), argv)

    def start(self, host, argv, **popen):
        """A process inside `host`, stopped on leaving (and killed with this process)."""
        p = subprocess.Popen(self.command(host, argv), preexec_fn=training.child_setup(), **popen)
        self.processes.append(p)
        return p

    def __enter__(self):
        remove_abandoned()
        try:
            self._add(self.switch)
            _ip("-n", self.switch, "link", "add", BRIDGE, "type", "bridge")
            _ip("-n", self.switch, "link", "set", BRIDGE, "up")
            for i, host in enumerate(self.names):
                ns = self._add(self.namespace(host))
                port = f"p{i}"
                _ip("-n", self.switch, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
                _ip("-n", self.switch, "link", "set", port, "master", BRIDGE, "up")
                _ip("-n", ns, "addr", "add", f"{self.address(host)}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
        except BaseException:
            self.__exit__()
            raise
        return self

    def _add(self, name):
        _mark(name)
        try:
            _ip("netns", "add", name)
        except HostsError:
            (MARKERS / name).unlink(missing_ok=True)
            raise
        self.made.append(name)
        _ip("-n", name, "link", "set", "lo", "up")
        return name

    def __exit__(self, *_):
        for p in self.processes:
            if p.poll() is None:
                p.kill()
            p.wait()
        for name in reversed(self.made):
            remove(name)
        self.made = []
