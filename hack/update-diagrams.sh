#!/usr/bin/env bash
# Renders the diagrams of docs/ from their Graphviz sources (hack/diagrams): every
# docs/**/*.dot to an SVG beside it. docs/concepts/packages.dot is itself written first, from
# go list and the layers table (hack/packagegraph). With an argument, writes the .dot and the
# SVGs under that directory instead, at their paths relative to docs/ (hack/verify-diagrams.sh
# does).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$TAILOR_ROOT"
out=${1:-docs}
mkdir -p "$out/concepts"
go run ./hack/packagegraph -root "$TAILOR_ROOT" -out "$(cd "$out" && pwd)/concepts/packages.dot"
go run ./hack/diagrams -root "$TAILOR_ROOT" ${1:+"$1"}
