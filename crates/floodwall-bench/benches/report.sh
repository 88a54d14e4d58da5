#!/usr/bin/env bash
# Runs every benchmark of BENCHMARKS.md, one after another (never two at once: they share
# the machine's cores), and keeps each one's output in target/bench-report/<bench>.txt.
# The Redis benches start their own redis-server processes (never port 6379) and need
# `redis-server`, `redis-cli` and `redis-benchmark` (Debian: redis-server, redis-tools);
# the cell bench builds redis-cell's module with cargo the first time (crates.io).
# About 15 minutes on a 2-core VM, builds excluded.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=target/bench-report
mkdir -p "$out"
for bench in memory scripts redis cell http http_instructions attack verdicts lease; do
  echo "== cargo bench -p floodwall-bench --bench $bench"
  cargo bench -p floodwall-bench --bench "$bench" 2>&1 | tee "$out/$bench.txt"
done
# Instructions per check of the memory rows (callgrind; needs valgrind): BENCHMARKS.md §1.
echo "== MEMORY_INSTRUCTIONS=1 cargo bench -p floodwall-bench --bench memory"
MEMORY_INSTRUCTIONS=1 cargo bench -p floodwall-bench --bench memory 2>&1 | tee "$out/memory-instructions.txt"
# The scripts' instructions per call (callgrind; needs valgrind): BENCHMARKS.md §2.
echo "== SCRIPTS_INSTRUCTIONS=1 cargo bench -p floodwall-bench --bench scripts"
SCRIPTS_INSTRUCTIONS=1 cargo bench -p floodwall-bench --bench scripts 2>&1 \
  | tee "$out/scripts-instructions.txt"
echo "outputs in $out/"
