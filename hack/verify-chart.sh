#!/usr/bin/env bash
# Fails when the chart's crds/ or manifests/rendered/tailor.yaml differ from what
# update-chart.sh makes, or when `helm lint --strict` finds anything, with default values and
# with every optional part on (ci/all-values.yaml).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$TAILOR_ROOT"
mkdir -p "$tmp/manifests/charts"
cp -r manifests/crds "$tmp/manifests/crds"
cp -r manifests/charts/tailor "$tmp/manifests/charts/tailor"
"$TAILOR_ROOT/hack/update-chart.sh" "$tmp"
status=0
diff -ru manifests/charts/tailor/crds "$tmp/manifests/charts/tailor/crds" || status=1
diff -u manifests/rendered/tailor.yaml "$tmp/manifests/rendered/tailor.yaml" || status=1
if (( status != 0 )); then
  echo "the chart's generated files are stale: run hack/update-chart.sh" >&2
  exit 1
fi

helm=$(helm_tool)
kube_version=$(module_version k8s.io/kubernetes)
"$helm" lint --strict --kube-version "$kube_version" manifests/charts/tailor
"$helm" lint --strict --kube-version "$kube_version" --values manifests/charts/tailor/ci/all-values.yaml manifests/charts/tailor
