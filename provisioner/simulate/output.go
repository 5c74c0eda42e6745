package simulate

import (
	"encoding/json"
	"fmt"
	"io"
	"math"

	corev1 "k8s.io/api/core/v1"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// Output is the JSON report of a simulation. Scripts read it: its field names and shape are
// a public interface.
type Output struct {
	// NodeClaims to launch, each with the offering the plan expects and its pods.
	NodeClaims []NodeClaim `json:"nodeClaims"`
	// Existing lists pods planned onto listed Nodes and NodeClaims; left out when empty.
	Existing []Existing `json:"existing,omitempty"`
	// Unschedulable pods, with the reason.
	Unschedulable []Unschedulable `json:"unschedulable"`
	// TotalPricePerHour of the new NodeClaims (their nodes' whole price), rounded to 4
	// decimals.
	TotalPricePerHour float64 `json:"totalPricePerHour"`
	// Nodes is the number of new NodeClaims.
	Nodes int `json:"nodes"`
	// SolveSeconds is how long planning took, reading and writing left out.
	SolveSeconds float64 `json:"solveSeconds"`
	// RankedBy is the price the plan ranked offerings by: "wholeNodePrices", or
	// "instancePrices" when that plan came out cheaper by whole node prices (see
	// packing.Solve), or when --price-instances-only asked for it.
	RankedBy string `json:"rankedBy"`
}

// NodeClaim is a NodeClaim the plan launches.
type NodeClaim struct {
	NodePool     string `json:"nodePool"`
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	CapacityType string `json:"capacityType"`
	// PricePerHour is what the node costs: the sum of PriceParts.
	PricePerHour float64 `json:"pricePerHour"`
	// PriceParts split the price: the instance (less the DaemonSets' share), its volumes, its
	// public IPv4 address, detailed monitoring, and the DaemonSet pods' share of the instance.
	PriceParts cloudprovider.PriceParts `json:"priceParts"`
	// InstanceTypes the NodeClaim allows, cheapest first: those its CreateFleet requests
	// are offered (at most maxOverrides type and subnet pairs each, keeping minValues).
	InstanceTypes []string `json:"instanceTypes"`
	// MinValuesRelaxed says the NodePool's minValues were lowered to the values there are
	// (--min-values-policy BestEffort).
	MinValuesRelaxed bool     `json:"minValuesRelaxed,omitempty"`
	Pods             []string `json:"pods"`
}

// Existing is a node or NodeClaim of the manifests and the pods planned onto it.
type Existing struct {
	Node string   `json:"node"`
	Pods []string `json:"pods"`
}

// Unschedulable is a pod the plan cannot place, and why.
type Unschedulable struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

// Render reports a plan, with pods named namespace/name in the plan's order. Prices keep
// the catalog's precision; the total is rounded to 4 decimals and the solve time to
// microseconds.
func Render(plan packing.Plan, solveSeconds float64) Output {
	out := Output{
		NodeClaims:        make([]NodeClaim, 0, len(plan.NewNodeClaims)),
		Unschedulable:     make([]Unschedulable, 0, len(plan.Unschedulable)),
		TotalPricePerHour: math.Round(plan.PricePerHour()*1e4) / 1e4,
		Nodes:             len(plan.NewNodeClaims),
		SolveSeconds:      math.Round(solveSeconds*1e6) / 1e6,
		RankedBy:          "wholeNodePrices",
	}
	if plan.RankedByInstancePrices {
		out.RankedBy = "instancePrices"
	}
	for _, nc := range plan.NewNodeClaims {
		c := nc.Cheapest
		types := make([]string, len(nc.InstanceTypes))
		for i, it := range nc.InstanceTypes {
			types[i] = it.Name
		}
		out.NodeClaims = append(out.NodeClaims, NodeClaim{
			NodePool: nc.NodePool.Name, InstanceType: c.InstanceType, Zone: c.Zone, CapacityType: c.CapacityType, PricePerHour: c.Price, PriceParts: c.Parts,
			InstanceTypes: types, MinValuesRelaxed: nc.MinValuesRelaxed, Pods: podNames(nc.Pods),
		})
	}
	for _, p := range plan.Existing {
		out.Existing = append(out.Existing, Existing{Node: p.Node.Node.Name, Pods: podNames(p.Pods)})
	}
	for _, u := range plan.Unschedulable {
		out.Unschedulable = append(out.Unschedulable, Unschedulable{Pod: podName(u.Pod), Reason: u.Reason})
	}
	return out
}

// Write writes the output as one line of JSON, or indented when pretty.
func (o Output) Write(w io.Writer, pretty bool) error {
	enc := json.NewEncoder(w)
	if pretty {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(o); err != nil {
		return fmt.Errorf("writing the plan: %w", err)
	}
	return nil
}

func podNames(pods []*corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, podName(p))
	}
	return out
}

func podName(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }
