package v1

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/tailor-autoscaler/tailor/provisioner/apis/internal/jsonhash"
)

// NodePoolHashVersion is the version of NodePool.Hash. It changes whenever the same
// template may hash differently: a field enters or leaves the hash, or a hashed field gets
// a new default. NodeClaims stamped with another version are stamped again with the
// current hash rather than drifted, so that upgrading Tailor never replaces nodes by itself.
const NodePoolHashVersion = "v1"

// Hash identifies the static fields of the NodePool's template: its labels and annotations,
// taints, startup taints, nodeClassRef, expireAfter and terminationGracePeriod. A NodeClaim
// made from a template that hashes differently has drifted. Requirements are left out: they
// drift a node only when its labels no longer satisfy them. Taints count as sets, so that
// reordering them changes nothing.
func (in *NodePool) Hash() string {
	tmpl := in.Spec.Template.DeepCopy()
	tmpl.Spec.Requirements = nil
	sortTaints(tmpl.Spec.Taints)
	sortTaints(tmpl.Spec.StartupTaints)
	return jsonhash.Sum(tmpl)
}

func sortTaints(taints []corev1.Taint) {
	slices.SortFunc(taints, func(a, b corev1.Taint) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Value, b.Value), cmp.Compare(a.Effect, b.Effect))
	})
}
