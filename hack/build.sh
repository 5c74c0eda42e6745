#!/usr/bin/env bash
# Builds every binary the local stack, the demo and the tests run, into _output/bin:
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl (k8s.io/kubernetes
#   at the go.mod version; the docs' commands run kubectl), the control plane of the newest release test/compat/servers.txt lists
#   (hack/build-server.sh), kwok, and Tailor's own binaries.
# Kubernetes binaries and kwok are cached by version under $TAILOR_CACHE, so a warm machine
# links them in seconds; Tailor's binaries rebuild incrementally from the Go build cache.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bin="$TAILOR_ROOT/_output/bin"
etc="$TAILOR_ROOT/_output/etc"
mkdir -p "$bin" "$etc"
cd "$TAILOR_ROOT"

k8s_version=$(module_version k8s.io/kubernetes)
etcd_version=$(module_version go.etcd.io/etcd/server/v3)
kube_cache="$TAILOR_CACHE/bin/kubernetes-$k8s_version-etcd-$etcd_version-$GO_VERSION"
kube_bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
# Only what the cache lacks is built, into a scratch directory, then moved in one binary at a
# time, so stacks running from the cache keep their binaries.
missing=()
for b in "${kube_bins[@]}"; do
  [[ -x "$kube_cache/$b" ]] || missing+=("k8s.io/kubernetes/cmd/$b")
done
if (( ${#missing[@]} > 0 )) || [[ ! -x "$kube_cache/etcd" ]]; then
  log "building Kubernetes $k8s_version and etcd $etcd_version binaries the cache lacks (first time: a few minutes)"
  mkdir -p "$TAILOR_CACHE/bin"
  scratch=$(mktemp -d "$TAILOR_CACHE/bin/.build-XXXXXX")
  if (( ${#missing[@]} > 0 )); then
    go build -ldflags "$(kube_ldflags "$k8s_version")" -o "$scratch/" "${missing[@]}"
  fi
  [[ -x "$kube_cache/etcd" ]] || go build -o "$scratch/etcd" go.etcd.io/etcd/server/v3
  mkdir -p "$kube_cache"
  for f in "$scratch"/*; do mv -f "$f" "$kube_cache/"; done
  rm -rf "$scratch"
fi
for b in "${kube_bins[@]}" etcd; do ln -sf "$kube_cache/$b" "$bin/$b"; done

kwok=$(go_tool kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_VERSION")
ln -sf "$kwok" "$bin/kwok"
# kwok needs stages that say how simulated nodes and pods change state; it ships them.
stages="$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage"
if [[ ! -d "$stages" ]]; then
  GOFLAGS=-mod=mod go mod download "sigs.k8s.io/kwok@$KWOK_VERSION"
fi
{
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
           pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    echo "---"
    cat "$stages/$f"
  done
} > "$etc/kwok-stages.yaml"

# The newest API server test/compat runs against, as make test does; make test-compat builds
# the others.
"$TAILOR_ROOT/hack/build-server.sh" "$(compat_servers | tail -n 1)"

log "building Tailor binaries"
# tailor-scheduler-rejecting is tailor-scheduler with a filter the planner does not model, for
# the tests of pods rejected on the nodes planned for them (test/rejectfilter).
go build -o "$bin/" ./plugin/cmd/tailor-scheduler ./provisioner/cmd/tailor-provisioner \
  ./provisioner/cmd/tailorctl ./test/localaws/cmd/tailor-local-aws ./test/localstack/cmd/tailor-dev \
  ./test/rejectfilter/cmd/tailor-scheduler-rejecting
