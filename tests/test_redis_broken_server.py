"""Caffe's Redis reader (caffe/patches/0011) against a server that answers as no Redis would: a
small RESP server on loopback, in a thread of the test, answers the reader's set-up as a
one-node server does, then a value of an absurd length, or a CLUSTER SLOTS reply with a string
where a slot number belongs. The net, built in a process of its own, stops with an error naming
the node and what was wrong: glog's fatal error (its F line, then abort), never a segmentation
fault, an allocation the size the server announced, or a wait for bytes that never come."""
import signal
import socket
import threading

import pytest

from conftest import ended_within, net_process

PREFIX = "fake:test"
NOT_A_CLUSTER = b"-ERR This instance has cluster support disabled\r\n"
ABSURD_LENGTH = 99999999999  # bytes: ~93 GiB, over Redis's proto-max-bulk-len (512 MiB)
LONGEST = 2 ** 63 - 1  # the largest the length parses to: LEN + 2 overflows
NET = """name: "broken-server"
layer {{ name: "data" type: "Data" top: "data" top: "label"
  data_param {{ source: "redis://127.0.0.1:{port}/{prefix}" batch_size: 2 backend: REDIS }} }}
"""


def bulk(text):
    data = text.encode() if isinstance(text, str) else text
    return b"$%d\r\n%s\r\n" % (len(data), data)


def commands(conn):
    """Each command (a list of bytes) the client sends as RESP arrays of bulk strings."""
    buffer = b""

    def line():
        nonlocal buffer
        while b"\r\n" not in buffer:
            chunk = conn.recv(65536)
            if not chunk:
                raise EOFError
            buffer += chunk
        head, _, buffer = buffer.partition(b"\r\n")
        return head

    def exactly(n):
        nonlocal buffer
        while len(buffer) < n + 2:
            chunk = conn.recv(65536)
            if not chunk:
                raise EOFError
            buffer += chunk
        data, buffer = buffer[:n], buffer[n + 2:]
        return data
    while True:
        head = line()
        assert head.startswith(b"*"), head
        yield [exactly(int(line()[1:])) for _ in range(int(head[1:]))]


class BrokenServer:
    """A RESP server on a loopback port: `slots` is its CLUSTER SLOTS reply; a data set of two
    records under PREFIX whose values it answers with `value` (bytes as sent)."""

    def __init__(self, slots, value):
        self.slots, self.value, self.seen = slots, value, []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.connections = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _answer(self, args):
        name = args[0].upper()
        if name == b"CLUSTER":
            return self.slots(self.port)
        if name == b"PING":
            return b"+PONG\r\n"
        if name == b"GET" and args[1] == f"{PREFIX}:~complete".encode():
            return bulk("2 fingerprint")
        if name == b"LLEN":
            return b":2\r\n"
        if name == b"LRANGE":
            return b"*2\r\n" + bulk("00000000") + bulk("00000001")
        if name == b"GET":
            return self.value
        return b"-ERR unknown command '%s'\r\n" % name

    def _serve(self, conn):
        try:
            for args in commands(conn):
                self.seen.append(args[0])
                conn.sendall(self._answer(args))
        except (EOFError, OSError):
            pass

    def close(self):
        self.sock.close()
        for conn in self.connections:
            conn.close()


def net_against(tmp_path, server):
    net = tmp_path / "net.prototxt"
    net.write_text(NET.format(port=server.port, prefix=PREFIX))
    # no password: the reader sends no AUTH; no user either
    return net_process(net, IMGSTORE_REDIS_PASSWORD="", IMGSTORE_REDIS_USER="")


def stopped_with(p, message):
    """The net's process ended by glog's fatal error with `message` on its F line."""
    out, err = ended_within(p, "the net's process to stop", 120)
    fatal = [line for line in err.splitlines() if line.startswith("F")]
    assert p.returncode == -signal.SIGABRT and fatal and message in fatal[0], err[-3000:]
    assert "SIGSEGV" not in err and "bad_alloc" not in err and "ready" not in out
    return fatal[0]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("length", [ABSURD_LENGTH, LONGEST])
def test_a_value_of_an_absurd_length_is_refused_naming_the_node(tmp_path, length):
    server = BrokenServer(lambda port: NOT_A_CLUSTER, b"$%d\r\n" % length)
    try:
        line = stopped_with(net_against(tmp_path, server),
                            f"Redis node 127.0.0.1:{server.port}: a value of {length} bytes announced, over "
                            f"the limit of {512 << 20}")
        assert "proto-max-bulk-len" in line
    finally:
        server.close()


@pytest.mark.timeout(300)
def test_an_unreadable_value_length_is_refused_naming_the_node(tmp_path):
    server = BrokenServer(lambda port: NOT_A_CLUSTER, b"$12ab\r\n")
    try:
        stopped_with(net_against(tmp_path, server),
                     f"Redis node 127.0.0.1:{server.port}: unreadable reply (a value's length '12ab')")
    finally:
        server.close()


def slots_with_a_string_for_the_last_slot(port):
    return (b"*1\r\n*3\r\n:0\r\n" + bulk("16383") + b"*2\r\n" + bulk("127.0.0.1") + b":%d\r\n" % port)


@pytest.mark.timeout(300)
def test_a_slot_map_with_a_string_for_a_slot_number_is_refused_naming_the_node(tmp_path):
    server = BrokenServer(slots_with_a_string_for_the_last_slot, bulk("never asked"))
    try:
        stopped_with(net_against(tmp_path, server),
                     f"Redis node 127.0.0.1:{server.port}: unexpected CLUSTER SLOTS reply (range 0 is not")
    finally:
        server.close()
