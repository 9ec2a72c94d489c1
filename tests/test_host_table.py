"""Hosts of another shape in make host-check (a cpuset, a CPU quota: benchmarks/host_check.py),
the prediction's cores under them (experiments/prediction.py), and the cross-host table
(analysis/hosts_table.py) on records made for it."""
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from analysis import hosts_table
from benchmarks import host_check
from experiments import cgroup, data_path_cpu, prediction, proctrack, record
from experiments import run as run_cli
from experiments.record import Record
from monitor import cpu_probe

PIXELS, FILES = cpu_probe.PIXELS, cpu_probe.FILES
CAPACITY_CELL = next(c for c in host_check.CELLS if c.capacity)


def made(probe, prefetch_cpu=0.5, limits=None, cores=2):
    """One CIFAR-10 LMDB run (batch 100, 1,000 iterations at 1 ms each: 100,000 images/s eaten)
    whose prefetch thread spent prefetch_cpu CPU seconds, as run.py writes it."""
    return Record(run_id=f"cifar10-lmdb-{prefetch_cpu}", dataset="cifar10", backend="lmdb", cache="warm", status="ok",
                  solver_seconds=1.0, au=0.99, iterations_setting=1000, limits=limits or {},
                  compute={"mode": "emulated", "accelerator": "h100", "ms_per_iteration": 1.0},
                  process={"thread_cpu_seconds": {proctrack.PREFETCH: prefetch_cpu, proctrack.SOLVER: 0.2}},
                  environment={"cpu_cores": cores, "cpu_probe": probe})


def dry_run(*flags):
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "host_check.py"), "--dry-run", *flags],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("flags, word, asked", [(("--cpus", "1"), "-1c-cpuset-probe<N>", ("cpus", 1)),
                                                (("--cpu-quota", "0.5"), "-0.5c-quota-probe<N>", ("cpu_quota", 0.5))])
def test_a_shaped_check_runs_every_run_and_its_probe_under_the_limit(flags, word, asked):
    out = dry_run(*flags)
    assert out.returncode == 0, out.stderr
    runs = [line for line in out.stdout.splitlines() if "experiments/run.py" in line]
    assert len(runs) == len(host_check.CELLS) * host_check.ROUNDS
    for line in runs:
        a = run_cli.parser().parse_args(line.split("run.py ")[1].replace("--iters-reason cut to fit make host-check",
                                                                        "").split())
        assert getattr(a, asked[0]) == asked[1], line
        assert a.out.endswith(word), a.out
    assert "cpu probe x 3 in a cgroup: " in out.stdout


def test_one_shape_at_a_time_and_within_the_host():
    out = dry_run("--cpus", "1", "--cpu-quota", "0.5")
    assert out.returncode == 2 and "one shape at a time" in out.stderr
    out = dry_run("--cpus", str(os.cpu_count() + 1))
    assert out.returncode == 2 and f"1 to this host's {os.cpu_count()} cores" in out.stderr
    out = dry_run("--cpu-quota", "0")
    assert out.returncode == 2 and "--cpu-quota: above 0" in out.stderr


def test_host_folders_say_the_shape():
    assert host_check.host_name("AMD EPYC", 2, 727.9) == "AMD-EPYC-2c-probe728"
    assert host_check.host_name("AMD EPYC", 2, 731.2, {"cpus": 1}) == "AMD-EPYC-1c-cpuset-probe731"
    assert host_check.host_name("AMD EPYC", 2, 364.4, {"cpu_quota": 0.5}) == "AMD-EPYC-0.5c-quota-probe364"
    assert hosts_table.limited_cores(2, {"cpus": 1}) == 1 and hosts_table.limited_cores(2, {"cpu_quota": 0.5}) == 0.5
    assert hosts_table.limited_cores(16, {}) == 16


def test_the_probe_runs_in_the_limits_cgroup():
    """The probe under a quota of a fifth of a core: the kernel throttled its group (it would not,
    had the probe run outside it); under a cpuset of one core, the group held core 0 only."""
    if cgroup.version() is None or not os.access(cgroup.CGROUP_ROOT, os.W_OK):
        pytest.skip("needs root and a cgroup hierarchy")
    medians, probes, limit = host_check.measure_probe(1, {"cpu_quota": 0.2})
    assert PIXELS in medians, probes
    assert limit["throttling"]["throttled_periods"] > 0, limit
    _, _, limit = host_check.measure_probe(1, {"cpus": 1})
    assert limit["applied"].get("cpuset.cpus") == "0-0" and limit["throttling"] is None, limit


