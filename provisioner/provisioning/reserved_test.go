package provisioning

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/clock"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
)

// TestNodeClaimsPlannedIntoAReservationCarryIt: the NodeClaims a plan puts into a capacity
// reservation carry its id and type, so that the provider counts them against it until they
// launch; the others do not.
func TestNodeClaimsPlannedIntoAReservationCarryIt(t *testing.T) {
	it := instanceType("m.large", 2, 8, 0.1)
	it.Offerings = append(it.Offerings, cloudprovider.Offering{
		Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeReserved, ReservationID: "cr-0000000000000000a", ReservationType: "capacity-block",
		Price: 0.1 / 10_000_000, ReservedInstances: 1, Available: true,
	})
	types := selling(it)
	f := newFixture(t, types, pool("general", func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements[0].Values = []string{"reserved", "on-demand"}
	}))
	f.prov = New(f.kube, types, f.tracker, noTrigger{}, f.recorder, Options{Clock: clock.RealClock{}, ReplanWindow: DefaultReplanWindow})
	// 1500m of 2 vCPUs: each pod needs a node of its own; the reservation takes one.
	f.prov.Submit([]Submission{{Pod: f.pod(t, "a", "1500m")}, {Pod: f.pod(t, "b", "1500m")}})
	if err := f.prov.Provision(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, nc := range f.claims(t) {
		got[nc.Labels[karpv1.CapacityReservationIDLabelKey]+"/"+nc.Labels[karpv1.CapacityReservationTypeLabelKey]]++
	}
	want := map[string]int{"cr-0000000000000000a/capacity-block": 1, "/": 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NodeClaims by reservation labels (-want +got):\n%s", diff)
	}
}
