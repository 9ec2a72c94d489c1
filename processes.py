"""The project's own child processes: started to die with their starter, and told apart from
whatever later takes their number. The one module that knows /proc's start times and the
death signal; everything that starts, records or stops a process asks here."""
import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: a forked child must not load anything


def child_setup(group=None, death_signal=signal.SIGKILL):
    """A preexec_fn: the child gets `death_signal` when the thread that started it exits (so a
    run.py killed with SIGKILL leaves nothing running), then enters `group` (a cgroup)."""
    parent = os.getpid()

    def setup():
        dies_with(parent, death_signal)
        if group:
            group.enter()
    return setup


def dies_with(parent, death_signal=signal.SIGKILL):
    """In a forked child (a pool's initializer: initializer=dies_with, initargs=(os.getpid(),)):
    `death_signal` comes when the thread that forked it exits; a child whose parent `parent`
    already died exits now. A ProcessPoolExecutor with the fork context forks every worker from
    the thread of its first submit, so that thread must outlive the pool (it does where one
    thread makes, uses and shuts the pool down)."""
    _prctl(PR_SET_PDEATHSIG, death_signal)
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)


def started(pid):
    """When process `pid` started, in clock ticks after boot (/proc/PID/stat): with the pid it
    names one process for the machine's uptime, whatever the wall clock does meanwhile."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def process_id(pid):
    """[pid, start time] of a live process, or None: the same pair later means the same process."""
    try:
        return [pid, started(pid)]
    except (OSError, ValueError, IndexError):
        return None
