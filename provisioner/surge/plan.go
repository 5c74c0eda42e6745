package surge

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultProgressDeadline is a Deployment's progressDeadlineSeconds when it sets none.
const DefaultProgressDeadline = 600 * time.Second

// defaultMaxSurge is a rolling update's maxSurge when the Deployment sets none.
var defaultMaxSurge = intstr.FromString("25%")

// Plan is a surge to make: the pod replaced, and the ReplicaSet and Deployment whose pod
// the copy becomes.
type Plan struct {
	Pod        *corev1.Pod
	ReplicaSet *appsv1.ReplicaSet
	Deployment *appsv1.Deployment
	// Timeout is how long the copy has to become Ready.
	Timeout time.Duration
}

// Verdict is what replacing a pod before its eviction comes to.
type Verdict struct {
	// Plan is set when the pod is to be surged.
	Plan *Plan
	// Fallback, when Plan is nil, says why an opted-in pod that needed a surge keeps
	// today's rules (it is evicted, and waits for its PodDisruptionBudget); empty when
	// the pod needs no surge: evicting it leaves its workload a Ready replica and its
	// budget allows it.
	Fallback string
}

// Checker decides which opted-in pods are surged. It reads ReplicaSets, Deployments and
// PodDisruptionBudgets from API (uncached: only the pods of a decision are looked at), and
// the pods of a Deployment from Pods.
type Checker struct {
	API  client.Reader
	Pods client.Reader
	// Timeout, when positive, bounds every copy's wait to be Ready in place of its
	// Deployment's progressDeadlineSeconds.
	Timeout time.Duration
}

// Check decides for an opted-in pod whose node goes. leaving are the UIDs of the pods that
// leave with it (those of every node of the decision): they are no Ready replica of their
// workload once it is carried out.
func (c Checker) Check(ctx context.Context, pod *corev1.Pod, leaving map[types.UID]bool) (Verdict, error) {
	owner := metav1.GetControllerOf(pod)
	switch {
	case owner == nil:
		return Verdict{Fallback: "a pod no controller owns cannot be replaced before it is evicted: nothing would own its copy"}, nil
	case owner.Kind == "StatefulSet":
		return Verdict{Fallback: "a StatefulSet's pod cannot be replaced before it is evicted: its replacement takes its name and volumes, so it starts only once the pod is gone"}, nil
	case owner.Kind != "ReplicaSet":
		return Verdict{Fallback: fmt.Sprintf("a pod of a %s cannot be replaced before it is evicted: only Deployments' pods can", owner.Kind)}, nil
	}
	rs := &appsv1.ReplicaSet{}
	if err := c.API.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: owner.Name}, rs); err != nil {
		if apierrors.IsNotFound(err) {
			return Verdict{Fallback: fmt.Sprintf("its ReplicaSet %s is gone", owner.Name)}, nil
		}
		return Verdict{}, fmt.Errorf("reading ReplicaSet %s/%s of pod %s: %w", pod.Namespace, owner.Name, pod.Name, err)
	}
	dOwner := metav1.GetControllerOf(rs)
	if dOwner == nil || dOwner.Kind != "Deployment" {
		return Verdict{Fallback: fmt.Sprintf("ReplicaSet %s belongs to no Deployment: only Deployments' pods can be replaced before they are evicted", rs.Name)}, nil
	}
	d := &appsv1.Deployment{}
	if err := c.API.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: dOwner.Name}, d); err != nil {
		if apierrors.IsNotFound(err) {
			return Verdict{Fallback: fmt.Sprintf("its Deployment %s is gone", dOwner.Name)}, nil
		}
		return Verdict{}, fmt.Errorf("reading Deployment %s/%s of pod %s: %w", pod.Namespace, dOwner.Name, pod.Name, err)
	}
	need, err := c.needs(ctx, pod, d, leaving)
	if err != nil || need == "" {
		return Verdict{}, err
	}
	if why := noSurge(d); why != "" {
		return Verdict{Fallback: need + ", but " + why}, nil
	}
	if rs.DeletionTimestamp != nil || d.DeletionTimestamp != nil {
		return Verdict{Fallback: need + ", but its Deployment is being deleted"}, nil
	}
	return Verdict{Plan: &Plan{Pod: pod, ReplicaSet: rs, Deployment: d, Timeout: c.timeout(d)}}, nil
}

// needs says why evicting the pod would hurt: it leaves its Deployment without a Ready
// replica, or a PodDisruptionBudget allows no disruption now; "" when neither.
func (c Checker) needs(ctx context.Context, pod *corev1.Pod, d *appsv1.Deployment, leaving map[types.UID]bool) (string, error) {
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return "", fmt.Errorf("reading the selector of Deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	pods := &corev1.PodList{}
	if err := c.Pods.List(ctx, pods, client.InNamespace(d.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return "", fmt.Errorf("listing the pods of Deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	ready := 0
	for i := range pods.Items {
		if p := &pods.Items[i]; !leaving[p.UID] && Ready(p) {
			ready++
		}
	}
	if ready == 0 {
		return fmt.Sprintf("evicting it would leave Deployment %s without a Ready replica", d.Name), nil
	}
	pdbs := &policyv1.PodDisruptionBudgetList{}
	if err := c.API.List(ctx, pdbs, client.InNamespace(pod.Namespace)); err != nil {
		return "", fmt.Errorf("listing the PodDisruptionBudgets of namespace %s: %w", pod.Namespace, err)
	}
	for _, pdb := range pdbs.Items {
		// As the Eviction API reads it: an empty selector selects every pod of the namespace.
		s, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !s.Matches(labels.Set(pod.Labels)) {
			continue
		}
		if pdb.Status.DisruptionsAllowed <= 0 {
			return fmt.Sprintf("PodDisruptionBudget %s allows no disruption now", pdb.Name), nil
		}
	}
	return "", nil
}

// noSurge says why the Deployment runs no pod beyond its replicas, or "".
func noSurge(d *appsv1.Deployment) string {
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return "its Deployment's strategy is Recreate, which runs no pod beyond its replicas"
	}
	maxSurge := &defaultMaxSurge
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil && ru.MaxSurge != nil {
		maxSurge = ru.MaxSurge
	}
	replicas := 1
	if d.Spec.Replicas != nil {
		replicas = int(*d.Spec.Replicas)
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(maxSurge, replicas, true)
	if err != nil {
		return fmt.Sprintf("its Deployment's maxSurge %q cannot be read", maxSurge.String())
	}
	if n <= 0 {
		return "its Deployment sets maxSurge 0: it runs no pod beyond its replicas"
	}
	return ""
}

// timeout is how long a copy of the Deployment's pod has to become Ready.
func (c Checker) timeout(d *appsv1.Deployment) time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	if d.Spec.ProgressDeadlineSeconds != nil && *d.Spec.ProgressDeadlineSeconds > 0 {
		return time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second
	}
	return DefaultProgressDeadline
}

// Ready reports whether a pod serves: Ready, and not being deleted.
func Ready(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
