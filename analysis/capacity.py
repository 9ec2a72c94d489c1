#!/usr/bin/env python3
"""How many accelerators one host keeps fed, from the records of runs with several solvers at
once (benchmarks/capacity.py, or run.py --concurrent N): per dataset, setup, backend and cache,
the group AU at each N (the mean of its solvers' AU; median over runs) and the largest N whose
median is >= 0.90, with the runs behind it; and the data path's images per second per core
(train images delivered over the CPU seconds of the threads that read and transform them;
the emulated compute sleeps), the figure that carries to a host with more cores; and the N that
figure allows (cores x images/s per core over 0.90 of what one accelerator eats; 0 when one
solver's data threads cannot feed its accelerator), so that an answer well
below it says something other than the CPU stopped the host (memory, a lock, the storage).

  python analysis/capacity.py RESULTS [--out DIR]   # e.g. the catalogue's ci-2core-capacity

Writes DIR/capacity.md, DIR/fig_capacity_DATASET.png and, where a published rate exists to set
ours against (FFCV's ImageNet loader), DIR/fig_per_core_DATASET.png (default DIR: RESULTS/report).

The work lives in modules of one job each: capacity_stats (the curves), capacity_logs (a run's
files), capacity_measures (what was busy), capacity_stoppers (what stopped a curve),
capacity_words (how the tables say it), capacity_tables and capacity_figures; this module is
the command, and offers their names that code elsewhere still asks of it.
"""
import argparse
import sys
from pathlib import Path

import catalogue
from analysis import readme
from analysis.capacity_figures import figure, figure_hosts, figure_per_core
from analysis.capacity_tables import against_outside, compact, table
from experiments.record import load

# Names asked of this module by analysis/answer.py, analysis/claims.py, benchmarks/capacity.py,
# benchmarks/host_check.py and tests/test_prose_numbers.py, test_figures.py, test_prediction.py;
# new code imports them from their own modules.
from analysis.capacity_measures import data_threads_share, figures_of, processes_cpu as _processes_cpu  # noqa: F401
from analysis.capacity_stats import (bracketed, cache_had, client_hosts, cpu_per_image, curve_of, curves,  # noqa: F401
                                     first_failed, group_aus, largest_n, lost, process_cpu as _process_cpu)
from analysis.capacity_stoppers import (CORES_BUSY, READS_RISE, SERVER_BUSY, STORAGE_BUSY, THREAD_BUSY,  # noqa: F401
                                        stopped_by, stopped_words)
from analysis.capacity_tables import OUTSIDE_REFERENCES  # noqa: F401
from analysis.capacity_words import au_percent, au_text, few_runs, missed_state  # noqa: F401
from experiments.data_path_cpu import (THRESHOLD, cpu_allows, images_per_core_second, prefetch_cpu,  # noqa: F401
                                       solvers)
from experiments.data_path_cpu import groups as _groups  # noqa: F401

README_BEGIN = "<!-- capacity tables: written by analysis/capacity.py RESULTS --readme -->"
README_END = "<!-- end of capacity tables -->"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", type=Path)
    p.add_argument("--out", type=Path)
    p.add_argument("--readme", action="store_true", help="also write the compact tables into README.md")
    a = p.parse_args(argv)
    records = [r for r in load([a.results]) if not r.superseded]  # kept, counted nowhere
    if not any(r.concurrent for r in records):
        # an empty table would overwrite the README's with nothing
        p.error(f"no capacity sweep recorded under {a.results} (run benchmarks/capacity.py first; "
                f"this project's own: {catalogue.relative('ci-2core-capacity')})")
    out = a.out or a.results / "report"
    out.mkdir(parents=True, exist_ok=True)
    (out / "capacity.md").write_text(table(records))
    print((out / "capacity.md").read_text())
    if a.readme:
        readme.replace_block(README_BEGIN, README_END, compact(records, a.results) + against_outside(records)
                             + f"\n(records: `{a.results}`)\n")
    for dataset in sorted({r.dataset for r in records}):
        for path in (figure(records, dataset, out), figure_per_core(records, dataset, out),
                     figure_hosts(records, dataset, out)):
            if path:
                print(f"wrote {path}")
    return 0



if __name__ == "__main__":
    sys.exit(main())
