package e2e

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tailor-autoscaler/tailor/test/localstack"
)

// TestPodENIAndPrefixDelegation runs the provisioner with --vpc-prefix-delegation and two
// pods of 1500m (one node each, see testdata/pod-eni.yaml): the pod asking for
// vpc.amazonaws.com/pod-eni runs on the m5.large, which has branch interfaces, the other on
// the cheaper t3.medium, which has none. Both nodes register with prefix delegation's 110
// pods (the simulated kubelet reads maxPods from the user data), not the 29 and 17 of one
// address per pod, and the NodeClaims say the same.
func TestPodENIAndPrefixDelegation(t *testing.T) {
	e := startStack(t, func(o *localstack.Options) {
		o.ProvisionerArgs = append(o.ProvisionerArgs, "--vpc-prefix-delegation")
	})
	e.apply(t, "pod-eni.yaml")
	e.waitNodeClassReady(t, "default")

	sgp := pod("sgp", "1500m")
	podENI := corev1.ResourceName("vpc.amazonaws.com/pod-eni")
	sgp.Spec.Containers[0].Resources.Requests[podENI] = resource.MustParse("1")
	sgp.Spec.Containers[0].Resources.Limits = corev1.ResourceList{podENI: resource.MustParse("1")}
	start := time.Now()
	e.createPod(t, sgp)
	e.createPod(t, pod("plain", "1500m"))

	type node struct {
		InstanceType, Pods, PodENI string
	}
	nodeOf := func(p *corev1.Pod) node {
		n := &corev1.Node{}
		if err := e.kube.Get(e.ctx, client.ObjectKey{Name: p.Spec.NodeName}, n); err != nil {
			t.Fatal(err)
		}
		got := node{InstanceType: n.Labels[corev1.LabelInstanceTypeStable], Pods: n.Status.Capacity.Pods().String()}
		if q, ok := n.Status.Capacity[podENI]; ok {
			got.PodENI = q.String()
		}
		return got
	}
	got := map[string]node{}
	for _, name := range []string{"sgp", "plain"} {
		p := e.waitRunning(t, name, 3*time.Minute)
		got[name] = nodeOf(p)
		t.Logf("%s running on %s %s after creation", name, got[name].InstanceType, time.Since(start).Round(time.Second))
	}
	want := map[string]node{
		"sgp":   {InstanceType: "m5.large", Pods: "110", PodENI: "9"},
		"plain": {InstanceType: "t3.medium", Pods: "110"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nodes of the pods (-want +got):\n%s", diff)
	}
	for _, nc := range e.nodeClaims(t) {
		if pods := nc.Status.Capacity.Pods().String(); pods != "110" {
			t.Errorf("NodeClaim %s (%s) capacity pods %s, want 110 as its node", nc.Name, nc.Labels[corev1.LabelInstanceTypeStable], pods)
		}
	}
}
