package overlay

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1alpha1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/fake"
)

// changingLister lists whatever the test last set.
type changingLister struct{ overlays []v1alpha1.NodeOverlay }

func (l *changingLister) ListNodeOverlays(context.Context) ([]v1alpha1.NodeOverlay, error) {
	return l.overlays, nil
}

func TestProviderAppliesTheOverlaysOfEachCall(t *testing.T) {
	// The fake returns the same instance types at every call, as the AWS provider's catalog
	// cache does.
	types := catalog()
	inner := fake.New(nil)
	inner.SetInstanceTypes(types...)
	overlays := &changingLister{}
	p := New(inner, overlays)
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general"}}
	c5Price := func() float64 {
		t.Helper()
		types, err := p.InstanceTypes(context.Background(), np)
		if err != nil {
			t.Fatal(err)
		}
		return roundAll(prices(types))["c5.large/us-east-1a/on-demand"]
	}
	var got []float64
	got = append(got, c5Price())
	overlays.overlays = []v1alpha1.NodeOverlay{overlay("double", 0, v1alpha1.NodeOverlaySpec{PriceAdjustment: ptr.To("+100%")})}
	got = append(got, c5Price())
	overlays.overlays[0].Spec.PriceAdjustment = ptr.To("-0.005")
	got = append(got, c5Price())
	overlays.overlays = nil
	got = append(got, c5Price())
	if diff := cmp.Diff([]float64{0.085, 0.17, 0.08, 0.085}, got); diff != "" {
		t.Errorf("c5.large prices after each change of the overlays (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{
		"m5.large/us-east-1a/on-demand": 0.096, "m5.large/us-east-1a/spot": 0.04, "m5.large/us-east-1b/on-demand": 0.096,
		"c5.large/us-east-1a/on-demand": 0.085, "c5.large/us-east-1b/on-demand": 0.085,
	}, prices(types)); diff != "" {
		t.Errorf("the provider's cached types changed (-want +got):\n%s", diff)
	}
}
