#!/usr/bin/env bash
# Shared helpers for hack/ scripts: where things are cached, how tools are installed.
# Source it; do not run it.

set -o errexit -o nounset -o pipefail

TAILOR_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Built binaries and tools are cached outside the checkout, keyed by version, so that a
# fresh clone on a machine that built them before starts in seconds.
TAILOR_CACHE=${TAILOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tailor}
# Tailor is built with the Go toolchain go.mod's toolchain line names, which the go command
# fetches from the module proxy once (a machine's own Go ignores that line by default).
GOTOOLCHAIN=$(awk '/^toolchain /{print $2}' "$TAILOR_ROOT/go.mod")
export GOTOOLCHAIN
GO_VERSION=$(go env GOVERSION)

# Pinned tool versions. Kubernetes itself is pinned by go.mod.
CONTROLLER_TOOLS_VERSION=v0.20.1
CODE_GENERATOR_VERSION=v0.35.4
PROTOC_GEN_GO_VERSION=v1.36.11
PROTOC_GEN_GO_GRPC_VERSION=v1.5.1
KWOK_VERSION=v0.8.0
GOLANGCI_LINT_VERSION=v2.15.0
LOGCHECK_VERSION=v0.11.0
# Helm renders and lints the chart; built from its Go module, never downloaded prebuilt.
HELM_VERSION=v3.21.4
# Prometheus and promtool check the chart's alerting rules and run them in test/alerts; built
# from Prometheus' Go module (its v0.3xx module tags are the 3.x releases), never downloaded.
PROMETHEUS_VERSION=v0.316.0
# govulncheck and the Go vulnerability database it reads, both from their Go modules: the
# database is built from golang.org/x/vulndb's OSV reports at a pinned commit, so make verify
# needs no route to vuln.go.dev and gives the same answer until the pin moves.
GOVULNCHECK_VERSION=v1.9.0
VULNDB_VERSION=v0.0.0-20261105234957-e22db6528018

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# module_version MODULE prints the version go.mod selects for MODULE.
module_version() {
  (cd "$TAILOR_ROOT" && go list -m -f '{{.Version}}' "$1")
}

# go_tool NAME PACKAGE VERSION installs PACKAGE@VERSION once and prints the binary's path.
go_tool() {
  local name=$1 pkg=$2 version=$3
  local dir="$TAILOR_CACHE/tools/$name-$version-$GO_VERSION"
  if [[ ! -x "$dir/$name" ]]; then
    log "installing $name $version"
    mkdir -p "$dir"
    GOBIN="$dir" GOFLAGS=-mod=mod go install "$pkg@$version" >&2
  fi
  printf '%s\n' "$dir/$name"
}

# helm_tool installs the pinned Helm once, built from its Go module (no prebuilt binary is
# downloaded), and prints the binary's path. The version is stamped in as Helm's own release
# build does, so `helm version` tells which one it is.
helm_tool() {
  local dir="$TAILOR_CACHE/tools/helm-$HELM_VERSION-$GO_VERSION"
  if [[ ! -x "$dir/helm" ]]; then
    log "building helm $HELM_VERSION (first time: about a minute)"
    mkdir -p "$dir"
    GOBIN="$dir" GOFLAGS=-mod=mod go install -ldflags "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
      "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
  fi
  printf '%s\n' "$dir/helm"
}

# prometheus_tool installs the pinned prometheus and promtool once, built from Prometheus'
# Go module (no prebuilt binary is downloaded), and prints the directory that holds both.
# The first build compiles Prometheus' dependencies: several minutes on a loaded machine.
prometheus_tool() {
  local dir="$TAILOR_CACHE/tools/prometheus-$PROMETHEUS_VERSION-$GO_VERSION"
  if [[ ! -x "$dir/prometheus" || ! -x "$dir/promtool" ]]; then
    log "building prometheus and promtool $PROMETHEUS_VERSION (first time: several minutes)"
    mkdir -p "$dir"
    GOBIN="$dir" GOFLAGS=-mod=mod go install \
      "github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_VERSION" \
      "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION" >&2
  fi
  printf '%s\n' "$dir"
}

# vulndb_dir builds the pinned Go vulnerability database once, in govulncheck's v1 layout
# (index/db.json, index/modules.json, ID/<id>.json) from the OSV reports in
# golang.org/x/vulndb's data/osv, with that module's own indexdb command, and prints its directory.
vulndb_dir() {
  local dir="$TAILOR_CACHE/vulndb/$VULNDB_VERSION"
  if [[ ! -f "$dir/index/db.json" ]]; then
    log "building the Go vulnerability database $VULNDB_VERSION (first time: about a minute)"
    local indexdb src scratch
    indexdb=$(go_tool indexdb golang.org/x/vulndb/cmd/indexdb "$VULNDB_VERSION")
    src=$(GOFLAGS=-mod=mod go mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" | awk -F'"' '$2 == "Dir" {print $4}')
    mkdir -p "$TAILOR_CACHE/vulndb"
    scratch=$(mktemp -d "$TAILOR_CACHE/vulndb/.build-XXXXXX")
    "$indexdb" -vulns "$src/data/osv" -out "$scratch" >&2
    rm -rf "$dir"
    mv "$scratch" "$dir"
  fi
  printf '%s\n' "$dir"
}

# ensure_command CMD DEBIAN_PACKAGE installs the Debian package when CMD is missing.
ensure_command() {
  local cmd=$1 pkg=$2
  command -v "$cmd" >/dev/null 2>&1 && return 0
  log "installing Debian package $pkg (for $cmd)"
  local sudo=""
  [[ $(id -u) -eq 0 ]] || sudo=sudo
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$pkg" >&2
}

# go_bench_json NAME BENCHMARK PACKAGE TIMEOUT runs one Go benchmark once, on the shared
# workloads, with BENCH_JSON naming _output/bench/NAME.json, where it writes its figures
# (package test/benchout).
go_bench_json() {
  local name=$1 bench=$2 pkg=$3 timeout=$4
  mkdir -p "$TAILOR_ROOT/_output/bench"
  BENCH_JSON="$TAILOR_ROOT/_output/bench/$name.json" \
    go test -run '^$' -bench "^$bench\$" -benchtime 1x -timeout "$timeout" "$pkg"
  log "wrote _output/bench/$name.json"
}

# staging_modules GO_MOD prints the staging modules a k8s.io/kubernetes go.mod depends on:
# those it replaces with its own staging tree and requires.
staging_modules() {
  local replaced required
  replaced=$(awk '$2 == "=>" && $3 ~ /^\.\/staging\/src\// {print $1}' "$1" | sort -u)
  required=$(awk '/^require \(/{r=1; next} r && /^\)/{r=0} r {print $1} /^require [^(]/{print $2}' "$1" | sort -u)
  comm -12 <(echo "$replaced") <(echo "$required")
}

# compat_servers prints the API server releases test/compat runs against, oldest first.
compat_servers() {
  grep -v -e '^#' -e '^[[:space:]]*$' "$TAILOR_ROOT/test/compat/servers.txt"
}

# kube_ldflags stamps the Kubernetes version into binaries built from modules, which
# otherwise report v0.0.0-master (kubectl and kwok refuse to parse that).
kube_ldflags() {
  local v=$1 minor
  minor=$(cut -d. -f2 <<<"$v")
  local f=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    f+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  printf '%s\n' "$f"
}
