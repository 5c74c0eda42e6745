package repair

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// Policy is a node condition that gets the node replaced once it has held for Toleration.
type Policy struct {
	Type       corev1.NodeConditionType
	Status     corev1.ConditionStatus
	Toleration time.Duration
}

// String writes the policy as the --node-repair-policies flag takes it: Ready=False:30m.
func (p Policy) String() string {
	return fmt.Sprintf("%s=%s:%s", p.Type, p.Status, karpv1.ShortDuration(p.Toleration))
}

// condition names the policy's condition as events and metrics do: Ready=False.
func (p Policy) condition() string { return fmt.Sprintf("%s=%s", p.Type, p.Status) }

// DefaultPolicies are the conditions EKS nodes report and Karpenter's AWS provider repairs:
// a node that is not ready, and the node monitoring agent's accelerator, storage,
// networking, kernel and container runtime conditions.
func DefaultPolicies() Policies {
	return Policies{
		{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Toleration: 30 * time.Minute},
		{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Toleration: 30 * time.Minute},
		{Type: "AcceleratedHardwareReady", Status: corev1.ConditionFalse, Toleration: 10 * time.Minute},
		{Type: "StorageReady", Status: corev1.ConditionFalse, Toleration: 30 * time.Minute},
		{Type: "NetworkingReady", Status: corev1.ConditionFalse, Toleration: 30 * time.Minute},
		{Type: "KernelReady", Status: corev1.ConditionFalse, Toleration: 30 * time.Minute},
		{Type: "ContainerRuntimeReady", Status: corev1.ConditionFalse, Toleration: 30 * time.Minute},
	}
}

// Policies are the repair policies; a flag.Value of Type=Status:toleration, comma separated.
type Policies []Policy

// String writes the policies as the flag takes them.
func (ps *Policies) String() string {
	if ps == nil {
		return ""
	}
	parts := make([]string, 0, len(*ps))
	for _, p := range *ps {
		parts = append(parts, p.String())
	}
	return strings.Join(parts, ",")
}

// Set replaces the policies with those of s, e.g. "Ready=False:30m,StorageReady=False:1h".
func (ps *Policies) Set(s string) error {
	var out Policies
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := parsePolicy(part)
		if err != nil {
			return err
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return fmt.Errorf("no policy in %q: write Type=Status:toleration, e.g. Ready=False:30m", s)
	}
	*ps = out
	return nil
}

func parsePolicy(s string) (Policy, error) {
	cond, tol, ok := strings.Cut(s, ":")
	typ, status, ok2 := strings.Cut(cond, "=")
	if !ok || !ok2 || strings.TrimSpace(typ) == "" {
		return Policy{}, fmt.Errorf("policy %q is not Type=Status:toleration, e.g. Ready=False:30m", s)
	}
	st := corev1.ConditionStatus(strings.TrimSpace(status))
	switch st {
	case corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown:
	default:
		return Policy{}, fmt.Errorf("policy %q: status %q is not True, False or Unknown", s, status)
	}
	d, err := time.ParseDuration(strings.TrimSpace(tol))
	if err != nil || d <= 0 {
		return Policy{}, fmt.Errorf("policy %q: toleration %q is not a positive duration such as 30m", s, tol)
	}
	return Policy{Type: corev1.NodeConditionType(strings.TrimSpace(typ)), Status: st, Toleration: d}, nil
}
