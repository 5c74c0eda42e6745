package aws

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
)

// Windows nodes: the EKS-optimized Windows Server AMIs, amd64 only, published in SSM for
// the latest release alone, bootstrapped by PowerShell (userdata_powershell.go) and priced
// with the Windows license included (windowspricing.go).

// Windows Server builds, the node.kubernetes.io/windows-build label the kubelet sets.
const (
	windowsBuild2019 = "10.0.17763"
	windowsBuild2022 = "10.0.20348"
)

// windowsSystemReservedMemory is held back for the Windows OS when the node class's kubelet
// sets no systemReserved memory: the Kubernetes documentation (Resource Management for
// Windows nodes) advises reserving at least 2GiB for Windows, the kubelet and the container
// runtime. Tailor writes it into the bootstrap, so the node and the planner agree.
var windowsSystemReservedMemory = resource.MustParse("2Gi")

// defaultWindowsEphemeralStorage is the root volume of the EKS Windows AMIs (/dev/sda1).
var defaultWindowsEphemeralStorage = resource.MustParse("50Gi")

// windowsBuild is the Windows Server build a node class's nodes run ("" for Linux): that of
// its alias's family, else that of its amiFamily.
func windowsBuild(class *awsv1.EC2NodeClass) string {
	family := class.AliasFamily()
	if family == "" {
		family = class.ResolvedAMIFamily()
	}
	switch family {
	case familyWindows2019:
		return windowsBuild2019
	case familyWindows2022:
		return windowsBuild2022
	}
	return ""
}

// windowsAliasParameters names the SSM parameter of the latest EKS-optimized Windows Server
// Core AMI of the Kubernetes version. EKS publishes no pinned Windows releases in SSM.
func windowsAliasParameters(alias, family, version, kubernetesVersion string) (map[string]string, error) {
	if version != aliasVersionLatest {
		return nil, fmt.Errorf("alias %q: Windows AMIs are published only as the latest release: write %s@latest, or select a pinned image by id or name", alias, family)
	}
	year := "2022"
	if family == "windows2019" {
		year = "2019"
	}
	return map[string]string{
		architectureAMD64: "/aws/service/ami-windows-latest/Windows_Server-" + year + "-English-Core-EKS_Optimized-" + kubernetesVersion + "/image_id",
	}, nil
}

// windowsAMIs keeps the amd64 image of a Windows class, the only architecture Windows nodes
// run on, and adds kubernetes.io/os=windows to the requirements it serves.
func windowsAMIs(amis map[string]awsv1.AMI) (map[string]awsv1.AMI, error) {
	ami, ok := amis[architectureAMD64]
	if !ok {
		return nil, errors.New("a Windows node class needs an amd64 image, and the terms select only arm64 ones: select an x86_64 Windows Server AMI")
	}
	ami.Requirements = append(append([]corev1.NodeSelectorRequirement(nil), ami.Requirements...),
		corev1.NodeSelectorRequirement{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{string(corev1.Windows)}})
	return map[string]awsv1.AMI{architectureAMD64: ami}, nil
}

// validateWindows refuses the settings a Windows node's bootstrap cannot carry out.
func validateWindows(class *awsv1.EC2NodeClass) []error {
	var errs []error
	if p := class.Spec.InstanceStorePolicy; p != nil && *p == awsv1.InstanceStorePolicyRAID0 {
		errs = append(errs, errors.New("spec.instanceStorePolicy RAID0 has no Windows bootstrap setting: remove it, or use a Linux amiFamily"))
	}
	return errs
}

// windowsMaxPods is the pod limit of a Windows node: the VPC resource controller gives
// Windows pods the secondary IPv4 addresses of the primary network interface only.
func windowsMaxPods(ipv4PerENI int64) int64 {
	return max(ipv4PerENI-1, 0)
}

// addWindowsOverhead holds back windowsSystemReservedMemory, unless the node class's
// kubelet sets systemReserved memory (then overhead already counts that).
func addWindowsOverhead(overhead corev1.ResourceList, kubelet *awsv1.KubeletConfiguration) {
	if kubelet != nil {
		if _, ok := kubelet.SystemReserved[string(corev1.ResourceMemory)]; ok {
			return
		}
	}
	q := overhead[corev1.ResourceMemory]
	q.Add(windowsSystemReservedMemory)
	overhead[corev1.ResourceMemory] = q
}
