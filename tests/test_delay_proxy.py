"""The delay proxy (data_prep/delay_proxy.c) under the faults a long training run meets: a peer
that resets, a destination that stops reading, no file descriptors left. Real sockets, the
compiled proxy, CPU read from /proc."""
import os
import resource
import socket
import struct
import subprocess
import threading
import time

import psutil
import pytest

from conftest import line_within

WAIT_S = 30  # the most the proxy's 'ready' or end is waited for


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Target:
    """A TCP server on loopback: accepts, and reads everything (or nothing) from each client."""

    def __init__(self, read=True):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port, self.read, self.conns = self.sock.getsockname()[1], read, []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            if self.read:
                threading.Thread(target=self._drain, args=(conn,), daemon=True).start()

    @staticmethod
    def _drain(conn):
        try:
            while conn.recv(1 << 16):
                pass
            conn.close()  # as a server does when its client has gone
        except OSError:
            pass

    def close(self):
        for c in self.conns + [self.sock]:
            c.close()


@pytest.fixture
def proxy():
    import toolchain
    started = []

    def start(delay_ms, target_port, nofile=None):
        port = free_port()
        limit = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))) if nofile else None
        p = subprocess.Popen([str(toolchain.delay_proxy()), str(delay_ms), f"{port}:{target_port}"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=limit)
        started.append(p)
        ready = line_within(p, f"'ready' from the delay proxy on port {port}", time.monotonic() + WAIT_S)
        assert ready.strip() == "ready", ready
        return p, port
    yield start
    for p in started:
        p.kill()
        p.wait(timeout=WAIT_S)


def cpu_seconds(p):
    t = psutil.Process(p.pid).cpu_times()
    return t.user + t.system


def test_a_peer_that_reset_is_not_polled_while_its_bytes_wait(proxy):
    """The old proxy polled a reset socket again and again until the queued bytes fell due:
    one core busy for the whole delay."""
    target = Target()
    p, port = proxy(1500, target.port)
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(b"x" * 1000)
    time.sleep(0.1)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()  # a reset, with 1,000 bytes still queued in the proxy for 1.5 s
    before = cpu_seconds(p)
    time.sleep(1.2)
    assert cpu_seconds(p) - before < 0.2
    target.close()


def test_no_descriptors_left_is_said_once_and_retried_without_spinning(proxy):
    target = Target()
    p, port = proxy(0, target.port, nofile=6)  # 0-2, the listening socket, one connection's two
    first = socket.create_connection(("127.0.0.1", port))
    first.sendall(b"ping")
    second = socket.create_connection(("127.0.0.1", port))  # waits in the backlog: accept fails
    time.sleep(0.3)
    before = cpu_seconds(p)
    time.sleep(1.0)
    assert cpu_seconds(p) - before < 0.2
    first.close()  # descriptors free again: the waiting connection is relayed
    second.sendall(b"hello")
    deadline = time.monotonic() + 5
    while len(target.conns) < 2:
        assert time.monotonic() < deadline, "the connection waiting in the backlog was never relayed"
        time.sleep(0.05)
    p.kill()
    _, err = p.communicate(timeout=WAIT_S)
    # once per spell without descriptors (Linux's accept takes the descriptor before it waits, so
    # a full table fails it at once, with or without a connection waiting): 2 here, not hundreds
    assert 1 <= err.count("accept on a listening port failed: Too many open files") <= 2, err
    second.close()
    target.close()


def test_a_destination_that_does_not_read_does_not_stop_the_reading(proxy):
    """Writes that would block wait in poll: the proxy keeps taking the sender's bytes (up to its
    64 MiB queue) instead of stalling in write(); the destination closing is seen at once."""
    target = Target(read=False)
    p, port = proxy(0, target.port)
    c = socket.create_connection(("127.0.0.1", port))
    c.setblocking(False)
    sent, block, deadline = 0, b"y" * (1 << 20), time.monotonic() + 10
    while sent < 40 << 20 and time.monotonic() < deadline:
        try:
            sent += c.send(block)
        except BlockingIOError:
            time.sleep(0.01)
    assert sent >= 40 << 20, f"the proxy stopped reading after {sent >> 20} MiB"
    for conn in target.conns:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()
    c.setblocking(True)
    c.settimeout(5)  # the proxy closes the sender's side soon: b"" or a reset, not a timeout
    try:
        assert c.recv(1) == b""
    except ConnectionResetError:
        pass
    target.close()


class Echo(Target):
    """A target that sends back what it reads, noting when each read came."""

    def __init__(self):
        self.arrivals = []
        super().__init__()

    def _drain(self, conn):
        while True:
            data = conn.recv(1 << 16)
            if not data:
                return conn.close()
            self.arrivals.append(time.monotonic())
            conn.sendall(data)


@pytest.mark.parametrize("spec, requests_ms", [("150", 150), ("300/0", 300), ("0/300", 0)])
def test_the_round_trip_is_the_same_wherever_the_delay_sits(proxy, spec, requests_ms):
    """REQUESTS_MS[/REPLIES_MS]: the client's round trip is their sum (300 ms each time here);
    the server sees a request after REQUESTS_MS."""
    target = Echo()
    p, port = proxy(spec, target.port)
    c = socket.create_connection(("127.0.0.1", port), timeout=5)  # its reply waited for at most 5 s
    sent = time.monotonic()
    c.sendall(b"ping")
    assert c.recv(16) == b"ping"
    round_trip, arrived = time.monotonic() - sent, target.arrivals[0] - sent
    assert 0.29 < round_trip < 0.45
    assert requests_ms / 1000 - 0.01 < arrived < requests_ms / 1000 + 0.1
    c.close()
    target.close()


@pytest.mark.parametrize("spec", ["10/", "/10", "x", "10/x", "-1", "10/-1"])
def test_delays_that_are_not_numbers_are_refused_naming_them(spec):
    import toolchain
    p = subprocess.run([str(toolchain.delay_proxy()), spec, "1:2"], capture_output=True, text=True, timeout=10)
    assert p.returncode == 2 and f"not '{spec}'" in p.stderr


def test_the_proxy_is_rebuilt_when_its_source_digest_differs_whatever_the_times(tmp_path, monkeypatch):
    """Records name the proxy by its source's digest: a binary compiled from other source is
    rebuilt even when it is newer than the source file (a checkout, a copy), and kept otherwise."""
    import toolchain
    binary, stamp = tmp_path / "delay_proxy", tmp_path / "delay_proxy.source"
    monkeypatch.setattr(toolchain, "BUILD", tmp_path)
    monkeypatch.setattr(toolchain, "DELAY_PROXY", binary)
    monkeypatch.setattr(toolchain, "DELAY_PROXY_BUILT_FROM", stamp)
    binary.write_bytes(b"#!/bin/sh\necho an older proxy\n")
    stamp.write_text("0123456789abcdef\n")  # compiled from another source
    future = time.time() + 3600  # a file time: the wall clock
    os.utime(binary, (future, future))
    assert toolchain.delay_proxy() == binary
    assert b"an older proxy" not in binary.read_bytes() and stamp.read_text().strip() == toolchain.delay_proxy_source()
    built = binary.stat().st_mtime_ns
    assert toolchain.delay_proxy() == binary and binary.stat().st_mtime_ns == built  # the same source: kept


def test_the_report_shows_a_dash_where_the_cell_against_measured_no_cpu(capsys):
    """A short run's cell without the proxy can measure 0 us of the proxy's CPU: its ratio is '-',
    not a ZeroDivisionError before the JSON is written."""
    import argparse
    from benchmarks import delay_proxy
    cells = {"mnist/against": [{"proxy_us": 0.0, "images_per_s": 1000.0}],
             "mnist/proxy": [{"proxy_us": 12.0, "images_per_s": 800.0}]}
    delay_proxy.report(cells, argparse.Namespace(rtt=1.0, depth=4, rounds=1))
    out = capsys.readouterr().out
    proxy_line = next(line for line in out.splitlines() if line.startswith("mnist/proxy"))
    assert proxy_line.split()[-3:] == ["-", "800", "0.80x"]
