package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/test/localaws"
)

// TestReservedCapacity runs capacity reservations (see testdata/reserved.yaml): with a
// targeted reservation of reservedCount m5.large, reservedCount+2 pods that each need a node
// of their own get reservedCount nodes in the reservation, labelled with it, and two
// on-demand ones; the reservation is then full.
func TestReservedCapacity(t *testing.T) {
	const reservedCount = 3
	e := startStack(t)
	id := e.addCapacityReservation(t, localaws.CapacityReservationSpec{
		InstanceType: "m5.large", Zone: "us-east-1a", Count: reservedCount, InstanceMatchCriteria: "targeted", Tags: map[string]string{"team": "ml"},
	})
	e.apply(t, "reserved.yaml")
	e.waitNodeClassReady(t, "default")
	e.waitReservationsResolved(t, "default", id)

	start := time.Now()
	for i := range reservedCount + 2 {
		e.createPod(t, pod(fmt.Sprintf("web-%d", i), "1500m"))
	}
	byCapacity := map[string]int{}
	for i := range reservedCount + 2 {
		p := e.waitRunning(t, fmt.Sprintf("web-%d", i), 3*time.Minute)
		node := &corev1.Node{}
		if err := e.kube.Get(e.ctx, client.ObjectKey{Name: p.Spec.NodeName}, node); err != nil {
			t.Fatal(err)
		}
		capacityType := node.Labels[karpv1.CapacityTypeLabelKey]
		byCapacity[capacityType]++
		if capacityType == karpv1.CapacityTypeReserved {
			if got := node.Labels[karpv1.CapacityReservationIDLabelKey]; got != id {
				t.Errorf("reserved node %s is labelled with reservation %q, want %q", node.Name, got, id)
			}
			if got := node.Labels[karpv1.CapacityReservationTypeLabelKey]; got != "default" {
				t.Errorf("reserved node %s has reservation type %q, want default", node.Name, got)
			}
		}
	}
	t.Logf("%d pods running %s after creation: %v", reservedCount+2, time.Since(start).Round(time.Second), byCapacity)
	if byCapacity[karpv1.CapacityTypeReserved] != reservedCount || byCapacity[karpv1.CapacityTypeOnDemand] != 2 {
		t.Errorf("nodes by capacity type %v, want %d reserved and 2 on-demand", byCapacity, reservedCount)
	}
	if n := e.reservationAvailable(t, id); n != 0 {
		t.Errorf("the reservation has %d instances left, want 0", n)
	}
	// Figures: the reservation is paid whether it runs nodes or not, so the workload costs
	// what its nodes outside the reservation cost; without the reservation it would pay
	// for every node.
	instances := e.localInstances(t)
	paid, all := 0.0, 0.0
	for _, i := range instances {
		all += i.PricePerHour
		if !e.inReservation(t, i.ID) {
			paid += i.PricePerHour
		}
	}
	t.Logf("figures: %d instances; beyond the reservation the workload pays $%.3f/h, without it $%.3f/h", len(instances), paid, all)
}

