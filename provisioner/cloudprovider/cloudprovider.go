// Package cloudprovider is the contract between Tailor's controllers and the cloud that
// launches instances: what instance types exist at what price, and launching,
// finding and terminating instances for NodeClaims.
package cloudprovider

import (
	"context"
	"slices"

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
	// Adopt returns, as Create would, the instance already launched for the NodeClaim, or
	// nil when there is none; it launches nothing.
	Adopt(ctx context.Context, nodeClaim *karpv1.NodeClaim) (*karpv1.NodeClaim, error)
	// Delete terminates the NodeClaim's instance: the one its provider ID names, or, before
	// one is recorded, the one launched for it (as Adopt finds it). It returns a
	// NodeClaimNotFoundError once the instance is terminated or gone, so callers know they
	// may drop their finalizer.
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
	// ZoneID is the zone's ID, for example use1-az1: the same physical zone in every
	// account, where names map to zones differently per account. Empty when unknown.
	ZoneID string
	// CapacityType is karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand or
	// karpv1.CapacityTypeReserved.
	CapacityType string
	// ReservationID and ReservationType name the capacity reservation of a reserved
	// offering (one offering per reservation); empty for the others.
	ReservationID, ReservationType string
	// ReservedInstances is how many more instances a reserved offering's reservation takes,
	// less those planned or launched into it since it was last described. The planner
	// never plans more nodes into it; 0 for the other capacity types.
	ReservedInstances int
	// Price is the instance's hourly price in USD.
	Price float64
	// NodeCosts are what a node of this offering costs besides its instance.
	NodeCosts NodeCosts
	// Available is false while the offering is known to be out of capacity.
	Available bool
}

// NodePrice is what a node of the offering costs per hour: its instance and its NodeCosts.
func (o Offering) NodePrice() float64 { return o.Price + o.NodeCosts.Total() }

// offeringLabelKeys are the labels whose values vary between the offerings of one instance
// type: the keys Offering.Label answers from the offering.
var offeringLabelKeys = [...]string{
	corev1.LabelTopologyZone, karpv1.ZoneIDLabelKey, karpv1.CapacityTypeLabelKey,
	karpv1.CapacityReservationIDLabelKey, karpv1.CapacityReservationTypeLabelKey,
}

// Label is the value of a label that a node launched from the offering has: its zone, zone
// ID, capacity type and capacity reservation (absent when empty, zone and capacity type
// aside), or for any other key the value in others, the labels the node has whatever its
// offering. It is on the planner's hot path and allocates nothing.
func (o Offering) Label(key string, others map[string]string) (string, bool) {
	switch key {
	case corev1.LabelTopologyZone:
		return o.Zone, true
	case karpv1.ZoneIDLabelKey:
		return o.ZoneID, o.ZoneID != ""
	case karpv1.CapacityTypeLabelKey:
		return o.CapacityType, true
	case karpv1.CapacityReservationIDLabelKey:
		return o.ReservationID, o.ReservationID != ""
	case karpv1.CapacityReservationTypeLabelKey:
		return o.ReservationType, o.ReservationType != ""
	}
	v, ok := others[key]
	return v, ok
}

// AddLabels sets in labels the labels a node launched from the offering has (Label's, with
// others nil).
func (o Offering) AddLabels(labels map[string]string) {
	for _, k := range offeringLabelKeys {
		if v, ok := o.Label(k, nil); ok {
			labels[k] = v
		}
	}
}

// IsOfferingLabel reports whether the key is a label whose value varies between the
// offerings of one instance type, which Offering.Label answers from the offering.
func IsOfferingLabel(key string) bool { return slices.Contains(offeringLabelKeys[:], key) }

// OfferingOf finds, among the instance types, the offering a node with these labels was
// launched from: by its instance type, zone, capacity type and capacity reservation.
func OfferingOf(types []*InstanceType, labels map[string]string) (Offering, bool) {
	for _, it := range types {
		if it.Name != labels[corev1.LabelInstanceTypeStable] {
			continue
		}
		for _, o := range it.Offerings {
			if o.Zone == labels[corev1.LabelTopologyZone] && o.CapacityType == labels[karpv1.CapacityTypeLabelKey] &&
				o.ReservationID == labels[karpv1.CapacityReservationIDLabelKey] {
				return o, true
			}
		}
	}
	return Offering{}, false
}

// NodeCosts are the hourly prices in USD a node pays besides its instance, the same for
// every instance type launched from one node class into one subnet.
type NodeCosts struct {
	// Volumes are the node's EBS volumes: storage, and IOPS and throughput above what the
	// volume type includes.
	Volumes float64
	// PublicIPv4 is the public IPv4 address the node gets, 0 without one.
	PublicIPv4 float64
	// Monitoring is CloudWatch detailed monitoring, 0 when it is off.
	Monitoring float64
}

// Total is the sum of the costs.
func (c NodeCosts) Total() float64 { return c.Volumes + c.PublicIPv4 + c.Monitoring }

// PriceParts split a node's hourly price in USD into what it pays for. They sum to the
// node's price.
type PriceParts struct {
	// Instance is the instance's price less the DaemonSets' share of it.
	Instance float64 `json:"instance"`
	// Volumes, PublicIPv4 and Monitoring are the node's NodeCosts.
	Volumes    float64 `json:"volumes"`
	PublicIPv4 float64 `json:"publicIPv4"`
	Monitoring float64 `json:"monitoring"`
	// DaemonSets is the share of the instance's price that the DaemonSet pods take: the
	// largest fraction of the node's allocatable CPU, memory or pods they request.
	DaemonSets float64 `json:"daemonSets"`
}

// Total is the node's hourly price.
func (p PriceParts) Total() float64 {
	return p.Instance + p.Volumes + p.PublicIPv4 + p.Monitoring + p.DaemonSets
}

// PlannedPriceAnnotationKey on a NodeClaim holds, as JSON PriceParts, the hourly price of the
// offering its plan expected; the offering launched may differ when that one had no capacity.
const PlannedPriceAnnotationKey = "tailor.sh/planned-price"

// NewPriceParts splits a node's price: instance is the instance's price, costs the other
// costs of the node, and daemonSetShare (0 to 1) the share of the instance the DaemonSet
// pods take.
func NewPriceParts(instance float64, costs NodeCosts, daemonSetShare float64) PriceParts {
	ds := instance * min(max(daemonSetShare, 0), 1)
	return PriceParts{Instance: instance - ds, Volumes: costs.Volumes, PublicIPv4: costs.PublicIPv4, Monitoring: costs.Monitoring, DaemonSets: ds}
}

// Label is the value of a label that a node of this type launched from the offering has:
// the type's name, the offering's labels (see Offering.Label), or the type's own labels.
func (t *InstanceType) Label(o Offering, key string) (string, bool) {
	if key == corev1.LabelInstanceTypeStable {
		return t.Name, true
	}
	return o.Label(key, t.Labels)
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

// CheapestOffering returns the available offering with the lowest NodePrice that keep accepts, and false
// when there is none.
func (t *InstanceType) CheapestOffering(keep func(Offering) bool) (Offering, bool) {
	var best Offering
	found := false
	for _, o := range t.Offerings {
		if !o.Available || (keep != nil && !keep(o)) {
			continue
		}
		if !found || o.NodePrice() < best.NodePrice() {
			best, found = o, true
		}
	}
	return best, found
}
