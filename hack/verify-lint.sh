#!/usr/bin/env bash
# Lints the module: golangci-lint with the set of .golangci.yml, logcheck for structured,
# contextual logging (golangci-lint takes it only as a plugin, so it runs on its own), both
# at the versions hack/lib.sh pins and built from their Go modules, and hack/logstyle for
# log messages that start in lower case.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$TAILOR_ROOT"
golangci_lint=$(go_tool golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint "$GOLANGCI_LINT_VERSION")
logcheck=$(go_tool logcheck sigs.k8s.io/logtools/logcheck "$LOGCHECK_VERSION")

failed=0
"$golangci_lint" run ./... || failed=1
"$logcheck" -check-structured -check-contextual ./... || failed=1
go test -count=1 ./hack/logstyle/ || failed=1
if (( failed )); then
  echo "lint findings above: fix them (each names file, line and rule; .golangci.yml says why each linter is on)" >&2
  exit 1
fi
