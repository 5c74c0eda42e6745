package explain

import (
	"regexp"
	"strconv"
	"strings"
)

// SchedulingFailure is a FailedScheduling message taken apart. The scheduler writes
//
//	0/<nodes> nodes are available: <n> <reason>, <n> <reason>. <post-filter messages>.
//
// with the per-node filter results counted by reason and sorted, or, when a PreFilter
// plugin rejected the pod, that plugin's message in place of the counts.
type SchedulingFailure struct {
	Message string
	Count   int32
	// TotalNodes is the number of nodes the scheduler considered.
	TotalNodes int
	// Reasons are the filter results: how many nodes rejected the pod for each reason.
	Reasons []NodeCount
	// PreFilter is the message of a PreFilter rejection, which applies to every node.
	PreFilter string
	// PostFilter is what preemption and the NodeProvisioning plugin said.
	PostFilter string
}

// NodeCount is how many nodes rejected a pod for one reason.
type NodeCount struct {
	Nodes  int
	Reason string
}

// ProvisioningFailure is a FailedProvisioning message taken apart. The provisioner writes
//
//	cannot provision a node for this pod: NodePool "a": <why>; NodePool "b": <why>; existing nodes: <scheduler summary>
type ProvisioningFailure struct {
	Message string
	Count   int32
	// NodePools say why each NodePool cannot launch a node for the pod.
	NodePools []NodePoolReason
	// Reason is what the message says beyond the NodePools (no NodePool is available, say).
	Reason string
	// ExistingNodes is the scheduler's summary of the existing nodes the plugin handed over.
	ExistingNodes string
}

// NodePoolReason is why one NodePool cannot take a pod.
type NodePoolReason struct {
	NodePool string
	Reason   string
}

var (
	nodesAvailable = regexp.MustCompile(`^0/(\d+) nodes are available: `)
	reasonCount    = regexp.MustCompile(`(?:^|, )(\d+) `)
	nodePoolReason = regexp.MustCompile(`(?:^|; )NodePool "([^"]+)": `)
)

const (
	provisioningPrefix = "cannot provision a node for this pod: "
	existingNodes      = "; existing nodes: "
)

// ParseSchedulingMessage takes a FailedScheduling message apart. A message of another
// form is kept whole in PreFilter.
func ParseSchedulingMessage(msg string) SchedulingFailure {
	f := SchedulingFailure{Message: msg}
	m := nodesAvailable.FindStringSubmatch(msg)
	if m == nil {
		f.PreFilter = msg
		return f
	}
	f.TotalNodes, _ = strconv.Atoi(m[1])
	rest := msg[len(m[0]):]
	// The counts end at the first ". "; reasons hold dots only inside names
	// (node.kubernetes.io/not-ready), never followed by a space.
	filter, post, _ := strings.Cut(rest, ". ")
	f.PostFilter = strings.TrimSuffix(post, ".")
	filter = strings.TrimSuffix(filter, ".")
	starts := reasonCount.FindAllStringSubmatchIndex(filter, -1)
	if len(starts) == 0 || starts[0][0] != 0 {
		f.PreFilter = filter
		return f
	}
	for i, s := range starts {
		end := len(filter)
		if i+1 < len(starts) {
			end = starts[i+1][0]
		}
		n, _ := strconv.Atoi(filter[s[2]:s[3]])
		f.Reasons = append(f.Reasons, NodeCount{Nodes: n, Reason: filter[s[1]:end]})
	}
	return f
}

// ParseProvisioningMessage takes a FailedProvisioning message apart. A message of another
// form is kept whole in Reason.
func ParseProvisioningMessage(msg string) ProvisioningFailure {
	f := ProvisioningFailure{Message: msg}
	body, ok := strings.CutPrefix(msg, provisioningPrefix)
	if !ok {
		f.Reason = msg
		return f
	}
	if i := strings.LastIndex(body, existingNodes); i >= 0 {
		body, f.ExistingNodes = body[:i], body[i+len(existingNodes):]
	}
	starts := nodePoolReason.FindAllStringSubmatchIndex(body, -1)
	if len(starts) == 0 {
		f.Reason = body
		return f
	}
	f.Reason = body[:starts[0][0]]
	for i, s := range starts {
		end := len(body)
		if i+1 < len(starts) {
			end = starts[i+1][0]
		}
		f.NodePools = append(f.NodePools, NodePoolReason{NodePool: body[s[2]:s[3]], Reason: body[s[1]:end]})
	}
	return f
}
