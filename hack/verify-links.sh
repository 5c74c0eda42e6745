#!/usr/bin/env bash
# Fails when a relative link or an anchor in the repository's Markdown points nowhere.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$TAILOR_ROOT"
go run ./hack/linkcheck
