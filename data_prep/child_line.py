"""A child process's first line on its stdout pipe, waited for with a limit: a child that hangs
before it says "ready" (a delay proxy, a reading net) must not hang its parent."""
import os
import select
import time


def first_line(proc, seconds):
    """The first line `proc` writes to its stdout pipe, without its newline ('' once the pipe
    closed before one came), or None where none came within `seconds`. Read a byte at a time
    from the pipe itself, so that the pipe's buffered reader, used after, has lost nothing."""
    fd, got, deadline = proc.stdout.fileno(), b"", time.monotonic() + seconds
    while not got.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        byte = os.read(fd, 1)
        if not byte:
            break
        got += byte
    return got.decode(errors="replace").rstrip("\r\n")
