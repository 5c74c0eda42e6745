package surge

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/reservation"
)

// podDeletionCostAnnotationKey is the ReplicaSet controller's deletion cost: a ReplicaSet
// with more pods than it wants deletes the one of the lowest cost first.
const podDeletionCostAnnotationKey = "controller.kubernetes.io/pod-deletion-cost"

// Copy is the pod that replaces plan.Pod: a pod of its ReplicaSet's template, owned until
// Release by the NodeClaim whose node plan.Pod leaves, and due Ready by deadline.
func Copy(plan *Plan, owner *karpv1.NodeClaim, deadline time.Time) *corev1.Pod {
	tmpl := plan.ReplicaSet.Spec.Template.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:    plan.Pod.Namespace,
			GenerateName: plan.ReplicaSet.Name + "-",
			Labels:       tmpl.Labels,
			Annotations:  tmpl.Annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodeClaim", Name: owner.Name, UID: owner.UID,
				Controller: new(true), BlockOwnerDeletion: new(false),
			}},
		},
		Spec: tmpl.Spec,
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[ReplacesLabelKey] = string(plan.Pod.UID)
	metav1.SetMetaDataAnnotation(&pod.ObjectMeta, ReplacesAnnotationKey, plan.Pod.Name)
	metav1.SetMetaDataAnnotation(&pod.ObjectMeta, DeadlineAnnotationKey, deadline.UTC().Format(time.RFC3339))
	metav1.SetMetaDataAnnotation(&pod.ObjectMeta, reservation.ControllerAnnotationKey, string(plan.ReplicaSet.UID))
	return pod
}

// Deadline is when a copy must be Ready; false when it carries no readable deadline.
func Deadline(copy *corev1.Pod) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339, copy.Annotations[DeadlineAnnotationKey])
	return t, err == nil
}

// IsCopy reports whether a pod is a copy not yet released.
func IsCopy(p *corev1.Pod) bool {
	_, ok := p.Labels[ReplacesLabelKey]
	return ok
}

// Release hands a Ready copy to its ReplicaSet: the old pod (nil when it is gone) gets the
// lowest deletion cost first, then the copy loses its owner and marks. The ReplicaSet adopts
// the copy, has one pod too many, and deletes the old one. A deletion cost the old pod had
// is overwritten: the pod is on its way out.
func Release(ctx context.Context, kube client.Client, copy, old *corev1.Pod) error {
	if old != nil && old.DeletionTimestamp == nil {
		patch := client.MergeFrom(old.DeepCopy())
		metav1.SetMetaDataAnnotation(&old.ObjectMeta, podDeletionCostAnnotationKey, strconv.Itoa(math.MinInt32))
		if err := kube.Patch(ctx, old, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("giving pod %s/%s the lowest deletion cost: %w", old.Namespace, old.Name, err)
		}
	}
	patch := client.MergeFrom(copy.DeepCopy())
	copy.OwnerReferences = nil
	delete(copy.Labels, ReplacesLabelKey)
	for _, k := range []string{ReplacesAnnotationKey, DeadlineAnnotationKey, reservation.ControllerAnnotationKey} {
		delete(copy.Annotations, k)
	}
	if err := kube.Patch(ctx, copy, patch); err != nil {
		return fmt.Errorf("handing pod %s/%s to its ReplicaSet: %w", copy.Namespace, copy.Name, err)
	}
	return nil
}
