#!/usr/bin/env bash
# Fails when a direct dependency has a newer release within the minor version go.mod pins
# (v1.72.1 when v1.72.2 is out): patch releases carry fixes and nothing else, so they are
# taken as they come. Kubernetes' own modules are skipped: go.mod pins them to one
# Kubernetes release (k8s.io/kubernetes and the staging modules' replace lines), and the
# release line moves as a whole. It asks the module proxy once per dependency, so it is
# `make verify-deps`, not part of `make verify`, which runs offline.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$TAILOR_ROOT"
# Modules released in step with Kubernetes: their minor is Kubernetes' minor.
pinned_by_kubernetes='^(k8s\.io/|sigs\.k8s\.io/scheduler-plugins$)'

stale=0 unknown=0 checked=0
while read -r path version; do
  [[ $path =~ $pinned_by_kubernetes ]] && continue
  minor=$(cut -d. -f1-2 <<<"$version")
  checked=$((checked + 1))
  # The query vX.Y selects the newest release with that prefix.
  if ! latest=$(go list -m -f '{{.Version}}' "$path@$minor" 2>/dev/null); then
    log "$path: the proxy lists no release of $minor; not checked"
    unknown=$((unknown + 1))
    continue
  fi
  [[ $latest == "$version" ]] && continue
  # A pre-release or pseudo-version (v1.36.12-0.2026…) is older than its release (v1.36.12),
  # which sort -V would put first.
  newest=$(printf '%s\n%s\n' "$version" "$latest" | sort -V | tail -n1)
  if [[ $newest == "$latest" || $latest == "${version%%-*}" ]]; then
    echo "$path $version: $latest is out"
    stale=$((stale + 1))
  fi
done < <(go list -m -f '{{if not (or .Main .Indirect)}}{{.Path}} {{.Version}}{{end}}' all)

log "$checked direct dependencies checked, $stale behind their latest patch release, $unknown not listed by the proxy"
(( stale == 0 ))
