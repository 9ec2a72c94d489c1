#!/bin/sh
# The re-measurement after the residency-at-the-clock check (2026-11-26): every row's cold cells
# (n = 3), then one warm cell per row of 1 thread / worker (n = 1), with the load and the CPU
# probe before and after. Run from the repository root.
set -u
OUT=$(.venv/bin/python -c "import catalogue; print(catalogue.relative(\"ci-2core-peers\"))")/clock-2026-11-26
probe() { echo "$(date -u +%FT%TZ) loadavg $(cat /proc/loadavg)"; .venv/bin/python -c "from monitor import cpu_probe; print(cpu_probe.measure())"; }
{ grep -m1 'model name' /proc/cpuinfo; nproc; probe; } > $OUT/machine.txt 2>&1
.venv/bin/python benchmarks/peers.py --caches cold --rounds 3 --json $OUT/cold.json > $OUT/cold.md 2> $OUT/cold-progress.log
echo "cold rc=$?" >> $OUT/machine.txt
probe >> $OUT/machine.txt 2>&1
.venv/bin/python benchmarks/peers.py --caches warm --rounds 1 --threads 1 --forms lmdb,images --json $OUT/warm.json > $OUT/warm.md 2> $OUT/warm-progress.log
echo "warm rc=$?" >> $OUT/machine.txt
probe >> $OUT/machine.txt 2>&1
