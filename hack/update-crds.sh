#!/usr/bin/env bash
# Regenerates deepcopy functions of the API types and the CRD manifests from them, and
# copies in the CRDs of the scheduler-plugins kinds tailor-scheduler uses.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

controller_gen=$(go_tool controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen "$CONTROLLER_TOOLS_VERSION")
out=${1:-$TAILOR_ROOT/manifests/crds}

cd "$TAILOR_ROOT"
"$controller_gen" object:headerFile=hack/boilerplate.go.txt paths=./provisioner/apis/...
rm -rf "$out" && mkdir -p "$out"
"$controller_gen" crd:allowDangerousTypes=false paths=./provisioner/apis/... output:crd:artifacts:config="$out"
# Coscheduling's PodGroup (gangs) and CapacityScheduling's ElasticQuota, as the
# scheduler-plugins release in go.mod ships them.
plugins=$(go list -m -f '{{.Dir}}' sigs.k8s.io/scheduler-plugins)
for crd in podgroups elasticquotas; do
  cp "$plugins/config/crd/bases/scheduling.x-k8s.io_$crd.yaml" "$out/"
  chmod 644 "$out/scheduling.x-k8s.io_$crd.yaml"
done
