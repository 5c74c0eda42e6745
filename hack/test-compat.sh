#!/usr/bin/env bash
# The compatibility matrix: test/compat's compact end-to-end set against every API server
# release test/compat/servers.txt lists (each built by hack/build-server.sh, cached by
# version), or those of VERSIONS (comma-separated). Prints the table of release × scenario
# and writes _output/bench/compat.json.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$TAILOR_ROOT"
"$TAILOR_ROOT/hack/build.sh"
versions=${VERSIONS:-$(compat_servers | paste -sd, -)}
for v in ${versions//,/ }; do
  "$TAILOR_ROOT/hack/build-server.sh" "$v"
done
out="$TAILOR_ROOT/_output/bench"
mkdir -p "$out"
rm -f "$out/compat.json" "$out/compat.txt"
log "running the compatibility set against Kubernetes $versions (log: $out/compat.log)"
status=0
TAILOR_COMPAT_VERSIONS=$versions BENCH_JSON="$out/compat.json" COMPAT_TABLE="$out/compat.txt" \
  go test -count=1 -v -run '^TestCompat$' -timeout 90m ./test/compat/ >"$out/compat.log" 2>&1 || status=$?
[[ -f "$out/compat.txt" ]] && cat "$out/compat.txt"
if (( status != 0 )); then
  grep -E -- '^\s*--- FAIL|_test.go:[0-9]+:' "$out/compat.log" | grep -v '^\s*--- PASS' | tail -40 >&2 || true
  log "the compatibility set failed; see $out/compat.log"
  exit 1
fi
log "wrote _output/bench/compat.json"
