package nodepool

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
)

// TestNodePoolCostPerHourSumsTheNodeClaimsPrices sums each NodeClaim's price as launched
// (status.price) or, until it is, as planned.
func TestNodePoolCostPerHourSumsTheNodeClaimsPrices(t *testing.T) {
	claim := func(name, price string) *karpv1.NodeClaim {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: "general"}}}
		if price != "" {
			nc.Annotations = map[string]string{cloudprovider.PlannedPriceAnnotationKey: price}
		}
		return nc
	}
	scheme := runtime.NewScheme()
	if err := karpv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general"}},
		claim("a", `{"instance":0.0375,"volumes":0.0022,"publicIPv4":0.005,"monitoring":0,"daemonSets":0.0025}`),
		claim("b", `{"instance":0.0875,"volumes":0.0022,"publicIPv4":0,"monitoring":0.0029,"daemonSets":0.0025}`),
		claim("unannotated", ""),
		func() *karpv1.NodeClaim {
			// Planned dearer, launched as another type: its status counts.
			nc := claim("launched", `{"instance":0.5,"volumes":0.0022,"publicIPv4":0,"monitoring":0,"daemonSets":0.1}`)
			nc.Status.Price = &karpv1.Price{PerHour: "0.1472", Instance: "0.125", Volumes: "0.0022", DaemonSets: "0.02"}
			return nc
		}(),
		claim("garbled", "{"),
	).Build()
	want := `
# HELP tailor_nodepool_cost_per_hour What a NodePool's NodeClaims cost per hour in USD, by part: instance (less the DaemonSets' share), volumes, publicIPv4, monitoring, daemonSets. Each NodeClaim counts as launched (status.price), or as planned (the tailor.sh/planned-price annotation) until then; those with neither are left out.
# TYPE tailor_nodepool_cost_per_hour gauge
tailor_nodepool_cost_per_hour{nodepool="general",part="daemonSets"} 0.025
tailor_nodepool_cost_per_hour{nodepool="general",part="instance"} 0.25
tailor_nodepool_cost_per_hour{nodepool="general",part="monitoring"} 0.0029
tailor_nodepool_cost_per_hour{nodepool="general",part="publicIPv4"} 0.005
tailor_nodepool_cost_per_hour{nodepool="general",part="volumes"} 0.0066
`
	if err := testutil.CollectAndCompare(NewCollector(kube), strings.NewReader(want), "tailor_nodepool_cost_per_hour"); err != nil {
		t.Error(err)
	}
}

// TestNodePoolLimitsUnderBothNames: a NodePool's limits are served as tailor_nodepool_limit
// and as Karpenter's karpenter_nodepools_limit, per resource; an unlimited one has none.
func TestNodePoolLimitsUnderBothNames(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := karpv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	limited := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general"}}
	limited.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("1000"), corev1.ResourceMemory: resource.MustParse("4Ti")}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(limited, &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "unlimited"}}).Build()
	want := `
# HELP karpenter_nodepools_limit Limits specified on the nodepool that restrict the quantity of resources provisioned; the same figure as tailor_nodepool_limit.
# TYPE karpenter_nodepools_limit gauge
karpenter_nodepools_limit{nodepool="general",resource_type="cpu"} 1000
karpenter_nodepools_limit{nodepool="general",resource_type="memory"} 4.398046511104e+12
# HELP tailor_nodepool_limit A NodePool's limit per resource (cores, bytes, count); absent when unlimited.
# TYPE tailor_nodepool_limit gauge
tailor_nodepool_limit{nodepool="general",resource="cpu"} 1000
tailor_nodepool_limit{nodepool="general",resource="memory"} 4.398046511104e+12
`
	if err := testutil.CollectAndCompare(NewCollector(kube), strings.NewReader(want), "tailor_nodepool_limit", "karpenter_nodepools_limit"); err != nil {
		t.Error(err)
	}
}
