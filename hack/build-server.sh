#!/usr/bin/env bash
# Builds the control plane of another Kubernetes release than the one Tailor is built from,
# for the local stack's compatibility runs: hack/build-server.sh 1.37.2 builds
# kube-apiserver, kube-controller-manager and kube-scheduler (the cluster's default
# scheduler) from k8s.io/kubernetes v1.37.2 with its staging modules, in a module of their
# own under $TAILOR_CACHE/src, caches them by version as hack/build.sh does, and links them
# into _output/bin/kubernetes-1.37.2, where the local stack looks for them
# (KUBE_SERVER_VERSION=1.37.2). etcd stays the one hack/build.sh builds. The release of go.mod
# needs nothing: its binaries are in _output/bin.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ $# -ne 1 || ! $1 =~ ^1\.([0-9]+)\.([0-9]+)$ ]]; then
  echo "usage: hack/build-server.sh 1.MINOR.PATCH (for example 1.37.2)" >&2
  exit 2
fi
version=$1
minor=${BASH_REMATCH[1]}
patch=${BASH_REMATCH[2]}
cd "$TAILOR_ROOT"
if [[ "v$version" == "$(module_version k8s.io/kubernetes)" ]]; then
  log "Kubernetes $version is the release go.mod pins: its binaries are hack/build.sh's"
  exit 0
fi
cache="$TAILOR_CACHE/bin/kubernetes-v$version-$GO_VERSION"
bins=(kube-apiserver kube-controller-manager kube-scheduler)
missing=()
for b in "${bins[@]}"; do
  [[ -x "$cache/$b" ]] || missing+=("k8s.io/kubernetes/cmd/$b")
done
if (( ${#missing[@]} > 0 )); then
  log "building Kubernetes $version's control plane the cache lacks (first time: several minutes)"
  src="$TAILOR_CACHE/src/kubernetes-v$version"
  mkdir -p "$src"
  export GOFLAGS=-mod=mod
  if [[ ! -f "$src/go.sum" ]]; then
    rm -f "$src/go.mod"
    (cd "$src" && go mod init tailor.local/kubernetes-server >/dev/null 2>&1)
    if ! go mod download "k8s.io/kubernetes@v$version" 2>/dev/null; then
      echo "build-server: k8s.io/kubernetes@v$version cannot be downloaded from the module proxy" >&2
      exit 1
    fi
    kube_dir="$(go env GOMODCACHE)/k8s.io/kubernetes@v$version"
    edits=(-require="k8s.io/kubernetes@v$version")
    for m in $(staging_modules "$kube_dir/go.mod"); do
      edits+=(-replace="$m=$m@v0.$minor.$patch")
    done
    (cd "$src" && go mod edit "${edits[@]}" && for b in "${bins[@]}"; do go get -tool "k8s.io/kubernetes/cmd/$b@v$version" >/dev/null; done && go mod tidy)
  fi
  scratch=$(mktemp -d "$TAILOR_CACHE/bin/.build-XXXXXX")
  (cd "$src" && go build -ldflags "$(kube_ldflags "v$version")" -o "$scratch/" "${missing[@]}")
  mkdir -p "$cache"
  for f in "$scratch"/*; do mv -f "$f" "$cache/"; done
  rm -rf "$scratch"
fi
out="$TAILOR_ROOT/_output/bin/kubernetes-$version"
mkdir -p "$out"
for b in "${bins[@]}"; do ln -sf "$cache/$b" "$out/$b"; done
log "Kubernetes $version's control plane is in _output/bin/kubernetes-$version"
