package lifecycle

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
)

// TestALaunchKeepsThePlannedReservationOnlyWhenItLaunchedIntoIt: a NodeClaim planned into a
// capacity reservation keeps its reservation labels when it launched there, and loses them
// when the reservation was full and it launched on-demand.
func TestALaunchKeepsThePlannedReservationOnlyWhenItLaunchedIntoIt(t *testing.T) {
	reserved := map[string]string{
		karpv1.CapacityTypeLabelKey: "reserved", karpv1.CapacityReservationIDLabelKey: "cr-0000000000000000a", karpv1.CapacityReservationTypeLabelKey: "default",
	}
	tests := []struct {
		name string
		// full has the reservation out of instances, so the launch is on-demand.
		full bool
		want map[string]string
	}{
		{name: "launched into the reservation", want: reserved},
		{name: "launched on-demand", full: true, want: map[string]string{karpv1.CapacityTypeLabelKey: "on-demand"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			nc := &karpv1.NodeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("planned-reserved-%d", i), Labels: map[string]string{
					karpv1.CapacityReservationIDLabelKey: "cr-0000000000000000a", karpv1.CapacityReservationTypeLabelKey: "default",
				}},
				Spec: karpv1.NodeClaimSpec{
					NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
					Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"reserved", "on-demand"}}},
				},
			}
			if err := kube.Create(ctx, nc); err != nil {
				t.Fatal(err)
			}
			cloud := cloudSelling(
				cloudprovider.Offering{Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeReserved, ReservationID: "cr-0000000000000000a", ReservationType: "default", Price: 0.01, Available: !tt.full},
				cloudprovider.Offering{Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.1008, Available: true},
			)
			c := NewController(kube, cloud, record.NewFakeRecorder(10), clocktesting.NewFakeClock(nc.CreationTimestamp.Time))
			if _, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(nc)}); err != nil {
				t.Fatal(err)
			}
			got := &karpv1.NodeClaim{}
			if err := kube.Get(ctx, client.ObjectKeyFromObject(nc), got); err != nil {
				t.Fatal(err)
			}
			keys := map[string]string{}
			for _, k := range []string{karpv1.CapacityTypeLabelKey, karpv1.CapacityReservationIDLabelKey, karpv1.CapacityReservationTypeLabelKey} {
				if v, ok := got.Labels[k]; ok {
					keys[k] = v
				}
			}
			if diff := cmp.Diff(tt.want, keys); diff != "" {
				t.Errorf("labels after the launch (-want +got):\n%s", diff)
			}
		})
	}
}