def test_the_capacity_row_under_a_quota_counts_the_quota_once():
    """2-core reference: one prefetch thread delivers 200,000 images per CPU second, 0.5 s per run.
    Under a quota of half a core the probe ran at half speed and each CPU second is as fast as
    before: predicted and measured N are both a quarter of the 2-core host's."""
    reference = [made({PIXELS: 600})]
    n_there = data_path_cpu.cpu_allows(reference)[0]
    here = [made({PIXELS: 600}, limits={"cpu_quota": 0.5})]  # run.py's records carry the unlimited probe
    row = host_check.compare(CAPACITY_CELL, ("ref", reference), here, {PIXELS: 300}, 0.5, {"cpu_quota": 0.5})
    assert row["cross_host_predicted_cpu_allows"] == pytest.approx(n_there / 4)
    assert row["measured_cpu_allows"] == pytest.approx(n_there / 4)


def test_the_capacity_row_under_a_cpuset_has_its_cores():
    reference = [made({PIXELS: 600})]
    n_there = data_path_cpu.cpu_allows(reference)[0]
    here = [made({PIXELS: 600}, limits={"cpus": 1})]
    row = host_check.compare(CAPACITY_CELL, ("ref", reference), here, {PIXELS: 600}, 1, {"cpus": 1})
    assert row["cross_host_predicted_cpu_allows"] == pytest.approx(n_there / 2)
    assert row["measured_cpu_allows"] == pytest.approx(n_there / 2)


def test_a_shaped_check_counts_only_the_runs_made_under_its_limit(tmp_path):
    """A folder holding the capacity cell's runs unlimited and under a 1-core cpuset: each check
    reads its own."""
    for i, limits in enumerate(({}, {"cpus": 1}, {"cpu_quota": 0.5})):  # prefetch_cpu: distinct run ids
        record.append(tmp_path / "cifar10" / "records.jsonl", made({PIXELS: 600}, prefetch_cpu=0.5 + i, limits=limits))
    found = {tuple(sorted(r.limits.items())) for r in host_check.here_runs(CAPACITY_CELL, tmp_path, {"cpus": 1})}
    assert found == {(("cpus", 1),)}
    assert [r.limits for r in host_check.here_runs(CAPACITY_CELL, tmp_path)] == [{}]



def test_a_check_counts_only_the_runs_of_the_machine_it_probed(tmp_path):
    """A lent GPU machine's second call starts another machine: the first call's runs (another boot
    id) are left out and named, a run from before boot ids were recorded still counts."""
    for i, boot in enumerate(("first-machine", "second-machine", None)):
        r = made({PIXELS: 600}, prefetch_cpu=0.5 + i)
        r.environment["boot_id"] = boot
        record.append(tmp_path / "cifar10" / "records.jsonl", r)
    found = host_check.here_runs(CAPACITY_CELL, tmp_path, None, "second-machine")
    elsewhere = [r for r in host_check.here_runs(CAPACITY_CELL, tmp_path)
                 if not host_check.on_machine(r, "second-machine")]
    assert sorted(str(r.environment["boot_id"]) for r in found) == ["None", "second-machine"]
    assert [r.environment["boot_id"] for r in elsewhere] == ["first-machine"]
    assert len(host_check.here_runs(CAPACITY_CELL, tmp_path)) == 3  # no boot given: every run


def test_every_record_names_the_boot_it_ran_in():
    from experiments import runner
    assert runner.boot_id() == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert runner.environment()["boot_id"] == runner.boot_id()

def test_probe_cores_under_a_quota():
    assert prediction.probe_cores(2) == 2 and prediction.probe_cores(1, None) == 1
    assert prediction.probe_cores(0.5, 0.5) == 1.0  # the probe already ran at half a core
    assert prediction.probe_cores(1.5, 1.5) == 1.5  # one thread ran at full speed: 1.5 cores' worth


def cell(name, predicted, measured, bound="data path", reference=None, n=3):
    """One row of a host-check.json, as benchmarks/host_check.py compare() writes it."""
    return {"cell": name, "bound": bound, "reference_s": reference or predicted, "predicted_s": predicted,
            "measured_s": measured, "measured_n": n if measured is not None else 0}