// TestCapacityBlockEndingDrainsItsNode runs a capacity block to its end: a Deployment's pod
// runs in a one-node block; once the block turns expiring (40 minutes before its end), its
// NodeClaim is drained like an interrupted one and the pod moves to a new
// on-demand node before EC2 would terminate the instance.
func TestCapacityBlockEndingDrainsItsNode(t *testing.T) {
	e := startStack(t)
	// Expiring starts 40 minutes before the end: the block is active for its first 30
	// seconds, long enough to launch into it.
	end := time.Now().Add(40*time.Minute + 30*time.Second)
	id := e.addCapacityReservation(t, localaws.CapacityReservationSpec{
		InstanceType: "m5.large", Zone: "us-east-1a", Count: 1, InstanceMatchCriteria: "targeted",
		ReservationType: "capacity-block", End: end, Tags: map[string]string{"team": "ml"},
	})
	e.apply(t, "reserved.yaml")
	e.waitNodeClassReady(t, "default")
	e.waitReservationsResolved(t, "default", id)

	e.createDeployment(t, "trainer", "1500m")
	first := e.waitDeploymentNode(t, "trainer", "", 2*time.Minute)
	if got := first.Labels[karpv1.CapacityReservationTypeLabelKey]; got != "capacity-block" || first.Labels[karpv1.CapacityReservationIDLabelKey] != id {
		t.Fatalf("the trainer runs on %s with reservation labels %q/%q, want the block %s", first.Name, first.Labels[karpv1.CapacityReservationIDLabelKey], got, id)
	}
	time.Sleep(time.Until(end.Add(-40*time.Minute + time.Second)))
	// The class's status is resolved again only every five minutes: the drain goes by the
	// block's end.
	start := time.Now()
	second := e.waitDeploymentNode(t, "trainer", first.Name, 3*time.Minute)
	t.Logf("the block's pod runs on %s (%s) %s after the block turned expiring", second.Name, second.Labels[karpv1.CapacityTypeLabelKey], time.Since(start).Round(time.Second))
	if got := second.Labels[karpv1.CapacityTypeLabelKey]; got != karpv1.CapacityTypeOnDemand {
		t.Errorf("the replacement node is %s, want on-demand: an expiring block takes no node", got)
	}
	err := wait.PollUntilContextTimeout(e.ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, nc := range e.nodeClaims(t) {
			if nc.Status.NodeName == first.Name {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("the block's NodeClaim is still there: %v", err)
	}
}

// createDeployment creates a one-replica Deployment whose pod requests cpu.
func (e *env) createDeployment(t *testing.T, name, cpu string) {
	t.Helper()
	template := pod("", cpu)
	template.Labels = map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: template.Labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: template.Labels}, Spec: template.Spec},
		},
	}
	if _, err := e.cs.AppsV1().Deployments(d.Namespace).Create(e.ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitDeploymentNode waits for a running pod of the Deployment on a node other than notOn,
// and returns the node.
func (e *env) waitDeploymentNode(t *testing.T, name, notOn string, timeout time.Duration) *corev1.Node {
	t.Helper()
	var found string
	err := wait.PollUntilContextTimeout(e.ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := e.cs.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Spec.NodeName != "" && p.Spec.NodeName != notOn {
				found = p.Spec.NodeName
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no running pod of Deployment %s on a node other than %q: %v", name, notOn, err)
	}
	node := &corev1.Node{}
	if err := e.kube.Get(e.ctx, client.ObjectKey{Name: found}, node); err != nil {
		t.Fatal(err)
	}
	return node
}

// addCapacityReservation adds a reservation to the local EC2 endpoint and returns its id.
func (e *env) addCapacityReservation(t *testing.T, spec localaws.CapacityReservationSpec) string {
	t.Helper()
	body, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(e.stack.AWSEndpoint+"/_admin/capacity-reservations", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got localaws.CapacityReservationSummary
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("adding a capacity reservation: %s %v", resp.Status, err)
	}
	return got.ID
}

// reservationAvailable is how many instances the reservation has left, as EC2 counts.
func (e *env) reservationAvailable(t *testing.T, id string) int {
	t.Helper()
	var list []localaws.CapacityReservationSummary
	e.adminGet(t, "/_admin/capacity-reservations", &list)
	for _, r := range list {
		if r.ID == id {
			return r.Available
		}
	}
	t.Fatalf("no capacity reservation %s", id)
	return 0
}

func (e *env) localInstances(t *testing.T) []localaws.InstanceSummary {
	t.Helper()
	var list []localaws.InstanceSummary
	e.adminGet(t, "/_admin/instances", &list)
	return list
}

// inReservation reports whether the instance's NodeClaim runs in a capacity reservation.
func (e *env) inReservation(t *testing.T, instanceID string) bool {
	t.Helper()
	for _, nc := range e.nodeClaims(t) {
		if strings.HasSuffix(nc.Status.ProviderID, "/"+instanceID) {
			return nc.Labels[karpv1.CapacityTypeLabelKey] == karpv1.CapacityTypeReserved
		}
	}
	return false
}

func (e *env) adminGet(t *testing.T, path string, into any) {
	t.Helper()
	resp, err := http.Get(e.stack.AWSEndpoint + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
}

// waitReservationsResolved waits until the class's status lists the reservation.
func (e *env) waitReservationsResolved(t *testing.T, name, id string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		class := &awsv1.EC2NodeClass{}
		if err := e.kube.Get(ctx, client.ObjectKey{Name: name}, class); err != nil {
			return false, err
		}
		for _, r := range class.Status.CapacityReservations {
			if r.ID == id {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("EC2NodeClass %s does not list capacity reservation %s: %v", name, id, err)
	}
}
