// Package top is a live view of a cluster's nodes, in the manner of eks-node-viewer: per
// node its instance type, zone, capacity type, hourly price, CPU and memory requested
// against allocatable, and pod count; totals per NodePool and for the cluster. The model is
// computed from nodes and pods, rendered by a pure function of the model and the terminal
// width, and kept current by informers. It serves `tailorctl top`.
package top

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1alpha1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
	"github.com/tailor-autoscaler/tailor/provisioner/overlay"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// eksCapacityTypeLabel is the capacity type label of EKS managed node groups, ON_DEMAND or SPOT.
const eksCapacityTypeLabel = "eks.amazonaws.com/capacityType"

// Prices looks up the hourly price of an offering.
type Prices interface {
	// Price is the hourly price of the instance type in the zone with the capacity type,
	// and whether it is known.
	Price(instanceType, zone, capacityType string) (float64, bool)
}

// CatalogPrices are the prices of an EC2 catalog.
type CatalogPrices map[string]float64

// NewCatalogPrices indexes the offerings of a catalog. The embedded catalog has real
// on-demand prices and synthetic spot prices per zone.
func NewCatalogPrices(c *catalog.Catalog) CatalogPrices {
	p := CatalogPrices{}
	for _, it := range c.InstanceTypes {
		for _, o := range it.Offerings {
			p[priceKey(it.Name, o.Zone, o.CapacityType)] = o.PricePerHour
		}
		// An on-demand price does not depend on the zone; it also serves nodes without one.
		p[priceKey(it.Name, "", catalog.CapacityTypeOnDemand)] = it.OnDemandPricePerHour
	}
	return p
}

// Price implements Prices.
func (p CatalogPrices) Price(instanceType, zone, capacityType string) (float64, bool) {
	if v, ok := p[priceKey(instanceType, zone, capacityType)]; ok {
		return v, true
	}
	if capacityType == catalog.CapacityTypeOnDemand {
		v, ok := p[priceKey(instanceType, "", capacityType)]
		return v, ok
	}
	return 0, false
}

func priceKey(instanceType, zone, capacityType string) string {
	return instanceType + "/" + zone + "/" + capacityType
}

// Model is one frame of the view.
type Model struct {
	// NodePools are the nodes grouped by NodePool, in name order; nodes of no NodePool last.
	NodePools []NodePool
	Cluster   Totals
	// PendingPods are pods bound to no node, neither succeeded nor failed.
	PendingPods int
}

// NodePool is a NodePool's nodes and their totals.
type NodePool struct {
	// Name is empty for nodes no NodePool launched.
	Name   string
	Nodes  []Node
	Totals Totals
}

// Node is one row of the view.
type Node struct {
	Name         string
	InstanceType string
	Zone         string
	CapacityType string
	// PricePerHour is the node's offering's price, with NodeOverlays, plus its NodeClaim's
	// volumes, public IPv4 and monitoring.
	PricePerHour float64
	PriceKnown   bool
	Resources    Resources
	Ready        bool
}

// Resources are requested and allocatable CPU (millicores) and memory (bytes), and pods.
type Resources struct {
	CPURequested      int64
	CPUAllocatable    int64
	MemoryRequested   int64
	MemoryAllocatable int64
	Pods              int
}

func (r *Resources) add(o Resources) {
	r.CPURequested += o.CPURequested
	r.CPUAllocatable += o.CPUAllocatable
	r.MemoryRequested += o.MemoryRequested
	r.MemoryAllocatable += o.MemoryAllocatable
	r.Pods += o.Pods
}

// Totals add up nodes.
type Totals struct {
	Nodes        int
	PricePerHour float64
	// UnpricedNodes have no known price; PricePerHour leaves them out.
	UnpricedNodes int
	Resources     Resources
}

func (t *Totals) add(n Node) {
	t.Nodes++
	t.PricePerHour += n.PricePerHour
	if !n.PriceKnown {
		t.UnpricedNodes++
	}
	t.Resources.add(n.Resources)
}

