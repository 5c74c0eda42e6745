package provisioning

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
)

func staticPool(name string, replicas int64) *karpv1.NodePool {
	return pool(name, func(np *karpv1.NodePool) {
		np.Spec.Replicas = ptr.To(replicas)
		np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: name, Effect: corev1.TaintEffectNoSchedule}}
	})
}

// TestLaunchStaticLaunchesTheCheapestNodesOfTheNodePool: each node of a static NodePool is
// its own NodeClaim of the cheapest offering that holds its DaemonSets, whatever its taints.
func TestLaunchStaticLaunchesTheCheapestNodesOfTheNodePool(t *testing.T) {
	types := selling(instanceType("m.large", 2, 8, 0.1), instanceType("m.xlarge", 4, 16, 0.15))
	f := newFixture(t, types, staticPool("fixed", 3))
	np := &karpv1.NodePool{}
	if err := f.kube.Get(context.Background(), client.ObjectKey{Name: "fixed"}, np); err != nil {
		t.Fatal(err)
	}
	created, err := f.prov.LaunchStatic(context.Background(), np, 3)
	if err != nil {
		t.Fatal(err)
	}
	type claim struct {
		Pool, Static, InstanceType string
		Planned                    string
	}
	var got []claim
	for _, nc := range f.claims(t) {
		got = append(got, claim{Pool: nc.Labels[karpv1.NodePoolLabelKey], Static: nc.Annotations[StaticAnnotationKey],
			InstanceType: cheapestType(nc), Planned: nc.Annotations[nomination.PlannedPodsAnnotationKey]})
	}
	want := []claim{
		{Pool: "fixed", Static: "true", InstanceType: "m.large", Planned: "[]"},
		{Pool: "fixed", Static: "true", InstanceType: "m.large", Planned: "[]"},
		{Pool: "fixed", Static: "true", InstanceType: "m.large", Planned: "[]"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NodeClaims (-want +got):\n%s", diff)
	}
	if len(created) != 3 {
		t.Errorf("LaunchStatic returned %d NodeClaims, want 3", len(created))
	}
}

// TestLaunchStaticSaysWhyNoOfferingFits: a static NodePool whose requirements no instance
// type meets launches nothing and says so.
func TestLaunchStaticSaysWhyNoOfferingFits(t *testing.T) {
	unmet := staticPool("unmet", 1)
	unmet.Spec.Template.Spec.Requirements = append(unmet.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{
		Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"x.huge"}})
	f := newFixture(t, selling(instanceType("m.large", 2, 8, 0.1)), unmet)
	np := &karpv1.NodePool{}
	if err := f.kube.Get(context.Background(), client.ObjectKey{Name: "unmet"}, np); err != nil {
		t.Fatal(err)
	}
	_, err := f.prov.LaunchStatic(context.Background(), np, 1)
	if !errors.Is(err, ErrNoStaticOffering) {
		t.Fatalf("LaunchStatic() = %v, want ErrNoStaticOffering", err)
	}
	if n := len(f.claims(t)); n != 0 {
		t.Errorf("%d NodeClaims, want none", n)
	}
}

// TestPendingPodsGetNoCapacityFromStaticNodePools: with the StaticCapacity gate, a pod only
// a static NodePool could take waits; without it, spec.replicas is ignored.
func TestPendingPodsGetNoCapacityFromStaticNodePools(t *testing.T) {
	for _, gate := range []bool{true, false} {
		t.Run(fmt.Sprintf("StaticCapacity=%t", gate), func(t *testing.T) {
			types := selling(instanceType("m.large", 2, 8, 0.1))
			f := newFixture(t, types, pool("fixed", func(np *karpv1.NodePool) { np.Spec.Replicas = ptr.To[int64](2) }))
			f.prov = New(f.kube, types, f.tracker, noTrigger{}, f.recorder, Options{Clock: clock.RealClock{}, ReplanWindow: DefaultReplanWindow, StaticCapacity: gate})
			p := f.pod(t, "web", "1")
			f.prov.Submit([]Submission{{Pod: p}})
			if err := f.prov.Provision(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got, want := len(f.claims(t)), map[bool]int{true: 0, false: 1}[gate]; got != want {
				t.Errorf("%d NodeClaims for a pod only the static NodePool takes, want %d", got, want)
			}
		})
	}
}

// cheapestType is the first of the NodeClaim's instance types, the one the plan expects.
func cheapestType(nc karpv1.NodeClaim) string {
	for _, r := range nc.Spec.Requirements {
		if r.Key == corev1.LabelInstanceTypeStable && len(r.Values) > 0 {
			return r.Values[0]
		}
	}
	return ""
}
