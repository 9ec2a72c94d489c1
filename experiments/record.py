"""One run's record: what the runner appends to RESULTS/DATASET/records.jsonl and what the
report, the matrix and the notebooks read. Records written before a field existed load with
that field None (shown as unknown), so committed results stay readable."""
import json
import sys
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from experiments import proctrack, records_log
from experiments.records_log import RecordsDamaged, RecordsLocked, RecordWriteError  # noqa: F401  (what they raise)


# What a run's label promises, checked on the share of its data resident before the clock
# (mincore): a warm run holds at least WARM_AT_LEAST of it, a cold one at most COLD_AT_MOST.
WARM_AT_LEAST = 0.95
COLD_AT_MOST = 0.05
MISSED = {"warm": "partly warm", "cold": "not cold"}  # the state a run asked, and what it had when it missed
NEEDS = {"warm": f"a warm run needs >= {WARM_AT_LEAST:.0%} of its data resident before the clock",
         "cold": f"a cold run <= {COLD_AT_MOST:.0%}"}


def cache_state(asked, resident, measured=True):
    """The cache state a run had: the one asked (warm | cold) where the residency measured before
    the clock bears it out, else "partly warm" (asked warm, below WARM_AT_LEAST) or "not cold"
    (asked cold, above COLD_AT_MOST). measured=False: data whose residency is not the page
    cache's (records in a server's memory, whose cold is its restart) keeps the state asked."""
    if not measured or resident is None:
        return asked
    if (asked == "warm" and resident < WARM_AT_LEAST) or (asked == "cold" and resident > COLD_AT_MOST):
        return MISSED[asked]
    return asked


