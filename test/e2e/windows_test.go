package e2e

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/test/localaws"
)

// TestWindowsPodGetsAWindowsNode applies a windows2022@latest EC2NodeClass and its NodePool
// beside a Linux one (see testdata/windows.yaml): the pod selecting kubernetes.io/os=windows
// runs on a new Windows Server 2022 node, launched from the Windows AMI and registered by the
// simulated kubelet from the PowerShell user data, and the Linux pod created alongside runs
// on a Linux node.
func TestWindowsPodGetsAWindowsNode(t *testing.T) {
	e := startStack(t)
	start := time.Now()
	e.apply(t, "windows.yaml")
	e.waitNodeClassReady(t, "windows2022")
	e.waitNodeClassReady(t, "default")

	windowsPod := e.waitRunning(t, "windows-app", 3*time.Minute)
	t.Logf("Windows pod running on %s %s after apply", windowsPod.Spec.NodeName, time.Since(start).Round(time.Second))
	linuxPod := e.waitRunning(t, "linux-app", 3*time.Minute)
	if linuxPod.Spec.NodeName == windowsPod.Spec.NodeName {
		t.Fatalf("the Linux pod runs on the Windows node %s", windowsPod.Spec.NodeName)
	}

	nodeLabels := func(name string) map[string]string {
		node, err := e.cs.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return map[string]string{
			corev1.LabelOSStable:       node.Labels[corev1.LabelOSStable],
			corev1.LabelWindowsBuild:   node.Labels[corev1.LabelWindowsBuild],
			corev1.LabelArchStable:     node.Labels[corev1.LabelArchStable],
			karpv1.NodePoolLabelKey:    node.Labels[karpv1.NodePoolLabelKey],
			"nodeInfo.operatingSystem": node.Status.NodeInfo.OperatingSystem,
		}
	}
	want := map[string]string{
		corev1.LabelOSStable: "windows", corev1.LabelWindowsBuild: "10.0.20348", corev1.LabelArchStable: "amd64",
		karpv1.NodePoolLabelKey: "windows2022", "nodeInfo.operatingSystem": "windows",
	}
	if diff := cmp.Diff(want, nodeLabels(windowsPod.Spec.NodeName)); diff != "" {
		t.Errorf("Windows pod's node %s (-want +got):\n%s", windowsPod.Spec.NodeName, diff)
	}
	want = map[string]string{
		corev1.LabelOSStable: "linux", corev1.LabelWindowsBuild: "", corev1.LabelArchStable: linuxPodArch(t, e, linuxPod),
		karpv1.NodePoolLabelKey: "linux", "nodeInfo.operatingSystem": "linux",
	}
	if diff := cmp.Diff(want, nodeLabels(linuxPod.Spec.NodeName)); diff != "" {
		t.Errorf("Linux pod's node %s (-want +got):\n%s", linuxPod.Spec.NodeName, diff)
	}

	// The NodeClaim says the same, and the class's status gives the Windows AMI for amd64.
	for _, nc := range e.nodeClaims(t) {
		if nc.Status.NodeName != windowsPod.Spec.NodeName {
			continue
		}
		t.Logf("Windows NodeClaim %s: %s, planned price %s", nc.Name, nc.Labels[corev1.LabelInstanceTypeStable], nc.Annotations[cloudprovider.PlannedPriceAnnotationKey])
		if nc.Labels[corev1.LabelOSStable] != "windows" || nc.Labels[corev1.LabelWindowsBuild] != "10.0.20348" {
			t.Errorf("NodeClaim %s labels %v, want kubernetes.io/os=windows and node.kubernetes.io/windows-build=10.0.20348", nc.Name, nc.Labels)
		}
	}
	class := &awsv1.EC2NodeClass{}
	if err := e.kube.Get(e.ctx, client.ObjectKey{Name: "windows2022"}, class); err != nil {
		t.Fatal(err)
	}
	if len(class.Status.AMIs) != 1 || class.Status.AMIs[0].Name != "Windows_Server-2022-English-Core-EKS_Optimized-"+localaws.DefaultKubernetesVersion+"-2026.11.12" {
		t.Errorf("EC2NodeClass windows2022 status.amis %+v, want the latest Windows Server 2022 EKS AMI alone", class.Status.AMIs)
	}
}

// linuxPodArch is the architecture the Linux pod's NodeClaim was launched with: the Linux
// NodePool allows both.
func linuxPodArch(t *testing.T, e *env, pod *corev1.Pod) string {
	t.Helper()
	for _, nc := range e.nodeClaims(t) {
		if nc.Status.NodeName == pod.Spec.NodeName {
			return nc.Labels[corev1.LabelArchStable]
		}
	}
	t.Fatalf("no NodeClaim for node %s", pod.Spec.NodeName)
	return ""
}
