// Package amifamily knows the AMI families of EC2NodeClasses: which family a class's nodes
// run, the SSM parameters of each family's aliases, the Windows Server builds, and the
// settings a family's bootstrap cannot carry out.
package amifamily

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
)

// Kubernetes architectures of AMIs and instance types.
const (
	ArchitectureAMD64 = "amd64"
	ArchitectureARM64 = "arm64"
)

// Windows Server builds, the node.kubernetes.io/windows-build label the kubelet sets.
const (
	windowsBuild2019 = "10.0.17763"
	windowsBuild2022 = "10.0.20348"
)

// WindowsSystemReservedMemory is held back for the Windows OS when the node class's kubelet
// sets no systemReserved memory: the Kubernetes documentation (Resource Management for
// Windows nodes) advises reserving at least 2GiB for Windows, the kubelet and the container
// runtime. Tailor writes it into the bootstrap, so the node and the planner agree.
var WindowsSystemReservedMemory = resource.MustParse("2Gi")

// Of is the node class's amiFamily, or the family of its alias. An amiFamily that
// contradicts the alias is refused (Custom may go with any alias).
func Of(class *awsv1.EC2NodeClass) (string, error) {
	aliasFamily := class.AliasFamily()
	if class.Spec.AMIFamily == nil {
		return class.ResolvedAMIFamily(), nil
	}
	if set := *class.Spec.AMIFamily; aliasFamily != "" && set != awsv1.AMIFamilyCustom && set != aliasFamily {
		return "", fmt.Errorf("spec.amiFamily %s contradicts the alias of amiSelectorTerms (%s): remove amiFamily or set it to %s or Custom", set, aliasFamily, aliasFamily)
	}
	return *class.Spec.AMIFamily, nil
}

// Validate refuses node class settings the AMI family's bootstrap cannot carry out.
func Validate(family string, class *awsv1.EC2NodeClass) error {
	var errs []error
	if WindowsBuild(class) != "" {
		errs = append(errs, validateWindows(class)...)
	}
	if k := class.Spec.Kubelet; family == awsv1.AMIFamilyBottlerocket && k != nil {
		if k.PodsPerCore != nil {
			errs = append(errs, errors.New("spec.kubelet.podsPerCore has no Bottlerocket setting: remove it, or set maxPods, or use AL2023"))
		}
		if len(k.EvictionSoft) > 0 || len(k.EvictionSoftGracePeriod) > 0 {
			errs = append(errs, errors.New("spec.kubelet.evictionSoft has no Bottlerocket setting: remove it, or use evictionHard, or use AL2023"))
		}
	}
	return errors.Join(errs...)
}

// aliasVersionLatest is the version of an alias that follows the newest release.
const aliasVersionLatest = "latest"

// AliasParameters names the SSM public parameters that hold an alias's AMI per architecture,
// in the layout AWS publishes: al2023@v20240807, al2@v20240807 and bottlerocket@1.20.3 (or
// v1.20.3) pin a release, @latest follows the recommended one. Windows aliases have only
// @latest and only amd64 (windowsAliasParameters).
func AliasParameters(alias, kubernetesVersion string) (map[string]string, error) {
	family, version, _ := strings.Cut(alias, "@")
	if version == "" {
		return nil, fmt.Errorf("alias %q has no version: write %s@latest or %s@<version>", alias, family, family)
	}
	latest := version == aliasVersionLatest
	switch family {
	case "al2023":
		base := "/aws/service/eks/optimized-ami/" + kubernetesVersion + "/amazon-linux-2023/"
		out := map[string]string{}
		for arch, machine := range map[string]string{ArchitectureAMD64: "x86_64", ArchitectureARM64: "arm64"} {
			name := "recommended"
			if !latest {
				name = "amazon-eks-node-al2023-" + machine + "-standard-" + kubernetesVersion + "-" + version
			}
			out[arch] = base + machine + "/standard/" + name + "/image_id"
		}
		return out, nil
	case "al2":
		base := "/aws/service/eks/optimized-ami/" + kubernetesVersion
		amd, arm := "recommended", "recommended"
		if !latest {
			amd = "amazon-eks-node-" + kubernetesVersion + "-" + version
			arm = "amazon-eks-arm64-node-" + kubernetesVersion + "-" + version
		}
		return map[string]string{
			ArchitectureAMD64: base + "/amazon-linux-2/" + amd + "/image_id",
			ArchitectureARM64: base + "/amazon-linux-2-arm64/" + arm + "/image_id",
		}, nil
	case "windows2019", "windows2022":
		return windowsAliasParameters(alias, family, version, kubernetesVersion)
	case "bottlerocket":
		base := "/aws/service/bottlerocket/aws-k8s-" + kubernetesVersion
		// Bottlerocket publishes its releases without the v that its tags carry.
		version = strings.TrimPrefix(version, "v")
		return map[string]string{
			ArchitectureAMD64: base + "/x86_64/" + version + "/image_id",
			ArchitectureARM64: base + "/arm64/" + version + "/image_id",
		}, nil
	}
	return nil, fmt.Errorf("alias %q: unknown family %q, use al2023, al2, bottlerocket, windows2019 or windows2022", alias, family)
}

// WindowsBuild is the Windows Server build a node class's nodes run ("" for Linux): that of
// its alias's family, else that of its amiFamily.
func WindowsBuild(class *awsv1.EC2NodeClass) string {
	family := class.AliasFamily()
	if family == "" {
		family = class.ResolvedAMIFamily()
	}
	switch family {
	case awsv1.AMIFamilyWindows2019:
		return windowsBuild2019
	case awsv1.AMIFamilyWindows2022:
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
		ArchitectureAMD64: "/aws/service/ami-windows-latest/Windows_Server-" + year + "-English-Core-EKS_Optimized-" + kubernetesVersion + "/image_id",
	}, nil
}

// WindowsAMIs keeps the amd64 image of a Windows class, the only architecture Windows nodes
// run on, and adds kubernetes.io/os=windows to the requirements it serves.
func WindowsAMIs(amis map[string]awsv1.AMI) (map[string]awsv1.AMI, error) {
	ami, ok := amis[ArchitectureAMD64]
	if !ok {
		return nil, errors.New("a Windows node class needs an amd64 image, and the terms select only arm64 ones: select an x86_64 Windows Server AMI")
	}
	ami.Requirements = append(append([]corev1.NodeSelectorRequirement(nil), ami.Requirements...),
		corev1.NodeSelectorRequirement{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{string(corev1.Windows)}})
	return map[string]awsv1.AMI{ArchitectureAMD64: ami}, nil
}

// validateWindows refuses the settings a Windows node's bootstrap cannot carry out.
func validateWindows(class *awsv1.EC2NodeClass) []error {
	var errs []error
	if p := class.Spec.InstanceStorePolicy; p != nil && *p == awsv1.InstanceStorePolicyRAID0 {
		errs = append(errs, errors.New("spec.instanceStorePolicy RAID0 has no Windows bootstrap setting: remove it, or use a Linux amiFamily"))
	}
	return errs
}