def check(pixels, rows, cores=2, shape=None, model="AMD EPYC"):
    return {"medians": {PIXELS: pixels, FILES: 50_000}, "cores": hosts_table.limited_cores(cores, shape),
            "host_cores": cores, "shape": shape or {}, "cpu_model": model, "rows": rows}


def write_checks(root, checks):
    for name, c in checks.items():
        (root / name).mkdir(parents=True)
        (root / name / "host-check.json").write_text(json.dumps(c))


def made_checks():
    """Host A checked twice (probes 700 and 720: 3% apart, one host), the same VM as a 1-core cpuset
    (another shape: host B), and another VM of the same CPU model, probe 500 (host C)."""
    capacity = dict(cell("cifar10-lmdb-capacity", 1.8, 1.8, bound="compute"), predicted_cpu_allows=10.0,
                    measured_cpu_allows=7.0)
    return {"AMD-EPYC-2c-probe700": check(700, [cell("mnist-images", 10.0, 11.0), cell("cifar10-images", 8.0, 9.6),
                                                cell("mnist-lmdb", 5.8, 5.8, bound="compute"), capacity]),
            "AMD-EPYC-2c-probe720": check(720, [cell("mnist-images", 10.0, 10.5), cell("cifar10-images", 8.0, None)]),
            "AMD-EPYC-1c-cpuset-probe710": check(710, [cell("mnist-images", 10.0, 10.2)], shape={"cpus": 1}),
            # compute-bound at its reference, but slow enough here that the data path comes out: judged
            "AMD-EPYC-2c-probe500": check(500, [cell("mnist-lmdb", 7.0, 9.0, bound="compute", reference=5.8)])}


def test_the_table_groups_checks_by_host_and_judges_the_data_path_bound_cells(tmp_path):
    write_checks(tmp_path, made_checks())
    checks = hosts_table.load_checks(tmp_path)
    hosts = hosts_table.group_hosts(checks)
    assert sorted(sorted(c["folder"] for c in h) for h in hosts) == [
        ["AMD-EPYC-1c-cpuset-probe710"], ["AMD-EPYC-2c-probe500"], ["AMD-EPYC-2c-probe700", "AMD-EPYC-2c-probe720"]]
    rows = hosts_table.rows(checks)
    judged = {(r["folder"], r["cell"]): r["within"] for r in rows if r["data_path"]}
    assert judged == {("AMD-EPYC-2c-probe700", "mnist-images"): True,       # 1.10
                      ("AMD-EPYC-2c-probe700", "cifar10-images"): False,    # 1.20
                      ("AMD-EPYC-2c-probe720", "mnist-images"): True,       # 1.05 (its cifar10 cell not measured)
                      ("AMD-EPYC-1c-cpuset-probe710", "mnist-images"): True,
                      ("AMD-EPYC-2c-probe500", "mnist-lmdb"): False}        # 1.29, judged: predicted > reference
    assert [r["label"] for r in rows if r["folder"] == "AMD-EPYC-1c-cpuset-probe710"] == \
        ["A: AMD EPYC, a cpuset of 1 of its 2 cores, probe 710"]  # hosts lettered in folder order
    text = hosts_table.block(checks)
    assert ("3 hosts (4 checks): data-path-bound cells within 15%: 3 of 5 (host A: holds on all 1; "
            "host B: misses mnist-lmdb (1.29); host C: misses cifar10-images (1.20)); "
            "compute-bound cells (not judged): 2 of 2 within; "
            "the N the data path's CPU allows: 0 of 1 within.") in text
    assert "| C: AMD EPYC, 2 cores, probe 700 | cifar10-lmdb-capacity | 10.0 | 7.0 | 0.700 |" in text


def test_probes_further_apart_than_one_hosts_noise_are_two_hosts():
    one = [check(700, []), check(734, [])]      # 4.7% apart
    two = [check(700, []), check(740, [])]      # 5.6% apart
    other_model = [check(700, []), check(700, [], model="Intel Xeon")]
    assert [len(h) for h in hosts_table.group_hosts(one)] == [2]
    assert [len(h) for h in hosts_table.group_hosts(two)] == [1, 1]
    assert [len(h) for h in hosts_table.group_hosts(other_model)] == [1, 1]


