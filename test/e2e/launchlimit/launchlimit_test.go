// Package launchlimit runs the whole local stack with a scheduler filter Tailor does not
// model, and checks that a pod the scheduler rejects on every node Tailor launches for it
// gets a bounded number of launches, and then none, however long it waits. Its own package:
// the quiet it waits through runs beside the other packages' tests.
package launchlimit

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/launchlimit"
	"github.com/tailor-autoscaler/tailor/test/localstack"
	"github.com/tailor-autoscaler/tailor/test/rejectfilter"
	"github.com/tailor-autoscaler/tailor/test/stacktest"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

// quiet is how long nothing may be launched once the pod reached its limit: two of the
// scheduler's five-minute flushes of its unschedulable pods, each of which hands the pod
// over again.
const quiet = 10 * time.Minute

// TestAPodRejectedOnEveryLaunchedNodeStopsBuying: the scheduler rejects pod rejected on every
// node Tailor launches (the RejectLaunchedNodes filter), and consolidation deletes each
// empty node at once. Tailor launches for it --launch-limit-per-pod (3) times, backing off
// in between, then nothing for ten minutes; the pod, its NodeClaims, tailorctl explain and
// the metrics say why. A change to its NodePool plans it again. A pod without the label
// runs as usual.
func TestAPodRejectedOnEveryLaunchedNodeStopsBuying(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), quiet+10*time.Minute)
	defer cancel()
	stack, cs, kube := stacktest.Start(t, ctx, localstack.Options{BootDelay: 2 * time.Second, RejectLaunchedNodes: true, Progress: testWriter{t}})
	applier, err := localstack.NewApplier(stack.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := applier.ApplyFiles(ctx, filepath.Join("testdata", "nodepool.yaml")); err != nil {
		t.Fatal(err)
	}
	claims := watchNodeClaims(ctx, t, kube)
	if _, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, pod("fine", false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stacktest.WaitRunning(t, ctx, cs, "fine", 2*time.Minute)
	launchedForFine := len(claims.created())

	start := time.Now()
	if _, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, pod("rejected", true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	limited := waitCondition(ctx, t, cs, "rejected", provisioningReason("LaunchLimitReached"), 6*time.Minute)
	launches := len(claims.created()) - launchedForFine
	t.Logf("the pod reached its limit %s after its creation, after %d launches; %d NodeClaims deleted meanwhile",
		time.Since(start).Round(time.Second), launches, len(claims.deleted()))
	if launches != launchlimit.DefaultPerPod {
		t.Errorf("%d NodeClaims were launched for the rejected pod, want --launch-limit-per-pod (%d)", launches, launchlimit.DefaultPerPod)
	}
	wantCause := "planned capacity did not fit: " + rejectfilter.Name + ": " + rejectfilter.Reason
	if !strings.HasPrefix(limited.Message, wantCause) || !strings.Contains(limited.Message, "3 of 3 launches rejected (--launch-limit-per-pod)") {
		t.Errorf("pod condition message %q, want it to open with %q and name the limit", limited.Message, wantCause)
	}

	limitAt := time.Now()
	before := len(claims.created())
	err = wait.PollUntilContextTimeout(ctx, 5*time.Second, quiet, false, func(context.Context) (bool, error) {
		if n := len(claims.created()); n > before {
			return false, fmt.Errorf("%d NodeClaims created %s after the pod reached its limit: %v", n-before, time.Since(limitAt).Round(time.Second), claims.created()[before:])
		}
		return false, nil
	})
	if !wait.Interrupted(err) {
		t.Fatalf("quiet after the limit: %v", err)
	}
	t.Logf("no NodeClaim created in the %s after the limit", quiet)

	events := podEvents(ctx, t, cs, "rejected")
	for _, reason := range []string{"PlannedCapacityRejected", "LaunchLimitReached"} {
		if !slices.ContainsFunc(events, func(e corev1.Event) bool { return e.Reason == reason && strings.HasPrefix(e.Message, wantCause) }) {
			t.Errorf("no %s event on the pod opening with %q", reason, wantCause)
		}
	}
	rejecting := 0
	for _, nc := range listNodeClaims(ctx, t, kube) {
		if c := meta.FindStatusCondition(nc.Status.Conditions, "PlannedPodsRejected"); c != nil && c.Reason == rejectfilter.Name {
			rejecting++
		}
	}
	t.Logf("%d NodeClaims left carry PlannedPodsRejected", rejecting)
	out, err := exec.CommandContext(ctx, filepath.Join(testenv.Root(), "_output", "bin", "tailorctl"), "explain", "rejected", "-n", "default", "--kubeconfig", stack.Kubeconfig).CombinedOutput()
	if err != nil {
		t.Fatalf("tailorctl explain: %v\n%s", err, out)
	}
	if want := "Pod default/rejected: pending: " + wantCause + "; nothing more is launched for it"; !strings.HasPrefix(string(out), want) {
		t.Errorf("tailorctl explain says\n%s\nwant it to open with %q", out, want)
	}
	m, err := localstack.ScrapeMetrics(ctx, stack.ProvisionerMetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Sum("tailor_provisioner_pods_held_back", map[string]string{"state": "limit_reached"}); got != 1 {
		t.Errorf("tailor_provisioner_pods_held_back{state=limit_reached} = %v, want 1", got)
	}
	if got := m.Sum("tailor_provisioner_planned_capacity_rejections_total", map[string]string{"plugin": rejectfilter.Name}); got != float64(launchlimit.DefaultPerPod) {
		t.Errorf("tailor_provisioner_planned_capacity_rejections_total{plugin=%s} = %v, want %d", rejectfilter.Name, got, launchlimit.DefaultPerPod)
	}

	np := &karpv1.NodePool{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "general"}, np); err != nil {
		t.Fatal(err)
	}
	np.Spec.Template.ObjectMeta.Labels = map[string]string{"team": "gpu"}
	if err := kube.Update(ctx, np); err != nil {
		t.Fatal(err)
	}
	waitCondition(ctx, t, cs, "rejected", provisioningReason("LaunchLimitLifted"), time.Minute)
	if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
		return len(claims.created()) > before, nil
	}); err != nil {
		t.Errorf("no NodeClaim for the pod after its NodePool changed: %v", err)
	}
}

