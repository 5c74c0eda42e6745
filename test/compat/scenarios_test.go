package compat

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
	"github.com/tailor-autoscaler/tailor/test/localaws"
	"github.com/tailor-autoscaler/tailor/test/localstack"
)

// namespace holds each scenario's workload; reset deletes it.
const namespace = "compat"

// env is one release's stack and clients.
type env struct {
	ctx     context.Context
	stack   *localstack.Stack
	cs      kubernetes.Interface
	kube    client.Client
	version string
}

func (e *env) apply(t *testing.T, files ...string) {
	t.Helper()
	applier, err := localstack.NewApplier(e.stack.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := applier.ApplyFiles(e.ctx, files...); err != nil {
		t.Fatal(err)
	}
}

// reset leaves the stack as a scenario found it: no workload, no NodeClaim, the EC2NodeClass
// on its first release.
func (e *env) reset(t *testing.T) {
	t.Helper()
	zero := int64(0)
	if err := e.cs.CoreV1().Namespaces().Delete(e.ctx, namespace, metav1.DeleteOptions{GracePeriodSeconds: &zero}); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	if err := e.kube.DeleteAllOf(e.ctx, &karpv1.NodeClaim{}); err != nil {
		t.Fatal(err)
	}
	e.apply(t, filepath.Join("testdata", "nodepool.yaml"))
	e.eventually(t, 3*time.Minute, "the namespace and every NodeClaim gone", func() (bool, error) {
		claims := &karpv1.NodeClaimList{}
		if err := e.kube.List(e.ctx, claims); err != nil {
			return false, err
		}
		_, err := e.cs.CoreV1().Namespaces().Get(e.ctx, namespace, metav1.GetOptions{})
		return len(claims.Items) == 0 && client.IgnoreNotFound(err) == nil && err != nil, nil
	})
}

// eventually polls cond every second until it holds, failing the test after timeout.
func (e *env) eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(e.ctx, time.Second, timeout, true, func(context.Context) (bool, error) {
		ok, err := cond()
		last = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting %s for %s: %v (last: %v)", timeout, what, err, last)
	}
}

func (e *env) namespace(t *testing.T) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := e.cs.CoreV1().Namespaces().Create(e.ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// deployment creates a Deployment of tailor-scheduler's pods with the requests and node
// selector given.
func (e *env) deployment(t *testing.T, name string, replicas int32, cpu string, labels, selector map[string]string) {
	t.Helper()
	podLabels := map[string]string{"app": name}
	for k, v := range labels {
		podLabels[k] = v
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					SchedulerName: "tailor-scheduler", TerminationGracePeriodSeconds: ptr.To[int64](0), NodeSelector: selector,
					Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")},
					}}},
				},
			},
		},
	}
	if _, err := e.cs.AppsV1().Deployments(namespace).Create(e.ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// running waits for n pods of the app to run, and returns them.
func (e *env) running(t *testing.T, app string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	e.eventually(t, 3*time.Minute, fmt.Sprintf("%d pods of %s running", n, app), func() (bool, error) {
		list, err := e.cs.CoreV1().Pods(namespace).List(e.ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, err
		}
		pods = slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil })
		return len(pods) == n && len(list.Items) == n, nil
	})
	return pods
}

func (e *env) claims(t *testing.T) []karpv1.NodeClaim {
	t.Helper()
	list := &karpv1.NodeClaimList{}
	if err := e.kube.List(e.ctx, list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// claimOf is the NodeClaim of the node a pod runs on.
func (e *env) claimOf(t *testing.T, node string) karpv1.NodeClaim {
	t.Helper()
	for _, nc := range e.claims(t) {
		if nc.Status.NodeName == node {
			return nc
		}
	}
	t.Fatalf("no NodeClaim has node %s", node)
	return karpv1.NodeClaim{}
}

// versionSkew: tailor-scheduler logs how the API server's release stands against its own.
func versionSkew(t *testing.T, e *env) {
	info, err := e.cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(info.GitVersion, "v"+e.version) {
		t.Fatalf("the API server runs %s, want %s", info.GitVersion, e.version)
	}
	want := "version skew supported"
	if minor(t, e.version) > minor(t, localaws.DefaultKubernetesVersion)+1 {
		want = "version skew beyond upstream's policy"
	}
	e.eventually(t, 30*time.Second, "tailor-scheduler's log to say "+want, func() (bool, error) {
		raw, err := os.ReadFile(filepath.Join(e.stack.Dir(), "logs", localstack.Scheduler+".log"))
		return strings.Contains(string(raw), want), err
	})
}

func minor(t *testing.T, v string) int {
	t.Helper()
	var major, m int
	if _, err := fmt.Sscanf(v, "%d.%d", &major, &m); err != nil {
		t.Fatalf("version %q: %v", v, err)
	}
	return m
}

// provisioningWithNomination: pods that fit no node are nominated to the nodes launched
// for them, and land there.
func provisioningWithNomination(t *testing.T, e *env) {
	e.namespace(t)
	e.deployment(t, "web", 3, "1", nil, nil)
	for _, p := range e.running(t, "web", 3) {
		nc := e.claimOf(t, p.Spec.NodeName)
		events, err := e.cs.CoreV1().Events(namespace).List(e.ctx, metav1.ListOptions{FieldSelector: fields.Set{"involvedObject.uid": string(p.UID), "reason": nomination.ReasonNominated}.String()})
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("nominated to node %s of NodeClaim %s", p.Spec.NodeName, nc.Name)
		if !slices.ContainsFunc(events.Items, func(ev corev1.Event) bool { return ev.Message == want }) {
			t.Errorf("pod %s runs on %s with no event %q", p.Name, p.Spec.NodeName, want)
		}
	}
}

// gang: a Coscheduling PodGroup's pods run together.
func gang(t *testing.T, e *env) {
	e.namespace(t)
	group := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
		"metadata": map[string]any{"name": "train", "namespace": namespace},
		"spec":     map[string]any{"minMember": int64(3)},
	}}
	group.SetGroupVersionKind(schema.GroupVersionKind{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Kind: "PodGroup"})
	if err := e.kube.Create(e.ctx, group); err != nil {
		t.Fatal(err)
	}
	e.deployment(t, "train", 3, "1500m", map[string]string{"scheduling.x-k8s.io/pod-group": "train"}, nil)
	pods := e.running(t, "train", 3)
	var first, last time.Time
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
				at := c.LastTransitionTime.Time
				if first.IsZero() || at.Before(first) {
					first = at
				}
				if at.After(last) {
					last = at
				}
			}
		}
	}
	if last.Sub(first) > 10*time.Second {
		t.Errorf("the gang's pods were bound over %s, want together", last.Sub(first))
	}
}

