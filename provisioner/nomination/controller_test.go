package nomination

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

var kube client.Client

func TestMain(m *testing.M) {
	testenv.Main(m, nil, &kube)
}

// TestSyncAllRecoversEveryPlanBeforeANewLeaderPlans stores NodeClaims as a previous leader
// left them and checks that a fresh tracker knows every pod still waiting, and nothing else.
func TestSyncAllRecoversEveryPlanBeforeANewLeaderPlans(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sync-"}}
	if err := kube.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	newPod := func(name, node string) Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
		}
		if err := kube.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		return Pod{Namespace: p.Namespace, Name: p.Name, UID: p.UID}
	}
	waiting, launchedWaiting := newPod("waiting", ""), newPod("launched-waiting", "")
	bound := newPod("bound", "ip-10-0-0-9.ec2.internal")
	gone := Pod{Namespace: ns.Name, Name: "gone", UID: "deleted-uid"}
	newClaim := func(name string, pods ...Pod) *karpv1.NodeClaim {
		value, err := EncodePods(pods)
		if err != nil {
			t.Fatal(err)
		}
		nc := &karpv1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + ns.Name, Annotations: map[string]string{PlannedPodsAnnotationKey: value}},
			Spec: karpv1.NodeClaimSpec{
				NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}},
			},
		}
		if err := kube.Create(ctx, nc); err != nil {
			t.Fatal(err)
		}
		return nc
	}
	pendingClaim := newClaim("pending", waiting, bound, gone)
	launched := newClaim("launched", launchedWaiting)
	launched.Status.NodeName = "ip-10-0-0-7.ec2.internal"
	if err := kube.Status().Update(ctx, launched); err != nil {
		t.Fatal(err)
	}

	tr := NewTracker(clock.RealClock{})
	if err := NewController(kube, tr, record.NewFakeRecorder(10)).SyncAll(ctx); err != nil {
		t.Fatal(err)
	}

	snapshot, _, cancel := tr.Subscribe()
	defer cancel()
	var got []Nomination
	for _, n := range snapshot {
		if n.Pod.Namespace == ns.Name {
			got = append(got, n)
		}
	}
	want := []Nomination{
		{Pod: waiting, NodeClaim: pendingClaim.Name},
		{Pod: launchedWaiting, NodeClaim: launched.Name, NodeName: "ip-10-0-0-7.ec2.internal"},
	}
	if diff := cmp.Diff(sortNominations(want), sortNominations(got)); diff != "" {
		t.Errorf("recovered plans (-want +got):\n%s", diff)
	}
}
