// Package quota tells which pending pods their namespaces' ElasticQuotas let the scheduler
// place, so that capacity is launched only for those: a node launched for a pod the quota
// refuses would stay empty. ElasticQuotas (scheduling.x-k8s.io/v1alpha1) are read by
// scheduler-plugins' CapacityScheduling, which tailor-scheduler runs; Admit answers as its
// PreFilter does. A pod in a namespace with an ElasticQuota is refused when, with the pod,
// its namespace would use more of a resource than the quota's max, or all the namespaces
// with a quota together more than the sum of their mins (a namespace borrows beyond its own
// min only what others leave unused of theirs; CapacityScheduling preempts borrowers to give
// it back, which needs no new capacity either). Pods elsewhere are not limited.
package quota

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// Quota is one namespace's ElasticQuota.
type Quota struct {
	Namespace string
	// Min is what the namespace is guaranteed; a resource absent from it is guaranteed none.
	Min corev1.ResourceList
	// Max caps what the namespace's pods request together; nil caps nothing. As
	// CapacityScheduling reads a max, CPU, memory and ephemeral storage absent from it are
	// capped at zero, and any other resource absent from it is not capped.
	Max corev1.ResourceList
	// Object is the ElasticQuota; events about it go there. Nil when there is none to tell.
	Object client.Object
}

// Reader returns the quotas. It is the provisioner's; ElasticQuotas reads them from the
// cluster.
type Reader interface {
	// Quotas returns one quota per namespace that has one; none when no namespace has.
	Quotas(ctx context.Context) ([]Quota, error)
}

// ElasticQuotas reads quotas from CapacityScheduling's ElasticQuotas. Where the kind is not
// served (the CRD is not installed), no namespace has a quota.
type ElasticQuotas struct {
	Client client.Reader
}

// Quotas lists the ElasticQuotas of every namespace, in order of namespace. CapacityScheduling
// supports one per namespace; of several, the first by name is taken, which is the one the
// scheduler holds unless another was edited since it started.
func (r ElasticQuotas) Quotas(ctx context.Context) ([]Quota, error) {
	list := &schedv1alpha1.ElasticQuotaList{}
	if err := r.Client.List(ctx, list); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing ElasticQuotas: %w", err)
	}
	slices.SortFunc(list.Items, func(a, b schedv1alpha1.ElasticQuota) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	var quotas []Quota
	for i := range list.Items {
		eq := &list.Items[i]
		if len(quotas) > 0 && quotas[len(quotas)-1].Namespace == eq.Namespace {
			continue
		}
		quotas = append(quotas, Quota{Namespace: eq.Namespace, Min: eq.Spec.Min, Max: eq.Spec.Max, Object: eq})
	}
	return quotas, nil
}

// Refusal is a pod its namespace's quota keeps off any node, and why.
type Refusal struct {
	Pod   *corev1.Pod
	Quota Quota
	// Reason names the namespace, the resource and the amounts, for the pod's events.
	Reason string
}

// Admit returns the pods the quotas let the scheduler place, and the others with why not.
// used is, per namespace, what its pods already request: the pods bound to nodes, by any
// scheduler, which CapacityScheduling counts, and those capacity is planned for already,
// which it will (see Used); it is not modified. Pods
// are taken in the order given, each admitted pod adding to what its namespace uses, so that
// of a Deployment only as many pods as its quota still fits are admitted. Pods in namespaces
// without a quota are all admitted.
func Admit(quotas []Quota, used map[string]corev1.ResourceList, pods []*corev1.Pod) (admitted []*corev1.Pod, refused []Refusal) {
	byNamespace := map[string]Quota{}
	inUse := map[string]corev1.ResourceList{}
	total, totalMin := corev1.ResourceList{}, corev1.ResourceList{}
	for _, q := range quotas {
		if _, dup := byNamespace[q.Namespace]; dup {
			continue
		}
		byNamespace[q.Namespace] = q
		inUse[q.Namespace] = corev1.ResourceList{}
		add(inUse[q.Namespace], used[q.Namespace])
		add(total, used[q.Namespace])
		add(totalMin, q.Min)
	}
	for _, p := range pods {
		q, ok := byNamespace[p.Namespace]
		if !ok {
			admitted = append(admitted, p)
			continue
		}
		req := Request(p)
		reason := overMax(q, inUse[q.Namespace], req)
		if reason == "" {
			reason = overMins(q, inUse[q.Namespace], total, totalMin, req)
		}
		if reason != "" {
			refused = append(refused, Refusal{Pod: p, Quota: q, Reason: reason})
			continue
		}
		add(inUse[q.Namespace], req)
		add(total, req)
		admitted = append(admitted, p)
	}
	return admitted, refused
}

