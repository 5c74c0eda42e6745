#!/usr/bin/env bash
# The whole test suite, as CI runs it: build, verify generated code, then every Go test:
# unit tests, integration tests on a real API server (envtest) with the real scheduler, and
# end-to-end tests that run the local stack.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$TAILOR_ROOT"
start=$(date +%s)
"$TAILOR_ROOT/hack/build.sh"
log "verifying generated code"
make --no-print-directory verify
# test/alerts runs Prometheus against the local stack: built once from its Go module.
TAILOR_PROMETHEUS_DIR=$(prometheus_tool)
export TAILOR_PROMETHEUS_DIR
log "running tests"
go test -count=1 -timeout 30m ./...
log "all tests passed in $(( $(date +%s) - start ))s"
