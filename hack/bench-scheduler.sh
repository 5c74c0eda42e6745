#!/usr/bin/env bash
# Scheduler throughput on existing nodes: upstream's scheduler_perf runs every workload of
# test/schedperf/testdata/workloads.yaml (plain pods, topology spread, pod affinity) with
# kube-scheduler under Tailor's profile minus NodeProvisioning and with the profile as
# shipped, side by side, and writes pods/s, their ratio and the nodes left running pods to
# _output/bench/scheduler.json (the table to scheduler.txt, the run's log to scheduler.log,
# scheduler_perf's own data items, latencies per extension point and plugin among them, to
# scheduler_perf/). Each run starts etcd (_output/bin/etcd, from hack/build.sh), an API server
# and the scheduler in-process.
#   NODES                         nodes per workload (default 5000; 500 for a quick run)
#   ROUNDS                        runs of each workload and scheduler; medians are reported (default 1)
#   PERCENTAGE_OF_NODES_TO_SCORE  replaces the shipped profile's setting (0: adaptive)
#   BENCH                         narrows the workloads (a -bench regexp)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$TAILOR_ROOT"
if [[ ! -x _output/bin/etcd ]]; then
  hack/build.sh
fi
out="$TAILOR_ROOT/_output/bench"
mkdir -p "$out"
rm -rf "$out/scheduler.json" "$out/scheduler.txt" "$out/scheduler_perf"
nodes=${NODES:-5000}
log "benchmarking the scheduler at $nodes nodes (log: $out/scheduler.log)"
start=$(date +%s)
status=0
PATH="$TAILOR_ROOT/_output/bin:$PATH" go test -run '^$' -bench "${BENCH:-^BenchmarkSchedulerThroughput$}" -benchtime 1x \
  -timeout 6h ./test/schedperf/ -args \
  -nodes "$nodes" -rounds "${ROUNDS:-1}" -percentage-of-nodes-to-score "${PERCENTAGE_OF_NODES_TO_SCORE:-}" \
  -results-json "$out/scheduler.json" -results-table "$out/scheduler.txt" -data-items-dir "$out/scheduler_perf" >"$out/scheduler.log" 2>&1 || status=$?
# A workload that failed is left out of the table and the JSON.
[[ -f "$out/scheduler.txt" ]] && cat "$out/scheduler.txt"
if (( status != 0 )); then
  grep -E -- '^(--- FAIL|FAIL|panic)|FATAL ERROR|_test.go:[0-9]+:' "$out/scheduler.log" | tail -40 >&2 || true
  log "benchmark failed (exit status $status) after $(( $(date +%s) - start ))s; see $out/scheduler.log"
  exit 1
fi
log "done in $(( $(date +%s) - start ))s; wrote $out/scheduler.json"
