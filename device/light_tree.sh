#!/usr/bin/env bash
# The device tool sends the tracked tree (at most 64 MiB with what is carried); results/ alone
# is larger. `on` takes results/ out of the index (the files stay, ignored through
# .git/info/exclude) but for the results catalogue and the reference records host-check predicts from
# (benchmarks/host_check.py); `off` puts it back exactly as HEAD has it. Commit nothing between
# the two.
#   device/light_tree.sh on|off
set -euo pipefail
cd "$(dirname "$0")/.."
exclude=.git/info/exclude
mark="# imgstore: device/light_tree.sh on"
case "${1:-}" in
  on)
    git rm -r -q --cached results
    git add -f results/catalogue.toml  # every folder name the code reads comes from it
    for folder in $(.venv/bin/python -c 'from benchmarks import host_check; print(*sorted({c.reference for c in host_check.CELLS}))'); do
      git add -f "$folder"/*/records*.jsonl
    done
    grep -qF "$mark" "$exclude" 2>/dev/null || printf '%s\n/results/\n' "$mark" >> "$exclude"
    echo "results/ out of the index: $(git ls-files -z | xargs -0 du -cb 2>/dev/null | awk '/total$/ {s+=$1} END {printf "%.1f MiB", s/1048576}') tracked"
    ;;
  off)
    git reset -q -- results
    sed -i "\\|^$mark\$|,+1d" "$exclude"
    git status --porcelain -- results | head -3
    ;;
  *) echo "usage: device/light_tree.sh on|off" >&2; exit 2 ;;
esac
