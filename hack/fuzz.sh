#!/usr/bin/env bash
# Runs every Go fuzz target of the repository for $FUZZTIME (default 30s), one after another,
# then prints a table: package, target, executions, new corpus entries, crashers. A crasher
# is written to the package's testdata/fuzz/<target>/ by go test; commit it with the fix.
# Exits non-zero if any target failed. FUZZ_PARALLEL= sets the fuzzing workers per target
# (go test's -parallel; GOMAXPROCS by default).

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$TAILOR_ROOT"

fuzztime=${FUZZTIME:-30s}
parallel=()
[[ -n "${FUZZ_PARALLEL:-}" ]] && parallel=(-parallel "$FUZZ_PARALLEL")

# Packages whose tests define a fuzz target, then the targets go test lists in each.
mapfile -t dirs < <(grep -rl --include='*_test.go' -E '^func Fuzz[A-Z0-9_]' . | grep -v '^./_output/' | xargs -r -n1 dirname | sort -u)
if (( ${#dirs[@]} == 0 )); then
  log "no fuzz targets found"
  exit 1
fi
targets=()
for dir in "${dirs[@]}"; do
  pkg=$(go list "$dir")
  listed=$(go test -list '^Fuzz' "$dir")
  for name in $listed; do
    [[ "$name" == Fuzz* ]] && targets+=("$pkg $name")
  done
done

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
rows=()
failed=0
for entry in "${targets[@]}"; do
  read -r pkg name <<<"$entry"
  log "fuzzing $pkg $name for $fuzztime"
  out="$logs/$name.log"
  status=ok
  if ! go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" "${parallel[@]}" "$pkg" >"$out" 2>&1; then
    status=FAIL
    failed=$((failed + 1))
    tail -n 40 "$out" >&2
  fi
  # The last progress line carries the totals: "execs: N (…/sec), new interesting: M (total: K)".
  last=$(grep -E 'fuzz: elapsed: .*execs: [0-9]+' "$out" | tail -n 1 || true)
  execs=$(sed -nE 's/.*execs: ([0-9]+).*/\1/p' <<<"$last")
  interesting=$(sed -nE 's/.*new interesting: ([0-9]+).*/\1/p' <<<"$last")
  crashers=$(grep -c 'Failing input written to' "$out" || true)
  rows+=("${pkg#github.com/tailor-autoscaler/tailor/}|$name|${execs:-0}|${interesting:-0}|$crashers|$status")
done

printf '\n%-40s %-28s %12s %8s %9s %s\n' package target execs new crashers status
for row in "${rows[@]}"; do
  IFS='|' read -r pkg name execs interesting crashers status <<<"$row"
  printf '%-40s %-28s %12s %8s %9s %s\n' "$pkg" "$name" "$execs" "$interesting" "$crashers" "$status"
done
printf '\nfuzz: %d targets, %s each, %d failed\n' "${#rows[@]}" "$fuzztime" "$failed"
(( failed == 0 ))
