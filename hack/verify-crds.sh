#!/usr/bin/env bash
# Fails when the checked-in CRDs or deepcopy functions differ from what update-crds.sh makes.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$TAILOR_ROOT"
find provisioner/apis -name zz_generated.deepcopy.go -exec cp --parents {} "$tmp" \;
"$TAILOR_ROOT/hack/update-crds.sh" "$tmp/crds"
diff -ru manifests/crds "$tmp/crds" || { echo "CRDs are stale: run hack/update-crds.sh" >&2; exit 1; }
while read -r f; do
  diff -u "$tmp/$f" "$f" || { echo "$f is stale: run hack/update-crds.sh" >&2; exit 1; }
done < <(find provisioner/apis -name zz_generated.deepcopy.go)
