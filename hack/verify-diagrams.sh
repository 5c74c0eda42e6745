#!/usr/bin/env bash
# Fails when a diagram of docs/ differs from what hack/update-diagrams.sh renders from its
# Graphviz source, or has no SVG at all, or when docs/concepts/packages.dot no longer matches
# the packages.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$TAILOR_ROOT"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/docs"
"$TAILOR_ROOT/hack/update-diagrams.sh" "$tmp/docs"
stale=0
while IFS= read -r svg; do
  if ! diff -u "docs/$svg" "$tmp/docs/$svg" >"$tmp/diff" 2>&1; then
    head -40 "$tmp/diff" >&2
    stale=1
  fi
done < <(cd "$tmp/docs" && find . -name '*.svg' -o -name packages.dot | sed 's|^\./||' | sort)
if (( stale )); then
  echo "docs/ diagrams are stale: run make generate (hack/update-diagrams.sh)" >&2
  exit 1
fi
