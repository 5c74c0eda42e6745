#!/usr/bin/env bash
# Fails when a Go file is not gofmt'ed.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$TAILOR_ROOT"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './_output/*'))
if [[ -n "$unformatted" ]]; then
  echo "not gofmt'ed (run gofmt -w):" >&2
  echo "$unformatted" >&2
  exit 1
fi