def test_the_block_in_the_docs_is_the_one_the_records_make():
    """docs/emulation.md's cross-host block regenerated from every committed host-check.json:
    a check committed without `analysis/hosts_table.py --write` fails here."""
    page = hosts_table.PAGE.read_text()
    assert hosts_table.BEGIN in page and hosts_table.END in page
    shown = page.split(hosts_table.BEGIN + "\n", 1)[1].split(hosts_table.END, 1)[0]
    assert shown == hosts_table.block(hosts_table.load_checks()), \
        "docs/emulation.md's host checks are stale: run .venv/bin/python -m analysis.hosts_table --write"


def probed(row, predicted, **more):
    """A row as host-check writes it since the data-path probe: its prediction in predicted_s,
    the cross-host one under cross_host_*."""
    return dict(row, cross_host_predicted_s=row["predicted_s"], cross_host_bound=row["bound"], predicted_s=predicted,
                **more)


def test_the_table_shows_the_probes_prediction_beside_the_cross_host_one(tmp_path):
    """A new check of host A (probe 710) with both predictions; the older checks have only the
    cross-host one: '-' there, never a number made up for them."""
    checks = made_checks()
    capacity = probed(dict(cell("cifar10-lmdb-capacity", 1.8, 1.8, bound="compute"), measured_cpu_allows=7.0,
                           cross_host_predicted_cpu_allows=10.0), 1.8, predicted_cpu_allows=8.0)
    checks["AMD-EPYC-2c-probe710"] = check(710, [probed(cell("mnist-images", 10.0, 11.0), 11.5),
                                                 probed(cell("cifar10-images", 8.0, 9.6), 9.0), capacity])
    write_checks(tmp_path, checks)
    found = hosts_table.load_checks(tmp_path)
    rows = {(r["folder"], r["cell"]): r for r in hosts_table.rows(found)}
    new = rows[("AMD-EPYC-2c-probe710", "cifar10-images")]
    assert (new["predicted_s"], new["ratio"], new["within"]) == (8.0, pytest.approx(1.2), False)  # cross-host
    assert (new["probe_predicted_s"], new["probe_ratio"], new["probe_within"]) == (9.0, pytest.approx(9.6 / 9.0), True)
    assert rows[("AMD-EPYC-2c-probe700", "cifar10-images")]["probe_predicted_s"] is None
    text = hosts_table.block(found)
    cross, own = text.split("The checks made with a data-path probe")
    assert "| C: AMD EPYC, 2 cores, probe 700 | cifar10-images | 8.00 | 9.60 (3) | 1.200 | **no** |" in cross
    assert "| C: AMD EPYC, 2 cores, probe 710 | cifar10-images | 8.00 | 9.60 (3) | 1.200 | **no** |" in cross
    assert "| C: AMD EPYC, 2 cores, probe 710 | cifar10-images | 9.00 | 9.60 (3) | 1.067 | yes |" in own
    assert "probe 700" not in own  # a check made without the probe: no row made up for it
    assert "| cifar10-lmdb-capacity | 10.0 | 7.0 | 0.700 |" in cross and "| cifar10-lmdb-capacity | 8.0 | 7.0 | 0.875 |" in own
    assert ("From the host's own data-path probe: data-path-bound cells within 15%: 2 of 2; "
            "the N allowed: 1 of 1 within.") in text
    # without any check holding the probe's prediction the block is as before: no table of it
    assert "data-path probe" not in hosts_table.block(hosts_table.load_checks(tmp_path)[:1])


def test_the_capacity_claim_takes_a_hosts_checks_together(tmp_path, monkeypatch):
    """Two checks of one host with a capacity row each (claims.host_capacity unpacked exactly one:
    'too many values to unpack')."""
    from analysis import claims
    capacity = dict(cell("cifar10-lmdb-capacity", 1.8, 1.8, bound="compute"), measured_cpu_allows=7.0)
    write_checks(tmp_path, {"AMD-EPYC-2c-probe700": check(700, [dict(capacity, predicted_cpu_allows=10.0)]),
                            "AMD-EPYC-2c-probe720": check(720, [dict(capacity, predicted_cpu_allows=14.0,
                                                                     measured_cpu_allows=7.0)])})
    load = hosts_table.load_checks
    monkeypatch.setattr(hosts_table, "load_checks", lambda root=None: load(tmp_path))
    row = claims.host_capacity("A")
    assert row["predicted"] == pytest.approx(12.0) and row["measured"] == pytest.approx(7.0)
    assert row["ratio"] == pytest.approx(statistics.median([0.7, 0.5]))