@dataclass
class Record:
    run_id: str
    dataset: str
    backend: str
    cache: str                            # warm | cold
    repeat: int = 0
    status: str = None                    # ok | failed
    returncode: int = None
    cache_method: str = None              # read | drop_caches | fadvise
    cache_resident_fraction: float = None  # measured (mincore) just before training
    cache_resident_fraction_after: float = None  # measured again once training ended: lower when pages were
                                                 # evicted during the run (memory limit; environment.proactive_reclaim)
    iterations: int = None                # the last iteration Caffe logged
    iterations_setting: int = None        # max_iter asked for; None: the stock solver's
    iterations_reason: str = None         # why not the stock solver's, when that was chosen for the user
    cold_condition: dict = None           # a cold run: passes over the train data, its bytes, the memory that
                                          # could cache it, and whether only the first pass read the disk
    wall_seconds: float = None            # process start to exit
    startup_seconds: float = None         # process start to the test pass at iteration 0 (or, without
                                          # one, the first logged iteration): libraries, nets, opening the data
    initial_test_seconds: float = None    # that test pass and the first training iteration: it reads the data
    solver_seconds: float = None          # first logged iteration to "Optimization Done"
    test_seconds: float = None            # the test passes inside solver_seconds, from the log's stamps
    test_ms_per_iteration: float = None   # their time per test iteration (measured, not the profile's)
    iterations_per_second: float = None
    test_accuracy: float = None
    test_loss: float = None
    test_iteration: int = None            # the iteration of the test pass the accuracy comes from
    first_loss: float = None
    final_loss: float = None
    compute: dict = None                  # mode: gpu | cpu | emulated; accelerator, ms per iteration, source
    au: float = None                      # accelerator utilisation over the solver's time (MLPerf Storage):
                                          # the accelerator's work in that window (caffe_log.timed_compute) / it
    gpu_id: int = None
    source: str = None                    # the images: real data or which stand-in
    source_fingerprint: str = None
    artifact_footprint: dict = None
    train_footprint: dict = None          # what the paper's Table 2 counts
    location: dict = None                 # where the artifact lived (kind, path, device, filesystem; servers, rtt)
    read_options: dict = None             # DataParameter settings of the reader (redis: prefetch_depth, out_of_order;
                                          # lmdb: lmdb_read)
    shared_rings: list = None             # lmdb_read SHARED: per database, the ring's bytes in shared memory (ring
                                          # + table, counted once for all solvers), the record this solver joined
                                          # at, the records the ring took from the file for all, writer takeovers,
                                          # the records this solver skipped (records_skipped)
    concurrent: dict = None               # one of several solvers at once: group, solvers, member, the group's
                                          # makespan_seconds and device_read_bytes; None: trained alone
    limits: dict = None                   # every limit as applied, and the profile when its values were used
    command: list = None
    monitor: dict = None                  # machine-wide: CPU %, memory, block reads, GPU
    process: dict = None                  # the training process: bytes it read, its CPU, each thread's CPU
    training_cpu_seconds: float = None    # the training process's own CPU in its training window (its first
                                          # logged iteration to solver_seconds later; sampled every ~0.5 s and
                                          # interpolated); None: recorded before it was kept
    plan: dict = None                     # position in the interleaved order of its matrix
    config: dict = None                   # the run's configuration (experiments.config.RunConfig) but its
                                          # data and results roots; None: recorded before runs kept one
    environment: dict = None              # build, machine, kernel
    run_dir: str = None
    finished: str = None
    revised: str = None                   # fields re-derived from the run's own log after it was recorded
    measurement_errors: dict = None       # a measurement taken after training that failed: its field -> the
                                          # error (the run is recorded with what was measured)

    @classmethod
    def from_dict(cls, d):
        known = {f.name for f in fields(cls)}
        r = cls(**{k: v for k, v in d.items() if k in known})
        if r.compute is None and d.get("device"):  # before compute modes: real GPU or CPU
            r.compute = {"mode": d["device"]}
        return r

    def to_dict(self):
        return asdict(self)

    @property
    def ok(self):
        return self.status == "ok"

    @property
    def superseded(self):
        """Kept in the records, counted nowhere (experiments/supersede.py says why in `revised`)."""
        return self.status == "superseded"

    @property
    def mode(self):
        return (self.compute or {}).get("mode")

    def cache_room_bytes(self):
        """What the memory limit left for the page cache: the limit less the training
        process's peak anonymous memory (None without both, or for data held by servers, whose
        memory is not the training's). With several solvers at once and a limit per further
        solver, the group's limit less N times this solver's memory; without one, an upper
        bound (the others' memory is not subtracted)."""
        limits = self.limits or {}
        limit, anon = limits.get("mem_bytes"), (self.process or {}).get("peak_anon_bytes")
        if not (limit and anon and (self.location or {}).get("kind") == "local"):
            return None
        per, n = limits.get("mem_per_solver_bytes"), (self.concurrent or {}).get("solvers", 1)
        return limit + (n - 1) * per - n * anon if per else limit - anon

    def what_limited(self, layer=None):
        """What held the accelerator up, in words, from this run's own evidence (the threads' CPU,
        the disk's paced reads, iowait, where the data lives): the capacity tables' words first
        ("one thread: ...", "nothing measured near its limit"), the figures after them in
        parentheses; None where AU >= 0.90 or unknown.
        layer: the Caffe layer that read the data (HDF5Data and MemoryData read on the solver thread)."""
        if self.au is None or self.au >= 0.90 or not self.solver_seconds:
            return None
        threads = (self.process or {}).get("thread_cpu_seconds") or {}
        prefetch = threads.get(proctrack.PREFETCH, 0) / self.solver_seconds
        solver = threads.get(proctrack.SOLVER, 0) / self.solver_seconds
        paced, riops = ((self.limits or {}).get("throttled_reads") or {}), (self.limits or {}).get("riops")
        iowait = (self.monitor or {}).get("cpu_iowait_mean") or 0
        quota, throttling = (self.limits or {}).get("cpu_quota"), (self.limits or {}).get("cpu_throttling") or {}
        if quota and throttling.get("periods") and throttling["throttled_periods"] / throttling["periods"] >= 0.2:
            return (f"the CPU quota ({quota:g} cores; throttled in "
                    f"{throttling['throttled_periods'] / throttling['periods']:.0%} of its periods)")
        if prefetch >= 0.85:
            return (f"one thread: the prefetch thread's CPU (busy {prefetch:.0%} of the solver's time; "
                    f"{self._prefetch_work()})")
        if layer in ("HDF5Data", "MemoryData"):
            copies = " and the host-to-device copies it makes" if (self.compute or {}).get("host_copy_latency_us") else ""
            return (f"one thread: the solver thread, which reads the data{copies} ({layer}; its CPU {solver:.0%} of "
                    "the solver's time)")
        if paced.get("read_ios") and riops and paced["read_ios"] / riops >= 0.1 * self.solver_seconds:
            return f"the disk's read limit ({riops} IOPS; {paced['read_ios']:,} reads paced)"
        if iowait >= 10:
            return f"reads from the disk (iowait {iowait:.0f}% of the CPU)"
        if (self.location or {}).get("kind") not in (None, "local"):
            return f"the servers' replies (the prefetch thread busy {prefetch:.0%}; the rest waiting on the network)"
        return f"nothing measured near its limit: waiting on the data (the prefetch thread busy {prefetch:.0%})"

    def _prefetch_work(self):
        """What the prefetch thread does, in words, with the pool beside it (decode_threads,
        transform_threads) if any."""
        options = self.read_options or {}
        decoders, transformers = options.get("decode_threads") or 1, options.get("transform_threads") or 1
        if decoders > 1:
            return f"it decodes and transforms its share of each batch beside {decoders - 1} more threads"
        if transformers > 1:
            return (f"it reads every record and draws the crops and mirrors, and transforms its share of each "
                    f"batch beside {transformers - 1} more threads")
        return "one thread transforms every image"

    def prefetch_share(self):
        """The prefetch thread's CPU over the solver's time: 1.0, one core, is all it can have."""
        seconds = ((self.process or {}).get("thread_cpu_seconds") or {}).get(proctrack.PREFETCH)
        return seconds / self.solver_seconds if seconds is not None and self.solver_seconds else None

    @property
    def records_skipped(self):
        """lmdb_read SHARED: the records this solver skipped in all, left behind by its rings after
        keeping the others waiting 10 s (it did not read every record once per pass); None without
        a shared ring, or in a record made before skips were counted."""
        counts = [ring.get("records_skipped") for ring in self.shared_rings or []]
        return None if not counts or None in counts else sum(counts)

    @property
    def cache_state(self):
        """warm | cold as asked where the measured residency bears it out, else "partly warm" or
        "not cold" (cache_state above); tables group and label runs by it, never by the ask alone."""
        return cache_state(self.cache, self.cache_resident_fraction, self.residency_is_page_cache())

    def residency_is_page_cache(self):
        """Whether cache_resident_fraction measured the page cache (local files), not a server's memory."""
        kind = (self.location or {}).get("kind")
        if kind is None and self.location is None and self.backend:  # its description failed or predates it
            from data_prep import backends
            b = backends.REGISTRY.get(self.backend)
            kind = b.location if b else None
        return kind in (None, "local")

    def data_over_cache_room(self):
        """How many times the training data exceeds what could cache it (MLPerf Storage asks >= 5)."""
        room, data = self.cache_room_bytes(), (self.train_footprint or {}).get("allocated_bytes")
        return data / room if room and room > 0 and data else None

    def compute_label(self, per_net=True):
        """per_net: with the net's time per iteration (which differs between datasets)."""
        c = self.compute or {}
        if c.get("mode") == "emulated":
            ms = f" ({c.get('ms_per_iteration')} ms/iteration)" if per_net else ""
            return f"emulated {c.get('accelerator')}{ms}"
        if c.get("mode") == "gpu":
            return f"real GPU ({(self.environment or {}).get('gpu_model') or 'unknown'})"
        if c.get("mode") == "cpu":
            return "real CPU"
        return "unknown compute"

    def machine_label(self):
        e = self.environment or {}
        cores = e.get("cpu_cores")
        mem = e.get("memory_bytes")
        return (f"{e.get('gpu_model') or 'no GPU'}, {cores or '?'} cores "
                f"({e.get('cpu_model') or 'unknown CPU'}), {mem / 2**30:.0f} GiB" if mem else
                f"{e.get('gpu_model') or 'no GPU'}, {cores or '?'} cores")

    def limits_label(self):
        from experiments.cgroup import Limits
        return Limits.from_record(self.limits).label()

    def setup(self, solvers=True):
        """What makes runs comparable with each other: machine, compute, limits (and the
        network, for data on servers reached through a round trip or on a cluster the user runs;
        the reader's settings; over how many client hosts, and how many solvers trained at once,
        unless solvers=False)."""
        rtt, seeds = (self.location or {}).get("rtt_ms_asked"), (self.location or {}).get("seeds")
        network = f"; {rtt:g} ms round trip to the servers" if rtt is not None else ""
        network += f"; the cluster at {seeds}" if seeds else ""
        hosts = (self.concurrent or {}).get("client_hosts")
        network += f"; solvers over {hosts} client host{'s' * (hosts > 1)}" if hosts else ""
        reader = "".join(f"; {k} {v}" for k, v in sorted((self.read_options or {}).items()))
        count = (self.concurrent or {}).get("solvers")
        together = f"; {count} solvers at once" if solvers and count else ""
        return (self.machine_label(), self.compute_label(per_net=False),
                self.limits_label() + network + reader + together)


