"""What the training process itself did, beside the machine-wide monitor: the bytes it and
its children read (/proc/PID/io, read at exit before it is reaped, so nothing is missed),
its CPU seconds (and, sampled, when it used them: the CPU of a window such as training's), its
peak resident memory (sampled), and each thread's CPU by role (Caffe's data-prefetch threads are named
"caffe-prefetch" by caffe/patches/0009, lmdb_read COALESCED's walker "lmdb-read-ahead" and its read helper "lmdb-pread" by 0012, SHARED's ring writer "lmdb-shared" by 0013, all counted as LMDB read-ahead;
the Redis reader's I/O thread "redis-io" by 0011, ImageData's decoding threads "caffe-decode"
by 0015, the Data layer's transform threads "caffe-transform" by 0016; the main thread is the solver)."""
import os
import threading
import time

# the roles of thread_cpu_seconds, as records keep them (the report and benchmarks read these)
SOLVER, PREFETCH, READ_AHEAD, REDIS_IO, DECODE, TRANSFORM, OTHER = (
    "solver (main thread)", "data prefetch", "LMDB read-ahead", "Redis I/O", "image decode", "record transform",
    "other threads")
# the process's CPU that no sample saw: threads that ended between two samples (in older
# builds, lmdb_read COALESCED's helper for each large read, ~1 ms) and every thread's last interval
UNSAMPLED = "not sampled"
# the threads that read or transform records for the prefetch thread (data path CPU = prefetch + these)
READERS = (READ_AHEAD, REDIS_IO, DECODE, TRANSFORM)


def roles(threads, pid):
    """{role: CPU seconds} of threads {tid: (name, seconds)} (thread_cpu's) of process `pid`."""
    out = {}
    for tid, (name, seconds) in threads.items():
        role = (SOLVER if tid == pid else PREFETCH if name == "caffe-prefetch" else
                READ_AHEAD if name.startswith("lmdb-") else REDIS_IO if name == "redis-io" else
                DECODE if name == "caffe-decode" else TRANSFORM if name == "caffe-transform" else OTHER)
        out[role] = round(out.get(role, 0.0) + seconds, 3)
    return out


def readers_cpu(by_role):
    """CPU seconds of the threads reading for the prefetch thread, from a roles() dict."""
    return sum(by_role.get(role, 0) for role in READERS)

TICK = os.sysconf("SC_CLK_TCK")


def _stat_fields(text):
    """Fields after the ')' that ends the command name in /proc/.../stat."""
    return text[text.rindex(")") + 2:].split()


def process_cpu(pid):
    """The process's CPU seconds so far (utime + stime, and its reaped children's: cutime, cstime),
    None once gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return sum(int(x) for x in _stat_fields(f.read())[11:15]) / TICK
    except OSError:
        return None


def cpu_between(timeline, start, end):
    """The CPU seconds a process used from `start` to `end` (time.time() values), from its
    timeline [(time, CPU seconds so far)], interpolated between samples; None where the timeline
    began after `start`. A Tracker's timeline ends at the process's exit: nothing is used after it."""
    if len(timeline) < 2 or not timeline[0][0] <= start <= end:
        return None
    return _cpu_at(timeline, end) - _cpu_at(timeline, start)


def _cpu_at(timeline, t):
    for (t0, c0), (t1, c1) in zip(timeline, timeline[1:]):
        if t0 <= t <= t1:
            return c0 if t1 == t0 else c0 + (c1 - c0) * (t - t0) / (t1 - t0)
    return timeline[-1][1]


def thread_cpu(pid):
    """{tid: (name, cpu seconds)} of the process's live threads."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                text = f.read()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        f = _stat_fields(text)
        out[int(tid)] = (name, (int(f[11]) + int(f[12])) / TICK)
    return out


def resident_bytes(pid):
    """The process's resident memory now, (all, anonymous), 0 once it has exited. Anonymous
    memory is what a memory limit cannot give to the page cache; the rest of RSS is mapped
    files, which are the page cache."""
    found = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "RssAnon:")):
                    found[line.split(":")[0]] = int(line.split()[1]) * 1024
    except OSError:
        pass
    return found.get("VmRSS", 0), found.get("RssAnon", 0)


class Tracker:
    """Watches a child process. A thread blocks until it exits and stamps that moment (a
    polling loop would round the run's wall time to its period); the child is left unreaped (a
    zombie) so that its counters, its reaped children's included, can still be read."""

    def __init__(self, pid):
        self.pid, self.threads, self.ended_at = pid, {}, None
        self.peak_rss = self.peak_anon = 0
        self.cpu_timeline = []  # (time, the process's CPU seconds so far) per sample, and at its exit
        self._exited = threading.Event()
        threading.Thread(target=self._wait, daemon=True).start()

    def _wait(self):
        try:
            os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:  # reaped by a kill on Ctrl-C while this waited
            pass
        self.ended_at = time.time()
        self._exited.set()

    def sample(self):
        now, cpu = time.time(), process_cpu(self.pid)
        if cpu is not None:
            self.cpu_timeline.append((now, cpu))
        self.threads.update(thread_cpu(self.pid))
        rss, anon = resident_bytes(self.pid)
        self.peak_rss, self.peak_anon = max(self.peak_rss, rss), max(self.peak_anon, anon)

    def read_bytes(self):
        """What the process (and its reaped children) read from storage so far, or None."""
        try:
            for line in open(f"/proc/{self.pid}/io"):
                if line.startswith("read_bytes:"):
                    return int(line.split()[1])
        except OSError:
            pass
        return None

    def wait(self, timeout):
        """True once the process has exited; otherwise waits up to `timeout` seconds."""
        return self._exited.wait(timeout)

    def summary(self):
        """Read once the process has exited, before it is reaped."""
        io = {}
        try:
            for line in open(f"/proc/{self.pid}/io"):
                k, v = line.split(":")
                io[k] = int(v)
        except OSError:
            return {}
        cpu = process_cpu(self.pid)
        if cpu is None:
            return {}
        if self.ended_at is not None:  # a sample of the exited process (a zombie) may stamp a later time
            self.cpu_timeline = [p for p in self.cpu_timeline if p[0] < self.ended_at] + [(self.ended_at, cpu)]
        by_role = roles(self.threads, self.pid)
        unsampled = cpu - sum(by_role.values())
        if unsampled >= 0.01:
            by_role[UNSAMPLED] = round(unsampled, 3)
        return {"read_bytes": io.get("read_bytes"), "read_chars": io.get("rchar"),
                "cpu_seconds": round(cpu, 3), "thread_cpu_seconds": by_role,
                "threads_seen": len(self.threads), "peak_rss_bytes": self.peak_rss or None,
                "peak_anon_bytes": self.peak_anon or None}
