package workloads

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/provisioner/requirements"
)

// Cluster is a cluster in memory that plans are carried out on: each new NodeClaim becomes a
// node of its cheapest offering, and the pods planned onto nodes are bound there.
type Cluster struct {
	// Nodes are the cluster's nodes, in the order they were launched, all schedulable.
	Nodes []packing.Node
	// prices are the nodes' hourly prices, by name.
	prices map[string]float64
	serial int
}

// NewCluster returns an empty cluster.
func NewCluster() *Cluster {
	return &Cluster{prices: map[string]float64{}}
}

// Apply binds the plan's pods planned onto the cluster's nodes and launches its new
// NodeClaims, returning the names of the nodes launched.
func (c *Cluster) Apply(plan packing.Plan) ([]string, error) {
	index := make(map[string]int, len(c.Nodes))
	for i, n := range c.Nodes {
		index[n.Node.Name] = i
	}
	for _, pl := range plan.Existing {
		i, ok := index[pl.Node.Node.Name]
		if !ok {
			return nil, fmt.Errorf("the plan places pods on node %s, which the cluster has not got", pl.Node.Node.Name)
		}
		c.Nodes[i].Pods = append(c.Nodes[i].Pods, bound(pl.Pods, pl.Node.Node.Name)...)
	}
	var names []string
	for _, nc := range plan.NewNodeClaims {
		c.serial++
		name := fmt.Sprintf("node-%05d", c.serial)
		node, err := LaunchedNode(name, nc)
		if err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, packing.Node{Node: node, Pods: bound(nc.Pods, name), Schedulable: true})
		c.prices[name] = nc.Cheapest.Price
		names = append(names, name)
	}
	return names, nil
}

// Remove takes nodes away with their pods.
func (c *Cluster) Remove(names ...string) {
	c.Nodes = slices.DeleteFunc(c.Nodes, func(n packing.Node) bool { return slices.Contains(names, n.Node.Name) })
	for _, name := range names {
		delete(c.prices, name)
	}
}

// Price is the hourly price of the named nodes, of all of them when none is named.
func (c *Cluster) Price(names ...string) float64 {
	total := 0.0
	for name, p := range c.prices {
		if len(names) == 0 || slices.Contains(names, name) {
			total += p
		}
	}
	return total
}

// bound are copies of the pods bound to the node.
func bound(pods []*corev1.Pod, node string) []*corev1.Pod {
	out := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		out[i] = p.DeepCopy()
		out[i].Spec.NodeName = node
	}
	return out
}

// LaunchedNode is the node a planned NodeClaim's cheapest offering makes: its NodePool's
// labels and taints, the instance type's labels and allocatable, and the offering's zone and
// capacity type.
func LaunchedNode(name string, nc packing.NewNodeClaim) (*corev1.Node, error) {
	for _, it := range nc.InstanceTypes {
		if it.Name != nc.Cheapest.InstanceType {
			continue
		}
		labels := requirements.SingleValueLabels(nc.Requirements)
		maps.Copy(labels, nc.NodePool.Spec.Template.ObjectMeta.Labels)
		maps.Copy(labels, it.Labels)
		labels[corev1.LabelTopologyZone] = nc.Cheapest.Zone
		labels[karpv1.CapacityTypeLabelKey] = nc.Cheapest.CapacityType
		labels[karpv1.NodePoolLabelKey] = nc.NodePool.Name
		labels[corev1.LabelHostname] = name
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec:       corev1.NodeSpec{Taints: nc.NodePool.Spec.Template.Spec.Taints},
			Status:     corev1.NodeStatus{Allocatable: it.Allocatable()},
		}, nil
	}
	return nil, fmt.Errorf("the NodeClaim's cheapest instance type %s is not among its instance types", nc.Cheapest.InstanceType)
}

// PlanSummary is a plan by names, to compare plans with cmp.Diff: where each pod goes,
// what each new NodeClaim is, and why pods could not be placed.
type PlanSummary struct {
	Existing      map[string][]string
	NewNodeClaims []ClaimSummary
	Unschedulable map[string]string
}

// ClaimSummary is a new NodeClaim of a plan by names.
type ClaimSummary struct {
	NodePool               string
	Cheapest               packing.Choice
	Pods, InstanceTypes    []string
	Requirements, Requests string
}

// Summarize is the plan by names.
func Summarize(p packing.Plan) PlanSummary {
	out := PlanSummary{Existing: map[string][]string{}, Unschedulable: map[string]string{}}
	for _, pl := range p.Existing {
		for _, pod := range pl.Pods {
			out.Existing[pl.Node.Node.Name] = append(out.Existing[pl.Node.Node.Name], pod.Name)
		}
		slices.Sort(out.Existing[pl.Node.Node.Name])
	}
	for _, nc := range p.NewNodeClaims {
		c := ClaimSummary{NodePool: nc.NodePool.Name, Cheapest: nc.Cheapest,
			Requirements: fmt.Sprint(nc.Requirements), Requests: fmt.Sprint(nc.Requests)}
		for _, pod := range nc.Pods {
			c.Pods = append(c.Pods, pod.Name)
		}
		slices.Sort(c.Pods)
		for _, it := range nc.InstanceTypes {
			c.InstanceTypes = append(c.InstanceTypes, it.Name)
		}
		out.NewNodeClaims = append(out.NewNodeClaims, c)
	}
	for _, u := range p.Unschedulable {
		out.Unschedulable[u.Pod.Name] = u.Reason
	}
	return out
}