// consolidation: a node left half used by a scale-down is replaced by a cheaper one.
func consolidation(t *testing.T, e *env) {
	e.namespace(t)
	onDemand := map[string]string{karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeOnDemand}
	e.deployment(t, "shrink", 2, "1500m", nil, onDemand)
	pods := e.running(t, "shrink", 2)
	if pods[0].Spec.NodeName != pods[1].Spec.NodeName {
		t.Fatalf("the two pods run on %s and %s, want one node", pods[0].Spec.NodeName, pods[1].Spec.NodeName)
	}
	before := e.claimOf(t, pods[0].Spec.NodeName)
	// A patch of the replicas alone: the Deployment controller updates the object's status
	// meanwhile, which an update of the whole object would conflict with.
	if _, err := e.cs.AppsV1().Deployments(namespace).Patch(e.ctx, "shrink", types.MergePatchType, []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually(t, 3*time.Minute, "the half-used NodeClaim "+before.Name+" replaced by a smaller one", func() (bool, error) {
		claims := e.claims(t)
		if len(claims) != 1 || claims[0].Name == before.Name {
			return false, nil
		}
		after := claims[0]
		return after.Status.Capacity.Cpu().Cmp(*before.Status.Capacity.Cpu()) < 0, nil
	})
	e.running(t, "shrink", 1)
}

// drift: a change of the EC2NodeClass's AMI replaces its nodes.
func drift(t *testing.T, e *env) {
	e.namespace(t)
	e.deployment(t, "rollout", 1, "1", nil, nil)
	before := e.claimOf(t, e.running(t, "rollout", 1)[0].Spec.NodeName)
	class := &awsv1.EC2NodeClass{}
	if err := e.kube.Get(e.ctx, client.ObjectKey{Name: "default"}, class); err != nil {
		t.Fatal(err)
	}
	class.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@v20261101"}}
	if err := e.kube.Update(e.ctx, class); err != nil {
		t.Fatal(err)
	}
	e.eventually(t, 3*time.Minute, "the drifted NodeClaim "+before.Name+" replaced", func() (bool, error) {
		claims := e.claims(t)
		return len(claims) == 1 && claims[0].Name != before.Name && claims[0].Status.ImageID != before.Status.ImageID && claims[0].Status.ImageID != "", nil
	})
	e.running(t, "rollout", 1)
}

// spotInterruption: a spot node warned of its reclaim is replaced before it goes.
func spotInterruption(t *testing.T, e *env) {
	e.namespace(t)
	e.deployment(t, "spot", 1, "1", nil, map[string]string{karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeSpot})
	before := e.claimOf(t, e.running(t, "spot", 1)[0].Spec.NodeName)
	id, err := aws.InstanceIDOf(before.Status.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	e.admin(t, "interruptions", fmt.Sprintf(`{"queue": %q, "instanceId": %q, "kind": %q}`, interruptionQueue, id, localaws.InterruptionSpot))
	e.eventually(t, 3*time.Minute, "the interrupted NodeClaim "+before.Name+" replaced and its pod running elsewhere", func() (bool, error) {
		claims := e.claims(t)
		if slices.ContainsFunc(claims, func(nc karpv1.NodeClaim) bool { return nc.Name == before.Name }) {
			return false, nil
		}
		pods, err := e.cs.CoreV1().Pods(namespace).List(e.ctx, metav1.ListOptions{LabelSelector: "app=spot"})
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 1 && pods.Items[0].Status.Phase == corev1.PodRunning && pods.Items[0].Spec.NodeName != before.Status.NodeName, nil
	})
}

// explainUnschedulable: tailorctl explain says why no NodePool takes a pod.
func explainUnschedulable(t *testing.T, e *env) {
	e.namespace(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "huge"},
		Spec: corev1.PodSpec{SchedulerName: "tailor-scheduler", Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000")}}}}},
	}
	if _, err := e.cs.CoreV1().Pods(namespace).Create(e.ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "Pod compat/huge: pending: no NodePool can launch a node for it"
	var out string
	e.eventually(t, time.Minute, "tailorctl explain to say "+want, func() (bool, error) {
		out = e.tailorctl(t, "explain", "huge", "-n", namespace)
		return strings.HasPrefix(out, want), nil
	})
	if !strings.Contains(out, `NodePool compat: no instance type has room for the pod's requests`) {
		t.Errorf("tailorctl explain does not name the NodePool and its reason:\n%s", out)
	}
	if claims := e.claims(t); len(claims) != 0 {
		t.Errorf("%d NodeClaims for a pod no instance type can take", len(claims))
	}
}