// Used sums, per namespace, the requests of the pods (see Request), for Admit. Pods that have
// finished count for nothing: the scheduler forgets them. Pass the pods bound to nodes and
// the pending pods that have capacity planned.
func Used(pods []*corev1.Pod) map[string]corev1.ResourceList {
	used := map[string]corev1.ResourceList{}
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if used[p.Namespace] == nil {
			used[p.Namespace] = corev1.ResourceList{}
		}
		add(used[p.Namespace], Request(p))
	}
	return used
}

// Request is what a pod counts against its namespace's quota, as CapacityScheduling computes
// it: its containers' requests summed, or the largest of any one init container where that is
// larger, plus its overhead. Unlike kube-scheduler's, its sum leaves pod-level requests out
// and counts sidecars (init containers that keep running) as init containers only.
func Request(p *corev1.Pod) corev1.ResourceList {
	if slices.ContainsFunc(p.Spec.InitContainers, func(c corev1.Container) bool { return c.RestartPolicy != nil }) {
		plain := *p
		plain.Spec.InitContainers = slices.Clone(p.Spec.InitContainers)
		for i := range plain.Spec.InitContainers {
			plain.Spec.InitContainers[i].RestartPolicy = nil
		}
		p = &plain
	}
	return resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{SkipPodLevelResources: true})
}

// base are the resources CapacityScheduling compares whether a pod requests them or not, and
// caps at zero in a max that does not name them.
var base = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}

// overMax says how the pod would take its namespace over the quota's max; empty if it would not.
func overMax(q Quota, inUse, req corev1.ResourceList) string {
	if q.Max == nil {
		return ""
	}
	for _, name := range names(req) {
		limit, named := q.Max[name]
		if !named && !slices.Contains(base, name) {
			continue
		}
		if would := sum(inUse[name], req[name]); would.Cmp(limit) > 0 {
			reason := fmt.Sprintf("namespace %s would use %s %s with this pod, over its ElasticQuota max of %s", q.Namespace, name, would.String(), limit.String())
			if !named {
				reason += fmt.Sprintf(" (a max that does not name %s allows none)", name)
			}
			return reason
		}
	}
	return ""
}

// overMins says how the pod would take the namespaces with a quota over the sum of their
// mins; empty if it would not.
func overMins(q Quota, inUse, total, totalMin, req corev1.ResourceList) string {
	for _, name := range names(total, req) {
		limit := totalMin[name]
		if would := sum(total[name], req[name]); would.Cmp(limit) > 0 {
			mine, ownMin := sum(inUse[name], req[name]), q.Min[name]
			return fmt.Sprintf("namespace %s would use %s %s with this pod (its ElasticQuota min is %s), and all namespaces with an ElasticQuota together %s, over the sum of their mins of %s",
				q.Namespace, name, mine.String(), ownMin.String(), would.String(), limit.String())
		}
	}
	return ""
}

// names are the base resources then the others the lists name, in order of name.
func names(lists ...corev1.ResourceList) []corev1.ResourceName {
	var others []corev1.ResourceName
	for _, l := range lists {
		for name := range l {
			if !slices.Contains(base, name) && !slices.Contains(others, name) {
				others = append(others, name)
			}
		}
	}
	slices.Sort(others)
	return append(slices.Clone(base), others...)
}

func sum(a, b resource.Quantity) resource.Quantity {
	s := a.DeepCopy()
	s.Add(b)
	return s
}

// add adds b to a.
func add(a, b corev1.ResourceList) {
	for name, q := range b {
		a[name] = sum(a[name], q)
	}
}
