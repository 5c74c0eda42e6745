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

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/gang"
)

// TestGangsGetCapacityAllOrNothing plans a PodGroup's pods on a real API server: a gang one
// node over its NodePool's CPU limit gets no NodeClaim at all and is told why, on the
// PodGroup and each pod, while a pod beside it is planned; once its members already
// running make up the difference, the rest is planned.
func TestGangsGetCapacityAllOrNothing(t *testing.T) {
	// Four 900m pods fill an m.xlarge; the limit takes three of them, twelve pods.
	f := newFixture(t, fakeInstanceTypes{types: []*cloudprovider.InstanceType{instanceType("m.xlarge", 4, 16, 0.15)}}, pool("general", func(np *karpv1.NodePool) {
		np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("12")}
	}))
	f.prov.gangs = gang.PodGroups{Client: f.kube}
	ctx := context.Background()
	pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "train"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 16}}
	if err := f.kube.Create(ctx, pg); err != nil {
		t.Fatal(err)
	}
	member := func(p *corev1.Pod) { p.Labels = map[string]string{gang.Label: "train"} }
	var subs []Submission
	for i := range 16 {
		subs = append(subs, Submission{Pod: f.pod(t, fmt.Sprintf("train-%d", i), "900m", member)})
	}
	web := f.pod(t, "web", "900m")
	subs = append(subs, Submission{Pod: web})
	f.prov.Submit(subs)
	if err := f.prov.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	claims := f.claims(t)
	if len(claims) != 1 || !f.tracker.Planned(web.UID) {
		t.Fatalf("%d NodeClaims, web planned %v; want one, for web alone", len(claims), f.tracker.Planned(web.UID))
	}
	for _, s := range subs[:16] {
		if f.tracker.Planned(s.Pod.UID) {
			t.Errorf("gang member %s planned", s.Pod.Name)
		}
	}
	refused := 0
	for _, e := range f.events() {
		if strings.Contains(e, ReasonGangNotProvisioned) && strings.Contains(e, "gang "+f.ns+"/train needs 16 pods running together") {
			refused++
		}
	}
	// One event on the PodGroup, one on each of its pods.
	if refused != 17 {
		t.Errorf("%d GangNotProvisioned events, want 17", refused)
	}

	// Four members run already (bound elsewhere); twelve remain, and they fit the limit
	// once web's claim is gone.
	claim := claims[0]
	claim.Finalizers = nil
	if err := f.kube.Update(ctx, &claim); err != nil {
		t.Fatal(err)
	}
	if err := f.kube.Delete(ctx, &claim); err != nil {
		t.Fatal(err)
	}
	for _, s := range subs[:4] {
		if err := f.kube.Delete(ctx, s.Pod); err != nil {
			t.Fatal(err)
		}
		f.pod(t, s.Pod.Name+"-running", "900m", member, func(p *corev1.Pod) { p.Spec.NodeName = "elsewhere" })
	}
	f.prov.Submit(subs[4:16])
	if err := f.prov.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range subs[4:16] {
		if !f.tracker.Planned(s.Pod.UID) {
			t.Errorf("gang member %s not planned with four members running", s.Pod.Name)
		}
	}
	if n := len(f.claims(t)); n != 3 {
		t.Errorf("%d NodeClaims for twelve members, want 3", n)
	}
}
