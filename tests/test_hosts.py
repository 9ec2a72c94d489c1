"""experiments/hosts.py: hosts in network namespaces reach each other over their bridge at their
own addresses (which the machine's own namespace does not have), and nothing they were made of is left: not on leaving, and not
after their owner is killed with SIGKILL."""
import os
import subprocess
import sys
import time

import psutil
import pytest

from conftest import line_within
from experiments import hosts

WAIT_S = 60  # the most a child's first line is waited for

ECHO_SERVER = """
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 7777))
s.listen()
print("listening", flush=True)
while True:
    c, _ = s.accept()
    c.sendall(c.recv(64).upper())
    c.close()
"""

CLIENT = """
import socket, sys
c = socket.create_connection((sys.argv[1], 7777), timeout=3)
c.sendall(sys.argv[2].encode())
print(c.recv(64).decode())
"""


def ask(net, host, server, word):
    p = subprocess.run(net.command(host, [sys.executable, "-c", CLIENT, server, word]), capture_output=True,
                       text=True, timeout=30)
    return p.stdout.strip() or p.stderr.strip().splitlines()[-1]


def test_clients_reach_the_server_at_its_address_inside_their_own_network():
    with hosts.Hosts(clients=2, servers=1) as net:
        server = net.address("server-0")
        echo = net.start("server-0", [sys.executable, "-c", ECHO_SERVER, server], stdout=subprocess.PIPE, text=True)
        said = line_within(echo, f"'listening' from the echo server at {server}", time.monotonic() + WAIT_S)
        assert said.strip() == "listening"
        assert ask(net, "client-0", server, "zero") == "ZERO"
        assert ask(net, "client-1", server, "one") == "ONE"
        assert net.address("client-1") == "10.213.0.102"
        # the machine's own namespace has no address or link of theirs (nothing is sent from it:
        # there, such an address would be routed out of the machine)
        assert hosts.SUBNET not in subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True).stdout
        made = set(net.made)
    assert not made & set(hosts.namespaces())
    assert echo.poll() is not None


def test_a_killed_owner_leaves_nothing_after_the_next_start(tmp_path):
    owner = subprocess.Popen([sys.executable, "-c", """
import sys, os, signal, subprocess
from experiments import hosts
net = hosts.Hosts(clients=1, servers=1).__enter__()
inside = net.start("server-0", ["sleep", "600"])
print(inside.pid, " ".join(net.made), flush=True)
sys.stdin.readline()
"""], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    said = line_within(owner, "the pid and namespaces of a process in hosts it made", time.monotonic() + WAIT_S)
    pid, *made = said.split()
    inside = psutil.Process(int(pid))  # its pid and start time: that process, not a later one of its number
    assert len(made) == 3 and set(made) <= set(hosts.namespaces())
    owner.kill()
    owner.wait(timeout=10)
    assert set(made) <= set(hosts.namespaces())  # left behind by the SIGKILL
    removed = hosts.remove_abandoned()
    assert set(made) <= set(removed) and not set(made) & set(hosts.namespaces())
    assert not [name for name in made if (hosts.MARKERS / name).exists()]
    # the process inside died with its owner (and would have been killed with the namespace)
    assert not inside.is_running() or inside.status() == psutil.STATUS_ZOMBIE


@pytest.fixture
def made_here():
    """Namespaces a test makes by hand (`ip netns add`), deleted after it if still there."""
    names = []
    yield names
    for name in names:
        if name in hosts.namespaces():
            subprocess.run(["ip", "netns", "del", name], check=True)
        (hosts.MARKERS / name).unlink(missing_ok=True)


def exited_pid():
    p = subprocess.Popen(["true"])
    p.wait(timeout=10)
    return p.pid


def add(name, made_here):
    made_here.append(name)
    subprocess.run(["ip", "netns", "add", name], check=True)
    return name


def test_a_namespace_without_this_projects_marker_is_left_and_said_so_once(made_here, capfd):
    """Its owner's pid is not running here: a container's sharing /run/netns, say, or one made
    from another pid namespace; nothing proves it is this project's to remove."""
    foreign = add(f"{hosts.PREFIX}{exited_pid()}-foreign", made_here)
    assert foreign not in hosts.remove_abandoned() and foreign in hosts.namespaces()
    assert capfd.readouterr().err.count(f"left network namespace {foreign}: no marker of this project's "
                                        "says who made it") == 1
    assert foreign not in hosts.remove_abandoned() and foreign in hosts.namespaces()
    assert foreign not in capfd.readouterr().err  # said once


def test_a_namespace_made_from_another_pid_namespace_is_left(made_here, capfd):
    """Its marker's pid means another process there: whether its owner runs cannot be seen here."""
    elsewhere = f"{hosts.PREFIX}{exited_pid()}-elsewhere"
    hosts._mark(elsewhere, owner=[1, 1])
    marker = hosts.MARKERS / elsewhere
    marker.write_text(marker.read_text().replace(hosts._pid_namespace(), "pid:[1]"))
    add(elsewhere, made_here)
    assert elsewhere not in hosts.remove_abandoned() and elsewhere in hosts.namespaces()
    assert f"left network namespace {elsewhere}: it was made from another pid namespace (pid:[1])" in \
        capfd.readouterr().err


def test_a_namespace_whose_marked_owner_no_longer_runs_is_removed(made_here):
    from processes import process_id
    dead = exited_pid()
    stale = f"{hosts.PREFIX}{dead}-stale"
    hosts._mark(stale, owner=[dead, 1])  # what a killed creator leaves: its marker, then the namespace
    add(stale, made_here)
    # alive, but not the creator: its number was the creator's before (the marker's start time is not its own)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        reused = f"{hosts.PREFIX}{bystander.pid}-reused"
        hosts._mark(reused, owner=[bystander.pid, process_id(bystander.pid)[1] - 1])
        add(reused, made_here)
        mine = f"{hosts.PREFIX}{os.getpid()}-mine"  # this process's, in use
        hosts._mark(mine)
        add(mine, made_here)
        removed = hosts.remove_abandoned()
        assert {stale, reused} <= set(removed) and mine not in removed
        there = hosts.namespaces()
        assert mine in there and stale not in there and reused not in there
        assert not (hosts.MARKERS / stale).exists() and not (hosts.MARKERS / reused).exists()
        assert bystander.poll() is None  # not inside the namespace: never signalled
    finally:
        bystander.kill()
        bystander.wait(timeout=10)


def test_an_unknown_host_is_named():
    net = hosts.Hosts(clients=1, servers=1)
    with pytest.raises(hosts.HostsError, match="no host 'client-3': server-0, client-0"):
        net.address("client-3")
