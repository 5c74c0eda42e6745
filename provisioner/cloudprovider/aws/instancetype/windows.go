package instancetype

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/amifamily"
)

// Windows nodes: the EKS-optimized Windows Server AMIs, amd64 only, published in SSM for
// the latest release alone, bootstrapped by PowerShell (userdata_powershell.go) and priced
// with the Windows license included (windowspricing.go).

// defaultWindowsEphemeralStorage is the root volume of the EKS Windows AMIs (/dev/sda1).
var defaultWindowsEphemeralStorage = resource.MustParse("50Gi")

// windowsMaxPods is the pod limit of a Windows node: the VPC resource controller gives
// Windows pods the secondary IPv4 addresses of the primary network interface only.
func windowsMaxPods(ipv4PerENI int64) int64 {
	return max(ipv4PerENI-1, 0)
}

// addWindowsOverhead holds back amifamily.WindowsSystemReservedMemory, unless the node class's
// kubelet sets systemReserved memory (then overhead already counts that).
func addWindowsOverhead(overhead corev1.ResourceList, kubelet *awsv1.KubeletConfiguration) {
	if kubelet != nil {
		if _, ok := kubelet.SystemReserved[string(corev1.ResourceMemory)]; ok {
			return
		}
	}
	q := overhead[corev1.ResourceMemory]
	q.Add(amifamily.WindowsSystemReservedMemory)
	overhead[corev1.ResourceMemory] = q
}
