#!/usr/bin/env bash
# Renders the diagrams of docs/ from their Graphviz sources (hack/diagrams): every
# docs/**/*.dot to an SVG beside it. With an argument, writes the SVGs under that directory
# instead, at their paths relative to docs/ (hack/verify-diagrams.sh does).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$TAILOR_ROOT"
go run ./hack/diagrams -root "$TAILOR_ROOT" ${1:+"$1"}
