"""Whole machines to emulate, one object each: the limits its training cgroup gets and the
accelerator that stands in for its GPU. `--profile NAME` applies both; any of its values can
be overridden (the record then says "NAME modified").

paper2016 is the paper's Table 1 machine: 8 cores, 16 GB, an HDD and a Titan X. Its disk
figures: 600 MB/s, the bandwidth the paper states for its machine (Section 3.1), and read
IOPS fitted on one paper cell (MNIST image files cold, 427.16 s) by benchmarks/calibration.py
fit, by iteration: our run of that cell at 150 IOPS (what a lone 7,200-rpm disk gives random
reads) gave 388, our run at 388 gave 287, and our run at 287 with the host's proactive reclaimer
kept off the run's pages and the throttle's own count of reads gave 188 (README, Calibration). Its
accelerator, titanx2016, is fitted in models/accelerators.json.
"""
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Machine:
    name: str
    summary: str           # for --help
    accelerator: str       # a models/accelerators.json profile, unless a real GPU is used
    limits: dict = field(default_factory=dict)  # experiments.cgroup.Limits fields


PROFILES = {m.name: m for m in [
    Machine("paper2016", "the paper's 2016 machine: 8 cores, 16 GiB, an HDD's 188 read IOPS (fitted) and 600 MB/s, "
            "and its Titan X (emulated) unless a GPU is used", accelerator="titanx2016",
            limits=dict(cpus=8, mem_bytes=16 * 2**30, riops=188, rbps=600 * 10**6)),
]}


def get(name):
    if name not in PROFILES:
        raise KeyError(f"unknown machine profile {name!r}; known: {', '.join(PROFILES)}")
    return PROFILES[name]
