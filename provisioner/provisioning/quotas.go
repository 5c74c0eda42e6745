package provisioning

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/tailor-autoscaler/tailor/provisioner/quota"
)

// ReasonOverQuota is the event reason when the pod's namespace has no room for it in its
// ElasticQuota, so the scheduler would not place it on capacity launched for it.
const ReasonOverQuota = "OverQuota"

// admitted returns the submissions whose pods the namespaces' ElasticQuotas admit, and
// tells the others' pods why they get no capacity. Every submission is admitted when the
// provisioner reads no quotas.
func (p *Provisioner) admitted(ctx context.Context, subs []Submission, unbound map[types.UID]*corev1.Pod) ([]Submission, error) {
	if p.quotas == nil {
		return subs, nil
	}
	quotas, err := p.quotas.Quotas(ctx)
	if err != nil || len(quotas) == 0 {
		return subs, err
	}
	used, err := p.quotaUse(ctx, quotas, unbound)
	if err != nil {
		return nil, err
	}
	pods := make([]*corev1.Pod, len(subs))
	for i, s := range subs {
		pods[i] = s.Pod
	}
	_, refused := quota.Admit(quotas, used, pods)
	if len(refused) == 0 {
		return subs, nil
	}
	out := map[types.UID]bool{}
	for _, r := range refused {
		out[r.Pod.UID] = true
		msg := "no capacity is launched for this pod: " + r.Reason
		p.recorder.Event(r.Pod, corev1.EventTypeWarning, ReasonOverQuota, msg)
		log.FromContext(ctx).Info("pod over its namespace's quota", "pod", klogRef(r.Pod), "reason", r.Reason)
	}
	var in []Submission
	for _, s := range subs {
		if !out[s.Pod.UID] {
			in = append(in, s)
		}
	}
	return in, nil
}

// quotaUse is what the pods of the namespaces with a quota hold: those bound, and those
// pending with capacity planned, as CapacityScheduling counts assigned and nominated pods.
func (p *Provisioner) quotaUse(ctx context.Context, quotas []quota.Quota, unbound map[types.UID]*corev1.Pod) (map[string]corev1.ResourceList, error) {
	var holding []*corev1.Pod
	for _, q := range quotas {
		list := &corev1.PodList{}
		if err := p.kube.List(ctx, list, client.InNamespace(q.Namespace)); err != nil {
			return nil, fmt.Errorf("listing the pods of namespace %s: %w", q.Namespace, err)
		}
		for i := range list.Items {
			pod := &list.Items[i]
			if _, pending := unbound[pod.UID]; !pending || p.tracker.Planned(pod.UID) {
				holding = append(holding, pod)
			}
		}
	}
	return quota.Used(holding), nil
}
