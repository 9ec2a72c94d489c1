"""How the capacity tables say things: an AU with the decimals that decide it against 0.90, the
N the data path's CPU allows, how few runs an answer rests on, a cache its runs did not have,
host probes that disagree, and the figures beside a stopper."""
import statistics

from experiments.data_path_cpu import THRESHOLD, cpu_allows, data_threads, solvers
from monitor import cpu_probe


CPU_DISAGREE = 0.15   # the host monitor's CPU shown beside the processes' own where they differ this much


SHOWN = (("thread", "thread"), ("cores", "cores"), ("monitor", "the host monitor's CPU in training"),
          ("paced", "IOPS limit"), ("device", "device"),
          ("servers", "server"))


def figure_label(at, name, label):
    """A figure's label in "not found (...)"; the data threads' names the busiest where there are several."""
    if name != "thread" or at.on_solver or at.threads == 1 or not at.busiest:
        return label
    return "prefetch thread" if at.busiest == "prefetch" else at.busiest


def cpu_note(at):
    """The host monitor's CPU in the training window where it differs from the processes' own
    by CPU_DISAGREE or more (other load on the host, or a start-up unlike the training), else ''."""
    if at.cores is not None and at.monitor is not None and abs(at.cores - at.monitor) >= CPU_DISAGREE:
        return f"the host monitor's {min(at.monitor, 1):.0%} in training; the processes' own "
    return ""


def both_ns(at, before, name):
    """'97% at 19, 80% at 18' (the N that held: '-' where not measured); without an N that held,
    '97%'. The data threads' figure ends with how many threads the solver had."""
    value = getattr(at, name)
    text = f"{min(value, 1):.0%}"
    if before is not None:
        held = getattr(before, name)
        text += f" at {at.n}, {'-' if held is None else f'{min(held, 1):.0%}'} at {before.n}"
    if name == "thread" and not at.on_solver:
        text += f", {at.threads} thread{'s' * (at.threads > 1)}"
    return text


def probe_note(records):
    """Where a curve's runs carry CPU probes (monitor/cpu_probe.py) further apart than one host's
    noise allows, they may come from hosts of different speed: say so, with the spread."""
    found = cpu_probe.spread(cpu_probe.rate(r.environment) for r in records)
    if found is None:
        return ""
    return f"; host CPU probes differ {found:.0%}: not one host's answer" if found > cpu_probe.SAME_HOST_SPREAD else ""


def cpu_allows_text(records):
    found = cpu_allows(records)
    if found is None:
        return "-"
    n, share = found
    threads = data_threads(records[0])
    return f"{n:.1f}" if n else f"0 ({'one thread' if threads == 1 else f'{threads} threads'}: {share:.2f})"


def au_text(au, digits=2):
    """An AU with at least `digits` decimals and as many more as decide it against THRESHOLD: 0.8954
    is "0.895" and 0.8996 "0.8996", never a "0.90" that failed (or an "0.89" that held)."""
    text = f"{au:.{digits}f}"
    while digits < 6 and (float(text) >= THRESHOLD) != (au >= THRESHOLD):
        digits += 1
        text = f"{au:.{digits}f}"
    return text


def au_percent(au):
    """An AU in percent with as many decimals as decide it against THRESHOLD (au_text's rule):
    0.8954 is "89.5%", never a "90%" that failed."""
    digits = 0
    text = f"{100 * au:.0f}"
    while digits < 4 and (float(text) / 100 >= THRESHOLD) != (au >= THRESHOLD):
        digits += 1
        text = f"{100 * au:.{digits}f}"
    return f"{text}%"


def missed_state(records, n):
    """' (partly warm)' where a run at N or N + 1 did not have the cache its curve asked for
    (record.cache_state: a warm run holding less than WARM_AT_LEAST of its data), else ''."""
    missed = sorted({r.cache_state for r in records if r.ok and solvers(r) in (n, n + 1) and r.cache_state != r.cache})
    return f" ({', '.join(missed)})" if missed else ""


CONFIRM_RUNS = 3  # runs at N and at N + 1 that confirm an answer (benchmarks/capacity.py --confirm)


def few_runs(at, above):
    """' (n = 1, 3)' where the answer rests on fewer runs than confirm one, else ''."""
    counts = [len(aus) if aus else 0 for aus in (at, above)]
    shown = [aus for aus in (at, above) if aus]  # N = 0 holds by definition; N + 1 may not have run
    return f" (n = {counts[0]}, {counts[1]})" if any(len(aus) < CONFIRM_RUNS for aus in shown) else ""


def au_median_text(aus):
    return au_text(statistics.median(aus)) if aus else "-"


def au_cell(aus):
    return f"{au_text(statistics.median(aus), 3)} ({len(aus)})" if aus else "-"


def cores_words(allowed):
    """'both cores', 'its one core', 'all 16 cores' (of a group that could use `allowed` cores)."""
    if not allowed:
        return "all cores"
    return {1: "its one core", 2: "both cores"}.get(allowed, f"all {allowed:g} cores")


def thread_words(at):
    """The busiest data thread, as the verdict names it."""
    if at.on_solver:
        return "one thread: the solver thread"
    if at.threads == 1 or at.busiest in (None, "prefetch"):
        return "one thread: the prefetch thread"
    return f"data threads: {at.busiest}"


# a figure over its threshold at both N, in the words of a verdict that names no class
BUSY_WORDS = {"thread": lambda at: thread_words(at).split(": ", 1)[1] + " busy",
              "cores": lambda at: f"{cores_words(at.allowed)} busy",
              "paced": lambda at: "its IOPS limit reached", "device": lambda at: "the device busy",
              "servers": lambda at: "a Redis node busy"}


def verdict(stopper):
    """What stopped an N in a few words (capacity_stoppers.Stopper), with the one figure that says
    it at the N that failed; the figures behind it are the stopper's own (Stopper.figures)."""
    kind, at = stopper.kind, stopper.at

    def share(name):
        return f"{min(getattr(at, name), 1):.0%}"
    words = {
        "no runs": lambda: "no runs",
        "lock": lambda: "LevelDB's lock",
        "oom": lambda: "memory (OOM killer)",
        "failed": lambda: "solvers failed",
        "thread": lambda: f"{thread_words(at)} ({share('thread')})",
        "cores": lambda: f"CPU: {cores_words(at.allowed)} busy ({share('cores')})",
        "page cache": lambda: "memory: the page cache",
        "paced": lambda: f"storage: its IOPS limit ({share('paced')})",
        "device": lambda: f"storage: the device busy ({share('device')})",
        "servers": lambda: f"a Redis node's CPU ({share('servers')})",
        "not found": lambda: (f"no clear cause ({BUSY_WORDS[stopper.over](at)}, {share(stopper.over)}, as at the N "
                              "before)" if stopper.over else "nothing measured near its limit"),
    }[kind]()
    return words + (" in some runs" if stopper.some_runs else "")
