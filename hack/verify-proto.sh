#!/usr/bin/env bash
# Fails when the checked-in generated gRPC code differs from what update-proto.sh makes.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$TAILOR_ROOT/hack/update-proto.sh" "$tmp"
cd "$tmp"
for f in $(find . -name '*.go'); do
  diff -u "$TAILOR_ROOT/proto/$f" "$f" || { echo "proto/$f is stale: run hack/update-proto.sh" >&2; exit 1; }
done
