package explain

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// reasonInfeasible is the PodResizePending reason of a resize the node cannot carry out.
const reasonInfeasible = "Infeasible"

// launchLimitReached is the launch limit's condition reason for a pod past its limit
// (provisioning.ReasonLaunchLimitReached).
const launchLimitReached = "LaunchLimitReached"

// Verdict is one sentence on where the pod stands.
func (ex *Explanation) Verdict() string {
	nc := ex.NodeClaim
	switch {
	case ex.NodeName != "" && ex.Resize != nil && ex.Resize.Reason == reasonInfeasible:
		return fmt.Sprintf("bound to node %s (%s); its resize cannot be carried out there (below)", ex.NodeName, ex.Phase)
	case ex.NodeName != "":
		return fmt.Sprintf("bound to node %s (%s)", ex.NodeName, ex.Phase)
	case nc != nil && nc.Launched != "True":
		return fmt.Sprintf("planned onto NodeClaim %s, whose instance is not launched yet", nc.Name)
	case nc != nil && nc.Registered != "True":
		return fmt.Sprintf("planned onto NodeClaim %s, launched; waiting for node %s to register", nc.Name, orNone(nc.NodeName))
	case nc != nil && nc.Initialized != "True":
		return fmt.Sprintf("planned onto NodeClaim %s; waiting for node %s to initialize (Ready, startup taints removed)", nc.Name, nc.NodeName)
	case nc != nil:
		return fmt.Sprintf("planned onto NodeClaim %s, whose node %s is ready; waiting for the scheduler to bind it", nc.Name, nc.NodeName)
	case ex.CapacityRejected != nil && ex.CapacityRejected.Held && ex.CapacityRejected.Reason == launchLimitReached:
		return "pending: " + ex.CapacityRejected.Cause() + "; nothing more is launched for it until it, its NodePools or its claims change (below)"
	case ex.CapacityRejected != nil && ex.CapacityRejected.Held:
		return "pending: " + ex.CapacityRejected.Cause() + "; the provisioner waits before it plans a node for it again (below)"
	case ex.Withheld != nil && ex.Withheld.Reason == ReasonGangNotProvisioned:
		return "pending: its gang does not fit whole, so no node is launched for any of its pods (reason below)"
	case ex.Withheld != nil:
		return "pending: its namespace's ElasticQuota would not admit it, so no node is launched for it (reason below)"
	case len(ex.Provisioning) > 0:
		return "pending: no NodePool can launch a node for it (reasons below)"
	case ex.Scheduling != nil:
		return "pending: no existing node fits it, and the provisioner has not planned a node for it yet"
	}
	return "pending: the scheduler has not reported on it yet (is schedulerName right, and is the scheduler running?)"
}

