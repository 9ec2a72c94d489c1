"""What stopped a capacity curve at the N that failed: solvers lost (a lock, memory), the busiest
data thread, all cores, the page cache, the storage or the Redis servers, judged from the figures
(analysis/capacity_measures.py) at that N against those at the N that held."""
import dataclasses
import signal

from analysis.capacity_logs import failure_causes
from analysis.capacity_measures import device_bytes_per_image, figures_of
from analysis.capacity_stats import curve_of, failed_solvers, first_failed, largest_n, median_of
from analysis.capacity_words import SHOWN, both_ns, cpu_note, figure_label, verdict
from experiments.data_path_cpu import groups, solvers


THREAD_BUSY = 0.85    # a solver's data threads busy this share of the solver's time have run out
CORES_BUSY = 0.85     # the group's cores busy this share of its run (the processes' own CPU) have run out
STORAGE_BUSY = 0.90   # reads at this share of the cgroup's IOPS limit, or the device busy this share of the window
SERVER_BUSY = 0.85    # a Redis node busy this share of one core over the training window
RISE = 0.10           # a figure over its threshold at both N names the stopper only if it rose this much
MAJORITY = 0.5        # a class found in no more than this share of the runs says in how many


@dataclasses.dataclass(frozen=True)
class Stopper:
    """What stopped one N: kind (one of KINDS), the figures behind it in words (at the N that failed
    and at the N that held), the figures measured at the N that failed, the figure over its
    threshold at both N where no class was named (over), and whether it was found in no more than
    MAJORITY of the runs (some_runs). capacity_words.verdict says it in words."""
    kind: str
    figures: str
    at: object = None
    over: str = None
    some_runs: bool = False


KINDS = ("no runs", "lock", "oom", "failed", "thread", "cores", "page cache", "paced", "device", "servers", "not found")


def judge(records, results=None, held=None):
    """What ran out at the N that failed (records: that N's runs), judged against the N that held
    (held: its runs; [] where N = 0 held, None: nothing to compare with, the thresholds alone
    decide). The first that applies of: solvers lost (a lock, memory; with in how many runs where
    not in most), the busiest data thread busy, all cores busy, the page cache, the storage (paced
    reads at the IOPS limit, the device busy), the servers (a Redis node's CPU); else "not found"
    with the figures. A figure names its class only where it crossed its threshold at the N that
    failed and not at the N that held, or rose by RISE since. The CPU measure is the processes' own
    (Figures.cores); the host monitor's, in the training window, is shown beside it where they
    differ by CPU_DISAGREE or more. Host-device copies are never named: no record measures their
    share of the solver's time."""
    if not records:
        return Stopper("no runs", "not found (no runs)")
    lost_solvers = _lost_of(records, results)
    if lost_solvers:
        return lost_solvers
    ok = [r for r in records if r.ok]
    at, before = figures_of(ok, results), (figures_of(held, results) if held is not None else None)
    if before is not None and not held:
        before = None  # N = 0 held: no solver ran, the thresholds alone decide
    squeezed = _page_cache_squeezed(held or [], ok)
    named = _first_named(_classes(at), at, before) or (("page cache", squeezed) if squeezed else None) or \
        _first_named(_late_classes(at), at, before)
    if named:
        return Stopper(named[0], named[1], at)
    shown = [f"{figure_label(at, name, label)} {both_ns(at, before, name)}" for name, label in SHOWN
             if getattr(at, name) is not None and (name != "monitor" or cpu_note(at))]
    over = next((name for name, threshold, _ in _classes(at) + _late_classes(at)
                 if getattr(at, name) is not None and getattr(at, name) >= threshold), None)
    return Stopper("not found", f"not found ({'; '.join(shown) or 'no figures'})", at, over)


def stopped_by(records, results=None, held=None):
    """The figures behind what ran out at the N that failed, in words (judge's)."""
    return judge(records, results, held).figures


def stopped_at(records, curve, by_n, lost_at, results=None):
    """(the N that failed, what stopped it: a Stopper) for a curve, or None when none failed."""
    failed = first_failed(by_n, lost_at)
    if failed is None:
        return None
    held = largest_n(by_n, lost_at)[0]
    at = {n: [r for r in records if curve_of(r) == curve and solvers(r) == n] for n in (held, failed)}
    return failed, judge(at[failed], results, at[held])


