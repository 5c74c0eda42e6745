// Package cloudprovider is the contract between Tailor's controllers and the cloud that
// launches instances: what instance types exist at what price, and launching,
// finding and terminating instances for NodeClaims.
package cloudprovider

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// CloudProvider launches and terminates instances for NodeClaims.
type CloudProvider interface {
	// Create launches an instance satisfying the NodeClaim's requirements and returns a copy
	// of the NodeClaim with what was launched: status.providerID, status.nodeName,
	// status.imageID, status.capacity and status.allocatable, and the labels of the chosen
	// offering (instance type, zone, capacity type). It returns an InsufficientCapacityError
	// when no allowed offering could be launched.
	Create(ctx context.Context, nodeClaim *karpv1.NodeClaim) (*karpv1.NodeClaim, error)
	// Delete terminates the NodeClaim's instance. It returns a NodeClaimNotFoundError once the
	// instance is terminated or gone, so callers know they may drop their finalizer.
	Delete(ctx context.Context, nodeClaim *karpv1.NodeClaim) error
	// Get returns the NodeClaim view of the instance with this provider ID, or a
	// NodeClaimNotFoundError when it is gone or terminated.
	Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error)
	// List returns every live instance this cluster launched, as NodeClaims (status and
	// labels filled, the owning NodeClaim's name in metadata.name when known).
	List(ctx context.Context) ([]*karpv1.NodeClaim, error)
	// InstanceTypes returns the instance types the NodePool's node class can launch, with
	// offerings and prices. It returns a NodeClassNotReadyError when the node class cannot
	// be used yet.
	InstanceTypes(ctx context.Context, nodePool *karpv1.NodePool) ([]*InstanceType, error)
}

// InstanceType is a kind of machine, as the planner sees it.
type InstanceType struct {
	// Name is the instance type name, for example m7i.large.
	Name string
	// Labels are the node labels every instance of this type has: instance type,
	// architecture, OS and the karpenter.k8s.aws/instance-* descriptors. Zone and capacity
	// type vary by offering and are not here.
	Labels map[string]string
	// Capacity is what the kubelet will report: vCPUs, memory net of VM overhead, pods,
	// ephemeral storage and accelerators.
	Capacity corev1.ResourceList
	// Overhead is what the kubelet reserves out of capacity (kube-reserved, system-reserved
	// and hard eviction thresholds). Allocatable is Capacity minus Overhead.
	Overhead corev1.ResourceList
	// Offerings are the zones and capacity types the type is sold in, with prices.
	Offerings []Offering
}

// Offering is an instance type sold in a zone with a capacity type.
type Offering struct {
	// Zone is the availability zone, for example us-east-1a.
	Zone string
	// CapacityType is karpv1.CapacityTypeSpot or karpv1.CapacityTypeOnDemand.
	CapacityType string
	// Price is the hourly price in USD.
	Price float64
	// Available is false while the offering is known to be out of capacity.
	Available bool
}

// Allocatable is what pods may request on a node of this type.
func (t *InstanceType) Allocatable() corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range t.Capacity {
		q = q.DeepCopy()
		if o, ok := t.Overhead[name]; ok {
			q.Sub(o)
			if q.Sign() < 0 {
				q = resource.Quantity{}
			}
		}
		out[name] = q
	}
	return out
}

// CheapestOffering returns the cheapest available offering that keep accepts, and false
// when there is none.
func (t *InstanceType) CheapestOffering(keep func(Offering) bool) (Offering, bool) {
	var best Offering
	found := false
	for _, o := range t.Offerings {
		if !o.Available || (keep != nil && !keep(o)) {
			continue
		}
		if !found || o.Price < best.Price {
			best, found = o, true
		}
	}
	return best, found
}
