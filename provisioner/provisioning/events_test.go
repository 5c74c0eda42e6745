package provisioning

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// TestProvisionRecordsPlannedOnEachPod plans two pods onto a new NodeClaim, launches it, and
// plans a third onto it in flight: each pod learns its NodeClaim, the offering and its
// company, and the third, whose node name is already known, is nominated at once.
func TestProvisionRecordsPlannedOnEachPod(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, selling(instanceType("m.large", 2, 8, 0.1), instanceType("m.xlarge", 4, 16, 0.15)), pool("general"))
	a, b := f.pod(t, "a", "1500m"), f.pod(t, "b", "1500m")
	f.prov.Submit([]Submission{{Pod: a}, {Pod: b}})
	if err := f.prov.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	claims := f.claims(t)
	if len(claims) != 1 {
		t.Fatalf("%d NodeClaims, want 1 holding both pods", len(claims))
	}
	nc := claims[0]
	want := []string{
		"Normal Planned planned onto NodeClaim " + nc.Name + " (m.xlarge spot in us-east-1a, $0.0500/hour, with 1 other pod)",
		"Normal Planned planned onto NodeClaim " + nc.Name + " (m.xlarge spot in us-east-1a, $0.0500/hour, with 1 other pod)",
	}
	if diff := cmp.Diff(want, f.events()); diff != "" {
		t.Errorf("events of the new NodeClaim's pods (-want +got):\n%s", diff)
	}

	// Launch it as the lifecycle controller would: labels of the offering, then status.
	nc.Labels[corev1.LabelInstanceTypeStable] = "m.xlarge"
	nc.Labels[karpv1.CapacityTypeLabelKey] = karpv1.CapacityTypeSpot
	nc.Labels[corev1.LabelTopologyZone] = "us-east-1a"
	if err := f.kube.Update(ctx, &nc); err != nil {
		t.Fatal(err)
	}
	nc.Status.NodeName = "ip-10-0-0-7.ec2.internal"
	nc.Status.ProviderID = "aws:///us-east-1a/i-0123456789abcdef0"
	nc.Status.Capacity = instanceType("m.xlarge", 4, 16, 0.15).Capacity
	nc.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3900m"), corev1.ResourceMemory: resource.MustParse("15Gi"), corev1.ResourcePods: resource.MustParse("58")}
	if err := f.kube.Status().Update(ctx, &nc); err != nil {
		t.Fatal(err)
	}
	c := f.pod(t, "c", "500m")
	f.prov.Submit([]Submission{{Pod: c}})
	if err := f.prov.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(f.claims(t)); n != 1 {
		t.Fatalf("%d NodeClaims, want the third pod on the in-flight one", n)
	}
	want = []string{
		"Normal Planned planned onto NodeClaim " + nc.Name + " (m.xlarge spot in us-east-1a, with 2 other pods)",
		"Normal Nominated nominated to node ip-10-0-0-7.ec2.internal of NodeClaim " + nc.Name,
	}
	if diff := cmp.Diff(want, f.events()); diff != "" {
		t.Errorf("events of the pod added in flight (-want +got):\n%s", diff)
	}
}
