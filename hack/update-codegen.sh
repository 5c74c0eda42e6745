#!/usr/bin/env bash
# Regenerates deepcopy, conversion and defaulting functions of the scheduler plugin args.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

root=${1:-$TAILOR_ROOT}
deepcopy=$(go_tool deepcopy-gen k8s.io/code-generator/cmd/deepcopy-gen "$CODE_GENERATOR_VERSION")
conversion=$(go_tool conversion-gen k8s.io/code-generator/cmd/conversion-gen "$CODE_GENERATOR_VERSION")
defaulter=$(go_tool defaulter-gen k8s.io/code-generator/cmd/defaulter-gen "$CODE_GENERATOR_VERSION")

cd "$TAILOR_ROOT"
pkg=github.com/tailor-autoscaler/tailor/plugin/apis/config
header=hack/boilerplate.go.txt
"$deepcopy" --go-header-file "$header" --output-file zz_generated.deepcopy.go "$pkg" "$pkg/v1"
"$conversion" --go-header-file "$header" --output-file zz_generated.conversion.go \
  --extra-peer-dirs k8s.io/apimachinery/pkg/apis/meta/v1 "$pkg/v1"
"$defaulter" --go-header-file "$header" --output-file zz_generated.defaults.go "$pkg/v1"
