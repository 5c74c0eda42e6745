package nodeclaim

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

func TestCordoned(t *testing.T) {
	tests := []struct {
		name   string
		taints []corev1.Taint
		want   bool
	}{
		{name: "no taints"},
		{name: "another NoSchedule taint", taints: []corev1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}},
		{name: "the disrupted taint", taints: []corev1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}, karpv1.DisruptedNoScheduleTaint}, want: true},
		{name: "the disrupted key with another effect", taints: []corev1.Taint{{Key: karpv1.DisruptedNoScheduleTaint.Key, Effect: corev1.TaintEffectNoExecute}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Cordoned(&corev1.Node{Spec: corev1.NodeSpec{Taints: tt.taints}}); got != tt.want {
				t.Errorf("Cordoned() = %t, want %t", got, tt.want)
			}
		})
	}
}

func TestOwnedByDaemonSet(t *testing.T) {
	owner := func(kind string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: "x", Controller: ptr.To(controller)}
	}
	tests := []struct {
		name   string
		owners []metav1.OwnerReference
		want   bool
	}{
		{name: "no owner"},
		{name: "a ReplicaSet's", owners: []metav1.OwnerReference{owner("ReplicaSet", true)}},
		{name: "a DaemonSet's", owners: []metav1.OwnerReference{owner("DaemonSet", true)}, want: true},
		{name: "a DaemonSet owns it but does not control it", owners: []metav1.OwnerReference{owner("DaemonSet", false), owner("Job", true)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := OwnedByDaemonSet(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: tt.owners}}); got != tt.want {
				t.Errorf("OwnedByDaemonSet() = %t, want %t", got, tt.want)
			}
		})
	}
}
