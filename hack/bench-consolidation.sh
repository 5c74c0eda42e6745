#!/usr/bin/env bash
# Consolidation's growth curve, in memory: per workload (webmix, diverse) and size (about 500,
# 1,000, 2,500 and 5,000 nodes once two pods of three are deleted), the time of the first
# decision, which plans over every node, and of the passes after it, and the cost once
# consolidation converges against a fresh plan of the pods left. Prints a table and writes
# _output/bench/consolidation.json. NODES (a comma-separated list), SHAPES and DECISIONS (a
# cap on the decisions per run) narrow it; DAEMONSETS=eks runs the EKS add-ons' DaemonSets on
# every node.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$TAILOR_ROOT"
go_bench_json consolidation BenchmarkConsolidationGrowth ./provisioner/disruption/ 6h
