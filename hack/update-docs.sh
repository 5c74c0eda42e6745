#!/usr/bin/env bash
# Regenerates the reference pages of docs/reference from the code (hack/docgen): flags,
# metrics, CRD fields, scheduler args, and the names of events, conditions, annotations and
# labels. With an argument, writes them there instead (hack/verify-docs.sh does).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$TAILOR_ROOT"
go run ./hack/docgen -root "$TAILOR_ROOT" -out "${1:-$TAILOR_ROOT/docs/reference}"