// Render writes the explanation for a terminal.
func Render(w io.Writer, ex *Explanation) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Pod %s: %s\n", ex.Pod, ex.Verdict())
	fmt.Fprintf(&b, "  scheduler:  %s\n", orNone(ex.SchedulerName))
	fmt.Fprintf(&b, "  phase:      %s\n", orNone(string(ex.Phase)))
	fmt.Fprintf(&b, "  node:       %s\n", orNone(ex.NodeName))
	fmt.Fprintf(&b, "  nominated:  %s\n", orNone(ex.NominatedNodeName))

	if s := ex.Scheduling; s != nil {
		fmt.Fprintf(&b, "\nScheduler: FailedScheduling (%s)\n", times(s.Count))
		if s.TotalNodes > 0 || len(s.Reasons) > 0 {
			fmt.Fprintf(&b, "  0/%d nodes are available; nodes rejecting the pod, by reason:\n", s.TotalNodes)
		}
		for _, r := range s.Reasons {
			fmt.Fprintf(&b, "  %6d  %s\n", r.Nodes, r.Reason)
		}
		if s.PreFilter != "" {
			fmt.Fprintf(&b, "  every node: %s\n", s.PreFilter)
		}
		if s.PostFilter != "" {
			fmt.Fprintf(&b, "  then: %s\n", s.PostFilter)
		}
	}
	for _, p := range ex.Provisioning {
		fmt.Fprintf(&b, "\nProvisioner: FailedProvisioning (%s)\n", times(p.Count))
		if p.Reason != "" {
			fmt.Fprintf(&b, "  %s\n", p.Reason)
		}
		for _, np := range p.NodePools {
			fmt.Fprintf(&b, "  NodePool %s: %s\n", np.NodePool, np.Reason)
		}
		if p.ExistingNodes != "" {
			fmt.Fprintf(&b, "  existing nodes: %s\n", p.ExistingNodes)
		}
	}
	if r := ex.Resize; r != nil {
		fmt.Fprintf(&b, "\nResize pending: %s\n  %s\n", r.Reason, orNone(r.Message))
		if r.Reason == reasonInfeasible {
			b.WriteString("  the scheduler counts the pod at its old size on its node; consolidation plans it at its new size wherever it moves it\n")
		}
	}
	if r := ex.Replacement; r != nil {
		b.WriteString("\nReplace before evict: in progress\n")
		_, name, _ := strings.Cut(ex.Pod, "/")
		copy, old := r.Other, name
		if r.IsCopy {
			copy, old = old, r.Other
		}
		where := "not bound to a node yet"
		if r.CopyNode != "" {
			where = "on node " + r.CopyNode
		}
		state := "not Ready yet"
		if r.CopyReady {
			state = "Ready: it is handed to its ReplicaSet, which takes the old pod away"
		}
		fmt.Fprintf(&b, "  copy %s of pod %s, %s, %s\n", copy, old, where, state)
		if !r.Deadline.IsZero() && !r.CopyReady {
			fmt.Fprintf(&b, "  waits for the copy to be Ready: the old pod goes only then, and the disruption is abandoned (the copy deleted, the node kept) if it is not by %s\n",
				r.Deadline.UTC().Format(time.RFC3339))
		}
	}
	if c := ex.CapacityRejected; c != nil {
		state := "planned again"
		if c.Held {
			state = "held back"
		}
		fmt.Fprintf(&b, "\nProvisioner: %s, %s since %s\n  %s\n", c.Reason, state, c.Since.UTC().Format(time.RFC3339), c.Message)
	}
	if w := ex.Withheld; w != nil {
		fmt.Fprintf(&b, "\nProvisioner: %s (%s)\n  %s\n", w.Reason, times(w.Count), w.Message)
	}
	if nc := ex.NodeClaim; nc != nil {
		fmt.Fprintf(&b, "\nNodeClaim %s (NodePool %s), planned for %d pod(s) including this one\n", nc.Name, orNone(nc.NodePool), nc.PlannedPods)
		fmt.Fprintf(&b, "  launched: %s  registered: %s  initialized: %s\n", orNone(nc.Launched), orNone(nc.Registered), orNone(nc.Initialized))
		fmt.Fprintf(&b, "  instance type: %s  zone: %s  capacity type: %s\n", orNone(nc.InstanceType), orNone(nc.Zone), orNone(nc.CapacityType))
		fmt.Fprintf(&b, "  node: %s  provider id: %s\n", orNone(nc.NodeName), orNone(nc.ProviderID))
		if p := nc.Price; p != nil {
			as := "as planned"
			if nc.PriceLaunched {
				as = "as launched"
			}
			fmt.Fprintf(&b, "  price: $%.4f/hour %s: instance $%.4f, volumes $%.4f, public IPv4 $%.4f, monitoring $%.4f, DaemonSets' share $%.4f\n",
				p.Total(), as, p.Instance, p.Volumes, p.PublicIPv4, p.Monitoring, p.DaemonSets)
		}
		if len(nc.Overlays) > 0 {
			fmt.Fprintf(&b, "  NodeOverlays selecting its offering, highest weight first: %s\n", strings.Join(nc.Overlays, ", "))
		}
		if nc.MinValuesRelaxed {
			b.WriteString("  minValues relaxed: too few instance types can take its pods for the NodePool's minValues, lowered on the NodeClaim\n")
		}
	} else if ex.NodeName == "" {
		b.WriteString("\nNo NodeClaim plans this pod.\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func times(n int32) string {
	if n == 1 {
		return "1 time"
	}
	return fmt.Sprintf("%d times", n)
}
