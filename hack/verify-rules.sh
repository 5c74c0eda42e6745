#!/usr/bin/env bash
# Fails when the chart's alerting rules (templates/prometheusrule.yaml, rendered with every
# alert on) do not pass `promtool check rules`. test/alerts runs them on the local stack.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$TAILOR_ROOT"
helm=$(helm_tool)
prometheus=$(prometheus_tool)
kube_version=$(module_version k8s.io/kubernetes)
chart=manifests/charts/tailor

# The PrometheusRule's spec is a Prometheus rule file: its last key, spec, dedented.
"$helm" template tailor "$chart" --kube-version "$kube_version" --set prometheusRule.enabled=true \
  --show-only templates/prometheusrule.yaml |
  awk '/^spec:/ {inside = 1; next} inside {sub(/^  /, ""); print}' > "$tmp/rules.yaml"
"$prometheus/promtool" check rules "$tmp/rules.yaml"