// Build computes the model from the cluster's nodes and pods, each node priced at its
// offering's price with the NodeOverlays applied, plus what the node of a NodeClaim pays
// besides its instance (volumes, public IPv4, monitoring: cloudprovider.NodeClaimPrice).
func Build(nodes []*corev1.Node, pods []*corev1.Pod, prices Prices, overlays []v1alpha1.NodeOverlay, claims []karpv1.NodeClaim) Model {
	nodeCosts := map[string]float64{}
	for i := range claims {
		if parts, ok := cloudprovider.NodeClaimPrice(&claims[i]); ok && claims[i].Status.NodeName != "" {
			nodeCosts[claims[i].Status.NodeName] = parts.NodeCosts().Total()
		}
	}
	var m Model
	used := map[string]*Resources{}
	for _, pod := range pods {
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if pod.Spec.NodeName == "" {
			m.PendingPods++
			continue
		}
		r := used[pod.Spec.NodeName]
		if r == nil {
			r = &Resources{}
			used[pod.Spec.NodeName] = r
		}
		req := packing.BoundRequests(pod)
		r.CPURequested += req.Cpu().MilliValue()
		r.MemoryRequested += req.Memory().Value()
		r.Pods++
	}
	byPool := map[string]*NodePool{}
	rules := overlay.Compile(overlays)
	for _, n := range nodes {
		row := node(n, prices, rules)
		if row.PriceKnown {
			row.PricePerHour += nodeCosts[n.Name]
		}
		if r := used[n.Name]; r != nil {
			row.Resources.CPURequested, row.Resources.MemoryRequested, row.Resources.Pods = r.CPURequested, r.MemoryRequested, r.Pods
		}
		name := n.Labels[karpv1.NodePoolLabelKey]
		pool := byPool[name]
		if pool == nil {
			pool = &NodePool{Name: name}
			byPool[name] = pool
		}
		pool.Nodes = append(pool.Nodes, row)
		pool.Totals.add(row)
		m.Cluster.add(row)
	}
	for _, pool := range byPool {
		sort.Slice(pool.Nodes, func(i, j int) bool { return pool.Nodes[i].Name < pool.Nodes[j].Name })
		m.NodePools = append(m.NodePools, *pool)
	}
	sort.Slice(m.NodePools, func(i, j int) bool {
		a, b := m.NodePools[i].Name, m.NodePools[j].Name
		if (a == "") != (b == "") {
			return b == ""
		}
		return a < b
	})
	return m
}

func node(n *corev1.Node, prices Prices, overlays overlay.Rules) Node {
	row := Node{
		Name:         n.Name,
		InstanceType: n.Labels[corev1.LabelInstanceTypeStable],
		Zone:         n.Labels[corev1.LabelTopologyZone],
		CapacityType: capacityType(n.Labels),
		Resources: Resources{
			CPUAllocatable:    n.Status.Allocatable.Cpu().MilliValue(),
			MemoryAllocatable: n.Status.Allocatable.Memory().Value(),
		},
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			row.Ready = c.Status == corev1.ConditionTrue
		}
	}
	if row.InstanceType != "" {
		row.PricePerHour, row.PriceKnown = prices.Price(row.InstanceType, row.Zone, row.CapacityType)
		if row.PriceKnown {
			row.PricePerHour = overlays.NodePrice(n.Labels, row.PricePerHour)
		}
	}
	return row
}

// capacityType reads Karpenter's label, else that of EKS managed node groups, else assumes
// on-demand, which is what EC2 sells without asking.
func capacityType(labels map[string]string) string {
	if ct := labels[karpv1.CapacityTypeLabelKey]; ct != "" {
		return ct
	}
	switch strings.ToUpper(labels[eksCapacityTypeLabel]) {
	case "SPOT":
		return catalog.CapacityTypeSpot
	}
	return catalog.CapacityTypeOnDemand
}
