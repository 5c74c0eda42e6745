#!/usr/bin/env bash
# The provisioner's share of pending → NodeClaim under a burst: PODS webmix pods (10,000 by
# default) created unbound on a real API server and handed over at once, planned in one batch
# whose NodeClaims are written through a client limited to each rate of QPS (200, the
# sidecar's --kube-api-qps default, and 1000 by default). Prints a table and writes
# _output/bench/burst.json.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$TAILOR_ROOT"
go_bench_json burst BenchmarkBurstToNodeClaims ./provisioner/provisioning/ 1h
