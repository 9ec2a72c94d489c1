"""experiments/hosts.py: hosts in network namespaces reach each other over their bridge at their
own addresses (which the machine's own namespace does not have), and nothing they were made of is left: not on leaving, and not
after their owner is killed with SIGKILL."""
import subprocess
import sys

import pytest

from conftest import ROOT
from experiments import hosts

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
        assert echo.stdout.readline().strip() == "listening"
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
    owner = subprocess.Popen([sys.executable, "-c", f"""
import sys, os, signal, subprocess
sys.path.insert(0, {str(ROOT)!r})
from experiments import hosts
net = hosts.Hosts(clients=1, servers=1).__enter__()
net.start("server-0", ["sleep", "600"])
print(" ".join(net.made), flush=True)
sys.stdin.readline()
"""], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    made = owner.stdout.readline().split()
    assert len(made) == 3 and set(made) <= set(hosts.namespaces())
    owner.kill()
    owner.wait()
    assert set(made) <= set(hosts.namespaces())  # left behind by the SIGKILL
    removed = hosts.remove_abandoned()
    assert set(made) <= set(removed) and not set(made) & set(hosts.namespaces())
    left = subprocess.run(["pgrep", "-f", "sleep 600"], capture_output=True, text=True).stdout.split()
    assert not left  # the process inside died with its owner (and would have been killed with the namespace)


def test_an_unknown_host_is_named():
    net = hosts.Hosts(clients=1, servers=1)
    with pytest.raises(hosts.HostsError, match="no host 'client-3': server-0, client-0"):
        net.address("client-3")
