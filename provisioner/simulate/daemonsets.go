package simulate

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// container is a container of a DaemonSet pod and what it requests.
type container struct {
	name, cpu, memory string
}

// EKSDaemonSets are the DaemonSets of the default EKS add-ons, which every Linux node of an
// EKS cluster runs, with the requests they ship with: the VPC CNI (aws-node, with its
// network policy agent), kube-proxy, the EBS CSI driver's node plugin and the Pod Identity
// agent. Each of their pods takes a pod slot of the node's max pods, host-network or not.
func EKSDaemonSets() []*appsv1.DaemonSet {
	return []*appsv1.DaemonSet{
		eksDaemonSet("aws-node", true, container{"aws-node", "25m", ""}, container{"aws-eks-nodeagent", "25m", ""}),
		eksDaemonSet("kube-proxy", true, container{"kube-proxy", "100m", ""}),
		eksDaemonSet("ebs-csi-node", false, container{"ebs-plugin", "10m", "40Mi"}, container{"node-driver-registrar", "10m", "40Mi"}, container{"liveness-probe", "10m", "40Mi"}),
		eksDaemonSet("eks-pod-identity-agent", true, container{"eks-pod-identity-agent", "", ""}),
	}
}

// eksDaemonSet is a kube-system DaemonSet that tolerates every taint and runs on Linux nodes,
// as the EKS add-ons do.
func eksDaemonSet(name string, hostNetwork bool, containers ...container) *appsv1.DaemonSet {
	spec := corev1.PodSpec{
		HostNetwork:  hostNetwork,
		NodeSelector: map[string]string{corev1.LabelOSStable: "linux"},
		Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
	}
	for _, c := range containers {
		requests := corev1.ResourceList{}
		if c.cpu != "" {
			requests[corev1.ResourceCPU] = resource.MustParse(c.cpu)
		}
		if c.memory != "" {
			requests[corev1.ResourceMemory] = resource.MustParse(c.memory)
		}
		spec.Containers = append(spec.Containers, corev1.Container{Name: c.name, Resources: corev1.ResourceRequirements{Requests: requests}})
	}
	labels := map[string]string{"k8s-app": name}
	return &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, UID: types.UID("eks-" + name)},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}
