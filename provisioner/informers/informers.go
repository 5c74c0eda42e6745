// Package informers says what the sidecar's caches hold. Every object is kept without its
// managed fields; pods and nodes, the kinds a large cluster has many of, are cut down to
// what Tailor reads; finished pods are not held at all, as kube-scheduler does not hold
// them either.
//
// A field Tailor starts to read must be kept here too: TestTransformsDecideEveryField lists
// the fate of every field, and TestPlansOfTransformedObjectsAreTheSame plans the shared
// workloads from objects as the API server stores them and as the cache holds them.
package informers

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/deletioncost"
	"github.com/tailor-autoscaler/tailor/provisioner/launchlimit"
	"github.com/tailor-autoscaler/tailor/provisioner/reservation"
	"github.com/tailor-autoscaler/tailor/provisioner/surge"
)

// CacheOptions are the settings of the sidecar's cache that decide what it holds; the
// caller adds the scheme and the rest.
func CacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:  {Field: UnfinishedPods, Transform: Pod},
			&corev1.Node{}: {Transform: Node},
		},
	}
}

// UnfinishedPods selects the pods that are neither Succeeded nor Failed. Tailor leaves
// finished pods out of every plan and drain, and kube-scheduler's own informer selects
// pods the same way, so a batch cluster's completed Job pods cost no memory.
var UnfinishedPods = fields.AndSelectors(
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)),
)

// podAnnotations are the pod annotations Tailor reads: disruption and the drain leave
// do-not-disrupt pods alone and mirror pods in place; the deletion-cost steering leaves
// alone a cost it did not write; replace before evict reads a pod's opt-in, and a copy's
// marks; reservations count a copy for the ReplicaSet it is to belong to.
var podAnnotations = []string{
	karpv1.DoNotDisruptAnnotationKey, corev1.MirrorPodAnnotationKey,
	deletioncost.PodDeletionCostAnnotationKey, deletioncost.ManagedAnnotationKey,
	surge.AnnotationKey, surge.ReplacesAnnotationKey, surge.DeadlineAnnotationKey, reservation.ControllerAnnotationKey,
}

// Pod cuts a pod down to what Tailor reads: its metadata without managed fields and with
// only the annotations it reads, the phase and readiness, and of the spec what the planner simulates the
// scheduler's filters with (requests, host ports, node selector and affinity, tolerations,
// topology spread, claimed volumes, resource claims, the resources of containers resized in
// place), what the drain reads (priority class, termination
// grace period) and what early intake reads (scheduler name, scheduling gates, priority
// and preemption policy). Anything else is cleared. The pod is changed in place: an informer's
// transform sees each object first.
func Pod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	pod.ManagedFields = nil
	pod.Annotations = only(pod.Annotations, podAnnotations)
	s := &pod.Spec
	pod.Spec = corev1.PodSpec{
		Volumes:                       claimedVolumes(s.Volumes),
		InitContainers:                containers(s.InitContainers),
		Containers:                    containers(s.Containers),
		TerminationGracePeriodSeconds: s.TerminationGracePeriodSeconds,
		NodeSelector:                  s.NodeSelector,
		NodeName:                      s.NodeName,
		Affinity:                      s.Affinity,
		Tolerations:                   s.Tolerations,
		PriorityClassName:             s.PriorityClassName,
		Priority:                      s.Priority,
		PreemptionPolicy:              s.PreemptionPolicy,
		SchedulerName:                 s.SchedulerName,
		SchedulingGates:               s.SchedulingGates,
		Overhead:                      s.Overhead,
		TopologySpreadConstraints:     s.TopologySpreadConstraints,
		Resources:                     requestsOnly(s.Resources),
		ResourceClaims:                s.ResourceClaims,
	}
	pod.Status = corev1.PodStatus{
		Phase: pod.Status.Phase, Conditions: readConditions(pod.Status.Conditions), ResourceClaimStatuses: pod.Status.ResourceClaimStatuses,
		ContainerStatuses: resized(pod.Status.ContainerStatuses), InitContainerStatuses: resized(pod.Status.InitContainerStatuses),
	}
	return pod, nil
}

// resized keeps of each container's status what the scheduler counts a pod on a node by
// while it is resized in place: its name, allocated resources and actuated requests.
func resized(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if in == nil {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i, c := range in {
		out[i] = corev1.ContainerStatus{Name: c.Name, AllocatedResources: c.AllocatedResources}
		if c.Resources != nil {
			out[i].Resources = &corev1.ResourceRequirements{Requests: c.Resources.Requests}
		}
	}
	return out
}

// readConditions keeps of a pod's conditions those Tailor reads: Ready, which the pod
// metrics read (its status alone); PodResizePending and PodResizeInProgress, by which the
// scheduler counts a pod being resized (an infeasible resize by its reason); and the launch
// limit's, which a restarted provisioner reads to keep a pod at its limit (whole).
func readConditions(in []corev1.PodCondition) []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, c := range in {
		switch c.Type {
		case corev1.PodReady, corev1.PodResizeInProgress:
			out = append(out, corev1.PodCondition{Type: c.Type, Status: c.Status})
		case corev1.PodResizePending:
			out = append(out, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
		case launchlimit.PodCondition:
			out = append(out, c)
		}
	}
	return out
}

// containers keeps of each container what the scheduler counts: its requests, its host
// ports and, for init containers, whether it is a sidecar (restartPolicy Always).
func containers(in []corev1.Container) []corev1.Container {
	if in == nil {
		return nil
	}
	out := make([]corev1.Container, len(in))
	for i := range in {
		c := &in[i]
		out[i] = corev1.Container{Name: c.Name, Ports: hostPorts(c.Ports), RestartPolicy: c.RestartPolicy}
		if r := requestsOnly(&c.Resources); r != nil {
			out[i].Resources = *r
		}
	}
	return out
}

// requestsOnly is the requirements without limits and claims, which the scheduler does not
// count; nil when nothing is requested.
func requestsOnly(r *corev1.ResourceRequirements) *corev1.ResourceRequirements {
	if r == nil || len(r.Requests) == 0 {
		return nil
	}
	return &corev1.ResourceRequirements{Requests: r.Requests}
}

// hostPorts keeps the ports bound on the node; other container ports do not take a node's
// ports.
func hostPorts(in []corev1.ContainerPort) []corev1.ContainerPort {
	var out []corev1.ContainerPort
	for _, p := range in {
		if p.HostPort > 0 {
			out = append(out, p)
		}
	}
	return out
}

// claimedVolumes keeps the volumes backed by PersistentVolumeClaims, directly or through an
// ephemeral claim template: only they constrain where the pod can run.
func claimedVolumes(in []corev1.Volume) []corev1.Volume {
	var out []corev1.Volume
	for _, v := range in {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			out = append(out, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: v.PersistentVolumeClaim, Ephemeral: v.Ephemeral,
			}})
		}
	}
	return out
}

// Node cuts a node down to what Tailor reads: all of its metadata but the managed fields,
// all of its spec (taints, provider ID, unschedulable), and of its status the allocatable
// resources and the Ready condition. Images, addresses, system info, daemon endpoints,
// volumes, capacity and the other conditions are cleared.
func Node(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	node.ManagedFields = nil
	status := corev1.NodeStatus{Allocatable: node.Status.Allocatable}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			status.Conditions = []corev1.NodeCondition{c}
		}
	}
	node.Status = status
	return node, nil
}

// only keeps the entries of m under keys; nil when none is there.
func only(m map[string]string, keys []string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}
