package provisioning

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/gang"
)

// TestGangsGetCapacityAllOrNothing plans a PodGroup's pods on a real API server: a gang one
// node over its NodePool's CPU limit gets no NodeClaim at all and is told why, on the
// PodGroup and each pod, while a pod beside it is planned; members the scheduler has not
// handed over yet are planned with those it has; once the limit is raised, the gang is
// retried without waiting for the scheduler and planned whole.
func TestGangsGetCapacityAllOrNothing(t *testing.T) {
	// Four 900m pods fill an m.xlarge; the limit takes three of them, twelve pods.
	f, members := gangFixture(t, "12", 16)
	ctx := context.Background()
	web := f.pod(t, "web", "900m")
	// The scheduler has handed over ten members so far.
	subs := []Submission{{Pod: web}}
	for _, m := range members[:10] {
		subs = append(subs, Submission{Pod: m})
	}
	f.prov.Submit(subs)
	if err := f.prov.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(f.claims(t)); n != 1 || !f.tracker.Planned(web.UID) {
		t.Fatalf("%d NodeClaims, web planned %v; want one, for web alone", n, f.tracker.Planned(web.UID))
	}
	for _, m := range members {
		if f.tracker.Planned(m.UID) {
			t.Errorf("gang member %s planned", m.Name)
		}
	}
	refused := 0
	for _, e := range f.events() {
		if strings.Contains(e, ReasonGangNotProvisioned) && strings.Contains(e, "gang "+f.ns+"/train needs 16 pods running together: 0 already run or have capacity planned, and of its 16 pending pods only 12 could be placed") {
			refused++
		}
	}
	// One event on the PodGroup, one on each of its pods.
	if refused != 17 {
		t.Errorf("%d GangNotProvisioned events naming all 16 members, want 17", refused)
	}

	// Room for web's node and four more: the gang is retried whole.
	np := &karpv1.NodePool{}
	if err := f.kube.Get(ctx, client.ObjectKey{Name: "general"}, np); err != nil {
		t.Fatal(err)
	}
	np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("20")}
	if err := f.kube.Update(ctx, np); err != nil {
		t.Fatal(err)
	}
	f.prov.RetryRefusedGangs()
	if err := f.prov.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if !f.tracker.Planned(m.UID) {
			t.Errorf("gang member %s not planned once the limit was raised", m.Name)
		}
	}
	if n := len(f.claims(t)); n != 5 {
		t.Errorf("%d NodeClaims, want web's and four for the gang", n)
	}
}

// TestAGangThatNoLongerFitsReleasesItsCapacity: half of a gang's NodeClaims fail after it
// was planned, and its members no longer fit (the NodePool's limit was lowered meanwhile):
// the NodeClaim still held for the other half is deleted, not left idle.
func TestAGangThatNoLongerFitsReleasesItsCapacity(t *testing.T) {
	f, subs, claims := gangOnTwoClaims(t)
	ctx := context.Background()
	again := f.failClaim(t, claims[0], subs)
	np := &karpv1.NodePool{}
	if err := f.kube.Get(ctx, client.ObjectKey{Name: "general"}, np); err != nil {
		t.Fatal(err)
	}
	np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("4")}
	if err := f.kube.Update(ctx, np); err != nil {
		t.Fatal(err)
	}
	f.prov.Submit(again)
	if err := f.prov.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if left := f.liveClaims(t); len(left) > 0 {
		t.Errorf("NodeClaims %v kept for a gang that no longer fits", left)
	}
	for _, s := range subs {
		if f.tracker.Planned(s.Pod.UID) {
			t.Errorf("member %s still planned", s.Pod.Name)
		}
	}
}

// gangFixture is a provisioner reading PodGroups, a NodePool of m.xlarge (four of the
// members fit one) limited to cpus, and the n pods of PodGroup train of minMember n.
func gangFixture(t *testing.T, cpus string, n int) (*fixture, []*corev1.Pod) {
	t.Helper()
	f := newFixture(t, selling(instanceType("m.xlarge", 4, 16, 0.15)), pool("general", func(np *karpv1.NodePool) {
		np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse(cpus)}
	}))
	f.prov.gangs = gang.PodGroups{Client: f.kube}
	pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "train"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: int32(n)}}
	if err := f.kube.Create(context.Background(), pg); err != nil {
		t.Fatal(err)
	}
	members := make([]*corev1.Pod, n)
	for i := range members {
		members[i] = f.pod(t, fmt.Sprintf("train-%d", i), "900m", func(p *corev1.Pod) { p.Labels = map[string]string{gang.Label: "train"} })
	}
	return f, members
}

// TestAGangHitByACapacityErrorIsPlannedAgainWhole: one of a gang's two NodeClaims fails to
// launch (its offering had no capacity); its members are planned again, counting those
// whose NodeClaim launched (the cloud provider's unavailable offerings steer the new one
// elsewhere), and the gang fits whole again without launching the kept half twice.
func TestAGangHitByACapacityErrorIsPlannedAgainWhole(t *testing.T) {
	f, subs, claims := gangOnTwoClaims(t)
	failed, kept := claims[0], claims[1]
	f.prov.Submit(f.failClaim(t, failed, subs))
	if err := f.prov.Provision(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, s := range subs {
		if !f.tracker.Planned(s.Pod.UID) {
			t.Errorf("member %s not planned again", s.Pod.Name)
		}
	}
	if live := f.liveClaims(t); len(live) != 2 || !slices.Contains(live, kept.Name) {
		t.Errorf("NodeClaims %v, want %s kept and one new for the members of %s", live, kept.Name, failed.Name)
	}
}

// gangOnTwoClaims plans a gang of eight onto two NodeClaims, within a limit of eight CPUs.
func gangOnTwoClaims(t *testing.T) (*fixture, []Submission, []karpv1.NodeClaim) {
	t.Helper()
	f, members := gangFixture(t, "8", 8)
	var subs []Submission
	for _, m := range members {
		subs = append(subs, Submission{Pod: m})
	}
	f.prov.Submit(subs)
	if err := f.prov.Provision(context.Background()); err != nil {
		t.Fatal(err)
	}
	claims := f.claims(t)
	if len(claims) != 2 {
		t.Fatalf("%d NodeClaims for the gang, want 2", len(claims))
	}
	return f, subs, claims
}

// failClaim deletes a NodeClaim as a failed launch does and withdraws its pods' plans; it
// returns the submissions of those pods, to hand over again.
func (f *fixture) failClaim(t *testing.T, nc karpv1.NodeClaim, subs []Submission) []Submission {
	t.Helper()
	ctx := context.Background()
	withdrawn := map[types.UID]bool{}
	for _, p := range f.tracker.PodsOf(nc.Name) {
		withdrawn[p.UID] = true
	}
	nc.Finalizers = nil
	if err := f.kube.Update(ctx, &nc); err != nil {
		t.Fatal(err)
	}
	if err := f.kube.Delete(ctx, &nc); err != nil {
		t.Fatal(err)
	}
	f.tracker.DropClaim(nc.Name)
	var again []Submission
	for _, s := range subs {
		if withdrawn[s.Pod.UID] {
			again = append(again, s)
		}
	}
	return again
}

// liveClaims names the NodeClaims not being deleted.
func (f *fixture) liveClaims(t *testing.T) []string {
	t.Helper()
	var live []string
	for _, nc := range f.claims(t) {
		if nc.DeletionTimestamp == nil {
			live = append(live, nc.Name)
		}
	}
	return live
}
