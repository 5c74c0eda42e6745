#!/usr/bin/env bash
# Fails when a package imports one from a layer above its own, or sits at no layer: the
# layers and their packages are the table in hack/layers/layers.go.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$TAILOR_ROOT"
if ! go test -count=1 ./hack/layers/; then
  echo "a package imports one above its layer, or has none: see the table in hack/layers/layers.go" >&2
  exit 1
fi
