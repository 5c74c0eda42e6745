#!/usr/bin/env bash
# Fails when a reference page of docs/reference differs from what hack/update-docs.sh writes.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$TAILOR_ROOT"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$TAILOR_ROOT/hack/update-docs.sh" "$tmp"
if ! diff -ru "$TAILOR_ROOT/docs/reference" "$tmp" >"$tmp.diff" 2>&1; then
  head -40 "$tmp.diff" >&2
  rm -f "$tmp.diff"
  echo "docs/reference is stale: run make generate (hack/update-docs.sh)" >&2
  exit 1
fi
rm -f "$tmp.diff"
