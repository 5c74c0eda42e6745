#!/usr/bin/env bash
# Planner benchmarks: every workload shape of test/workloads at 1k, 5k and 10k pods with
# the full 1,345-type catalog. Prints pods/s, nodes, $/hour, the ratio to the LP lower bound
# (x-bound) and allocations per plan. BENCH_TIME sets -benchtime (default 3x); BENCH
# narrows the benchmarks (a -bench regexp).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$TAILOR_ROOT"
go test -run '^$' -bench "${BENCH:-BenchmarkSolve}" -benchtime "${BENCH_TIME:-3x}" -benchmem ./provisioner/packing/