def stopped_words(records, curve, by_n, lost_at, results=None):
    """"stopped by" for a curve: what ran out at the N that failed, in words, or "-" when none failed."""
    found = stopped_at(records, curve, by_n, lost_at, results)
    return "-" if found is None else f"{verdict(found[1])} at {found[0]}"


def _classes(at):
    """(figure, threshold, the class's words up to its figures) decided before the page cache."""
    thread = (f"one thread (solver thread, {at.layer} " if at.on_solver else
              "one thread (prefetch " if at.threads == 1 else f"data threads ({at.busiest} ")
    return (("thread", THREAD_BUSY, thread), ("cores", CORES_BUSY, "all cores (" + cpu_note(at)))


def _late_classes(at):
    return (("paced", STORAGE_BUSY, "storage (IOPS limit, "), ("device", STORAGE_BUSY, "storage (device busy "),
            ("servers", SERVER_BUSY, "the servers (a Redis node "))


def _first_named(classes, at, before):
    """(the figure's name, the class's figures in words) of the first of (figure, threshold, words)
    whose figure discriminates, or None."""
    for name, threshold, words in classes:
        if _discriminates(getattr(at, name), getattr(before, name) if before else None, threshold, before is not None):
            return name, f"{words}{both_ns(at, before, name)})"
    return None


def _discriminates(failed, held, threshold, compared):
    """Whether a figure names its class: over the threshold at the N that failed, and (where an
    N that held is given) under it there or risen by RISE since (unmeasured there: not shown)."""
    if failed is None or failed < threshold:
        return False
    if not compared:
        return True
    return held is not None and (held < threshold or failed - held >= RISE)


def _lost_of(records, results):
    """A Stopper for solvers lost at this N (a lock, memory, other failures), with in how many of
    the runs where not in most of them; None where none was lost."""
    failed = [r for r in records if not r.ok]
    if not failed:
        return None
    causes = failure_causes(records, results) if results else []
    refused = sum(int(c.split(" x ")[0]) for c in causes if "Failed to open leveldb" in c)
    killed = [r for r in failed if r.returncode == -signal.SIGKILL]
    if refused:
        return Stopper("lock", f"a lock (LevelDB's: {refused} of {len(records)} solvers refused"
                       f"{_minority(records, failed)})", some_runs=bool(_minority(records, failed)))
    if killed:
        return Stopper("oom", f"memory (OOM killer: {len(killed)} of {len(records)} solvers"
                       f"{_minority(records, killed)})", some_runs=bool(_minority(records, killed)))
    return Stopper("failed", f"solvers failed ({'; '.join(causes) or failed_solvers(records)}"
                   f"{_minority(records, failed)})", some_runs=bool(_minority(records, failed)))


def _minority(records, hit):
    """', in 1 of 3 runs' where the runs that lost solvers are not most of the runs, else ''."""
    runs, hit_runs = groups(records), groups(hit)
    return f", in {len(hit_runs)} of {len(runs)} runs" if len(hit_runs) <= MAJORITY * len(runs) else ""


RESIDENCY_FALL = 0.20  # the data's page-cache residency after training fell this much from N to N + 1 ...
READS_RISE = 1.5       # ... and the device reads per image trained rose this many times: the cache no longer holds it


def _page_cache_squeezed(held, failed):
    """"memory (page cache: ...)" when, from the N that held to the N that failed, the data's
    residency after training fell and the device read more per image trained; else None."""
    held, failed = [r for r in held if r.ok], [r for r in failed if r.ok]
    before, after = (median_of(r.cache_resident_fraction_after for r in rs) for rs in (held, failed))
    reads_before, reads_after = (median_of(device_bytes_per_image(g) for g in groups(rs).values())
                                 for rs in (held, failed))
    if None in (before, after, reads_before, reads_after) or before - after < RESIDENCY_FALL:
        return None
    if reads_after <= READS_RISE * reads_before or reads_after == 0:
        return None
    return (f"memory (page cache: {before:.0%} -> {after:.0%} of the data resident after training, "
            f"device reads {reads_before / 1024:,.1f} -> {reads_after / 1024:,.1f} KiB per image)")
