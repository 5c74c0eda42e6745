package overlay_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1alpha1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/fake"
	"github.com/tailor-autoscaler/tailor/provisioner/overlay"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

var cfg *rest.Config

func TestMain(m *testing.M) {
	testenv.Main(m, &cfg, nil)
}

// readiness is an overlay's Ready condition, as the test compares it.
type readiness struct {
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

func TestControllerReportsConflictsOnTheAPIServer(t *testing.T) {
	mgr := testenv.NewManager(t, cfg)
	types := fake.New(nil)
	types.SetInstanceTypes(&cloudprovider.InstanceType{
		Name:      "c5.large",
		Labels:    map[string]string{corev1.LabelInstanceTypeStable: "c5.large"},
		Offerings: []cloudprovider.Offering{{Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.085, Available: true}},
	})
	if err := overlay.NewController(mgr.GetClient(), types).Register(mgr); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
	kube, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	np := &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: "overlay-conflicts"},
		Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{},
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
		}}},
	}
	create(t, kube, np)
	onC5 := []corev1.NodeSelectorRequirement{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"c5.large"}}}
	a := &v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: "a-savings"}, Spec: v1alpha1.NodeOverlaySpec{Requirements: onC5, Price: ptr.To("0.05"), Weight: ptr.To[int32](10)}}
	b := &v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: "b-license"}, Spec: v1alpha1.NodeOverlaySpec{Requirements: onC5, PriceAdjustment: ptr.To("+0.02"), Weight: ptr.To[int32](10)}}
	create(t, kube, a)
	create(t, kube, b)

	conflict := `has the same weight and sets another price for c5.large in us-east-1a (on-demand); "a-savings" wins by name order: give one a higher weight`
	waitReady(t, kube, map[string]readiness{
		"a-savings": {metav1.ConditionFalse, v1alpha1.ReasonConflict, `NodeOverlay "b-license" ` + conflict},
		"b-license": {metav1.ConditionFalse, v1alpha1.ReasonConflict, `NodeOverlay "a-savings" ` + conflict},
	})

	// A higher weight settles it: both are ready.
	if err := kube.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
		t.Fatal(err)
	}
	b.Spec.Weight = ptr.To[int32](20)
	if err := kube.Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitReady(t, kube, map[string]readiness{
		"a-savings": {metav1.ConditionTrue, v1alpha1.ConditionTypeReady, ""},
		"b-license": {metav1.ConditionTrue, v1alpha1.ConditionTypeReady, ""},
	})
}

func create(t *testing.T, kube client.Client, obj client.Object) {
	t.Helper()
	if err := kube.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), obj) })
}

// waitReady waits until the overlays' Ready conditions are want, and reports the last seen.
func waitReady(t *testing.T, kube client.Client, want map[string]readiness) {
	t.Helper()
	var got map[string]readiness
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got = map[string]readiness{}
		for name := range want {
			o := &v1alpha1.NodeOverlay{}
			if err := kube.Get(ctx, client.ObjectKey{Name: name}, o); err != nil {
				return false, err
			}
			if c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionTypeReady); c != nil && c.ObservedGeneration == o.Generation {
				got[name] = readiness{c.Status, c.Reason, c.Message}
			}
		}
		return cmp.Equal(want, got), nil
	})
	if err != nil {
		t.Fatalf("Ready conditions (-want +got):\n%s", cmp.Diff(want, got))
	}
}
