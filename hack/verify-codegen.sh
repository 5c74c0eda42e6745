#!/usr/bin/env bash
# Fails when the generated plugin-args code differs from what update-codegen.sh makes.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$TAILOR_ROOT"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
files=$(find plugin/apis -name 'zz_generated.*.go')
for f in $files; do mkdir -p "$tmp/$(dirname "$f")"; cp "$f" "$tmp/$f"; done
"$TAILOR_ROOT/hack/update-codegen.sh"
status=0
for f in $files; do
  if ! diff -u "$tmp/$f" "$f"; then
    echo "$f is stale: run hack/update-codegen.sh" >&2
    status=1
  fi
  cp "$tmp/$f" "$f"
done
exit $status