func pod(name string, rejected bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name, Labels: map[string]string{}},
		Spec: corev1.PodSpec{
			SchedulerName: "tailor-scheduler",
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"),
				}},
			}},
		},
	}
	if rejected {
		p.Labels[rejectfilter.Label] = "true"
	}
	return p
}

// provisioningReason matches the launch limit's condition with the reason.
func provisioningReason(reason string) func(*corev1.PodCondition) bool {
	return func(c *corev1.PodCondition) bool { return c.Reason == reason }
}

// waitCondition waits for the pod's launch-limit condition to match, and returns it.
func waitCondition(ctx context.Context, t *testing.T, cs kubernetes.Interface, name string, match func(*corev1.PodCondition) bool, timeout time.Duration) *corev1.PodCondition {
	t.Helper()
	var got *corev1.PodCondition
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for i := range p.Status.Conditions {
			if c := &p.Status.Conditions[i]; c.Type == launchlimit.PodCondition {
				got = c
				return match(c), nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s: the condition %s is %+v: %v", name, launchlimit.PodCondition, got, err)
	}
	return got
}

func podEvents(ctx context.Context, t *testing.T, cs kubernetes.Interface, name string) []corev1.Event {
	t.Helper()
	list, err := cs.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func listNodeClaims(ctx context.Context, t *testing.T, kube client.Client) []karpv1.NodeClaim {
	t.Helper()
	list := &karpv1.NodeClaimList{}
	if err := kube.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// claimLog is every NodeClaim seen, by polling, in order of creation, and those gone.
type claimLog struct {
	mu   sync.Mutex
	seen []string
	gone []string
}

func (l *claimLog) created() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

func (l *claimLog) deleted() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.gone)
}

// watchNodeClaims lists NodeClaims every 250 ms until ctx ends: a NodeClaim lives for
// seconds at least (its launch and its node's registration), so none is missed.
func watchNodeClaims(ctx context.Context, t *testing.T, kube client.Client) *claimLog {
	t.Helper()
	l := &claimLog{}
	go func() {
		live := map[string]bool{}
		for ctx.Err() == nil {
			list := &karpv1.NodeClaimList{}
			if err := kube.List(ctx, list); err == nil {
				now := map[string]bool{}
				l.mu.Lock()
				for _, nc := range list.Items {
					now[nc.Name] = true
					if !live[nc.Name] {
						l.seen = append(l.seen, nc.Name)
					}
				}
				for name := range live {
					if !now[name] {
						l.gone = append(l.gone, name)
					}
				}
				l.mu.Unlock()
				live = now
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return l
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