def append(path, record):
    """Append one record, whole, under its folder's lock, durably (experiments/records_log.py).
    RecordWriteError (an OSError) when it could not: the file is then as it was."""
    records_log.append_line(path, json.dumps(record.to_dict(), sort_keys=True))


# A dataset folder's records: records.jsonl, which runs append to, and, in committed results,
# its earlier lines split off into records-NNN.jsonl (git keeps files under 5 MB; split -C
# keeps lines whole). Sorted, the shards come first: the records stay in the order they ran.
RECORD_FILES = "records*.jsonl"


def record_files(dataset_folder):
    return sorted(Path(dataset_folder).glob(RECORD_FILES))


_said = set()  # the damaged files a report has named on stderr already


def load(paths, strict=False):
    """Every record under the given results folders (DATASET/records*.jsonl) or .jsonl files.
    A line that holds no whole record (records_log.parse) is skipped, and each such file is named
    once on stderr with its bad lines' numbers; strict=True: RecordsDamaged, naming them.
    RecordsLocked: a writer held the folder's lock past records_log.LOCK_WAIT_S."""
    records = []
    for p in map(Path, paths):
        files = [p] if p.is_file() else sorted(p.glob("*/" + RECORD_FILES))
        for f in files:
            good, bad = records_log.read_locked(f)
            if bad and strict:
                raise RecordsDamaged(f, bad)
            records += [Record.from_dict(d) for _, d in good]
            if bad and f not in _said:
                _said.add(f)
                numbers = ", ".join(str(n) for n, _, _ in bad[:10]) + (", ..." if len(bad) > 10 else "")
                print(f"{f}: {len(bad)} bad line{'s' * (len(bad) > 1)} skipped (line {numbers}): "
                      + records_log.REPAIR_HINT.format(file=f), file=sys.stderr)
    return records


def recorded(results, dataset, strict=True):
    """The records of RESULTS/DATASET. strict (the default, what a run asks before it adds to
    them): RecordsDamaged where a line holds no whole record; strict=False: skipped, as load does."""
    return load(record_files(Path(results) / dataset), strict=strict)
