package provisioning

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/tailor-autoscaler/tailor/provisioner/quota"
)

// TestAQuotaGetsCapacityForWhatItAdmits plans a Deployment's four pods in a namespace whose
// ElasticQuota admits two of them: capacity is planned for two, and the other two are told
// why they get none.
func TestAQuotaGetsCapacityForWhatItAdmits(t *testing.T) {
	f := newFixture(t, selling(instanceType("m.xlarge", 4, 16, 0.15)), pool("general"))
	f.prov.quotas = quota.ElasticQuotas{Client: f.kube}
	ctx := context.Background()
	limit := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")}
	eq := &schedv1alpha1.ElasticQuota{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "team"}, Spec: schedv1alpha1.ElasticQuotaSpec{Min: limit, Max: limit}}
	if err := f.kube.Create(ctx, eq); err != nil {
		t.Fatal(err)
	}
	var subs []Submission
	for i := range 4 {
		subs = append(subs, Submission{Pod: f.pod(t, fmt.Sprintf("web-%d", i), "900m")})
	}
	f.prov.Submit(subs)
	if err := f.prov.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	var planned []string
	for _, s := range subs {
		if f.tracker.Planned(s.Pod.UID) {
			planned = append(planned, s.Pod.Name)
		}
	}
	if len(planned) != 2 || len(f.claims(t)) != 1 {
		t.Errorf("planned %v on %d NodeClaims, want two pods on one", planned, len(f.claims(t)))
	}
	over := 0
	for _, e := range f.events() {
		if strings.Contains(e, ReasonOverQuota) && strings.Contains(e, "over its ElasticQuota max of 2") {
			over++
		}
	}
	if over != 2 {
		t.Errorf("%d OverQuota events naming the max, want 2", over)
	}
}
