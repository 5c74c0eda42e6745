#!/usr/bin/env bash
# Moves Tailor to another Kubernetes release in one step: hack/bump-kubernetes.sh 1.35.4
# (make bump-kubernetes VERSION=1.35.4). It sets
#   - go.mod: k8s.io/kubernetes vVERSION and every staging module of that release at
#     v0.MINOR.PATCH (replace lines and requires); sigs.k8s.io/scheduler-plugins
#     ($SCHEDULER_PLUGINS_VERSION, else the newest v0.MINOR.* the module proxy serves,
#     -devel builds included); controller-runtime (the newest v0.<MINOR-12>.*); etcd (the
#     release kubeadm of that Kubernetes names);
#   - hack/lib.sh: controller-tools (the newest v0.<MINOR-15>.*) and code-generator;
#   - hack/vulns-accepted.txt's k8s.io/kubernetes entries;
#   - the chart's kubeVersion, and "Kubernetes 1.N", "kube-scheduler 1.N" and the kubeVersion
#     quoted in the chart, the README, docs/ and the code's comments;
# then tidies the module and regenerates (make generate). What is derived from the module
# graph follows by itself: the local stack's binaries (cached by version), the version the
# local endpoint serves (EKS, AMIs, SSM parameters), scheduler_perf, the images. It ends by
# listing what still names the old minor, for a reader to judge: a sentence about a past
# release is not a pin.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ $# -ne 1 || ! $1 =~ ^1\.([0-9]+)\.([0-9]+)$ ]]; then
  echo "usage: hack/bump-kubernetes.sh 1.MINOR.PATCH (for example 1.35.4)" >&2
  exit 2
fi
version=$1
minor=${BASH_REMATCH[1]}
patch=${BASH_REMATCH[2]}
staging="v0.$minor.$patch"
cd "$TAILOR_ROOT"
old=$(module_version k8s.io/kubernetes)
old_minor=$(cut -d. -f2 <<<"$old")
log "moving from Kubernetes $old to v$version"

export GOFLAGS=-mod=mod
modcache=$(go env GOMODCACHE)

# fetch MODULE VERSION downloads it or fails naming it: the proxy here is a partial mirror.
fetch() {
  if ! go mod download "$1@$2" 2>/dev/null; then
    echo "bump-kubernetes: $1@$2 cannot be downloaded from the module proxy" >&2
    return 1
  fi
}

# newest MODULE PREFIX prints the newest version of MODULE that starts with PREFIX and
# downloads, or nothing.
newest() {
  local v
  for v in $(go list -m -versions "$1" 2>/dev/null | tr ' ' '\n' | tail -n +2 | grep -F "$2" | sort -rV); do
    if go mod download "$1@$v" 2>/dev/null; then
      echo "$v"
      return
    fi
  done
}

fetch k8s.io/kubernetes "v$version"
kube_dir="$modcache/k8s.io/kubernetes@v$version"
# The staging modules the release depends on: those its go.mod replaces with its own tree
# and requires (the sample modules it only holds are left out).
mapfile -t modules < <(staging_modules "$kube_dir/go.mod")
for m in "${modules[@]}"; do
  fetch "$m" "$staging"
done

plugins=${SCHEDULER_PLUGINS_VERSION:-}
if [[ -z $plugins ]]; then
  plugins=$(newest sigs.k8s.io/scheduler-plugins "v0.$minor.")
fi
if [[ -z $plugins ]]; then
  for v in "$staging" "$staging-devel"; do
    if go mod download "sigs.k8s.io/scheduler-plugins@$v" 2>/dev/null; then plugins=$v; break; fi
  done
fi
if [[ -z $plugins ]]; then
  echo "bump-kubernetes: no sigs.k8s.io/scheduler-plugins release for Kubernetes 1.$minor is served (tried v0.$minor.*, $staging, $staging-devel); Coscheduling and CapacityScheduling come from it: set SCHEDULER_PLUGINS_VERSION to one built for 1.$minor" >&2
  exit 1
fi
runtime=$(newest sigs.k8s.io/controller-runtime "v0.$((minor - 12)).")
tools=$(newest sigs.k8s.io/controller-tools "v0.$((minor - 15)).")
etcd=$(sed -n 's/.*DefaultEtcdVersion *= *"\([0-9.]*\)-[0-9]*".*/v\1/p' "$kube_dir/cmd/kubeadm/app/constants/constants.go")
for what in "controller-runtime:$runtime" "controller-tools:$tools" "etcd:$etcd"; do
  if [[ -z ${what#*:} ]]; then
    echo "bump-kubernetes: found no ${what%%:*} release for Kubernetes 1.$minor" >&2
    exit 1
  fi
done
fetch go.etcd.io/etcd/server/v3 "$etcd"
log "scheduler-plugins $plugins, controller-runtime $runtime, controller-tools $tools, etcd $etcd"

edits=(-require="k8s.io/kubernetes@v$version" -require="sigs.k8s.io/scheduler-plugins@$plugins"
  -require="sigs.k8s.io/controller-runtime@$runtime" -require="go.etcd.io/etcd/server/v3@$etcd")
for m in "${modules[@]}"; do
  edits+=(-replace="$m=$m@$staging")
done
# Requires of staging modules move with their replacements, so go.mod reads what is built.
while read -r m; do
  [[ " ${modules[*]} " == *" $m "* ]] && edits+=(-require="$m@$staging")
done < <(go list -m -f '{{if not .Indirect}}{{.Path}}{{end}}' all 2>/dev/null | grep '^k8s.io/')
# Replaces of k8s.io modules the release no longer depends on go.
while read -r m; do
  [[ " ${modules[*]} " == *" $m "* ]] || edits+=(-dropreplace="$m")
done < <(awk '{sub(/^replace /, "")} $2 == "=>" && $1 ~ /^k8s\.io\// {print $1}' go.mod)
go mod edit "${edits[@]}"
go mod tidy

sed -i -e "s/^CONTROLLER_TOOLS_VERSION=.*/CONTROLLER_TOOLS_VERSION=$tools/" \
  -e "s/^CODE_GENERATOR_VERSION=.*/CODE_GENERATOR_VERSION=$staging/" hack/lib.sh
sed -i "s/^kubeVersion: .*/kubeVersion: \">=1.$minor.0-0\"/" manifests/charts/tailor/Chart.yaml
# Accepted vulnerabilities without a fix are named by version; make verify says which the new
# release no longer has.
sed -i "s|k8s.io/kubernetes@$old |k8s.io/kubernetes@v$version |" hack/vulns-accepted.txt
mapfile -t prose < <(git ls-files README.md 'docs/*.md' 'manifests/charts/*' '*.go' | grep -v -e '_test.go$' -e '^test/.*testdata/')
sed -i -e "s/\bKubernetes 1\.$old_minor\b/Kubernetes 1.$minor/g" -e "s/\bkube-scheduler 1\.$old_minor\b/kube-scheduler 1.$minor/g" \
  -e "s/\bKubernetes 1\.$old_minor or newer/Kubernetes 1.$minor or newer/g" \
  -e "s/kubeVersion: >=1\.$old_minor\.0-0/kubeVersion: >=1.$minor.0-0/g" "${prose[@]}"

log "regenerating"
make --no-print-directory generate

log "still naming 1.$old_minor (judge each: a pin to move, or a fact about that release):"
git grep -n -E "\b1\.$old_minor\b|v0\.$old_minor\." -- ':!go.sum' ':!*.json' || true
log "now on Kubernetes v$version; run make test"
