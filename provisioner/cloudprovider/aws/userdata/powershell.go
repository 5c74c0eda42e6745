package userdata

import (
	"encoding/base64"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/amifamily"
)

// windowsBootstrapScript is where the EKS-optimized Windows AMIs keep their bootstrap.
const windowsBootstrapScript = `$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1`

// windowsUserData renders the PowerShell user data of an EKS-optimized Windows node: the node
// class's own PowerShell first (its <powershell> tags dropped, so it can prepare the
// machine), then Start-EKSBootstrap.ps1 with the cluster, the node's labels and taints and
// the kubelet settings. System-reserved memory defaults to amifamily.WindowsSystemReservedMemory, as
// the planner counts it; max pods is left to the bootstrap unless the class sets it.
func windowsUserData(b Bootstrap) string {
	var script strings.Builder
	script.WriteString("<powershell>\n")
	if custom := strings.TrimSpace(powershellBody(b.Custom)); custom != "" {
		script.WriteString(custom + "\n")
	}
	fmt.Fprintf(&script, "[string]$EKSBootstrapScriptFile = \"%s\"\n", windowsBootstrapScript)
	fmt.Fprintf(&script, "& $EKSBootstrapScriptFile -EKSClusterName %s -APIServerEndpoint %s -Base64ClusterCA %s",
		powershellQuote(b.Cluster.Name), powershellQuote(b.Cluster.Endpoint), powershellQuote(b.Cluster.CABundle))
	if ip := clusterDNSIP(b); ip != "" {
		fmt.Fprintf(&script, " -DNSClusterIP %s", powershellQuote(ip))
	}
	if args := al2KubeletArgs(windowsKubelet(b)); len(args) > 0 {
		fmt.Fprintf(&script, " -KubeletExtraArgs %s", powershellQuote(strings.Join(args, " ")))
	}
	// The bootstrap writes progress to the warning, verbose, debug and information streams;
	// merged into output, they reach the EC2 console log.
	script.WriteString(" 3>&1 4>&1 5>&1 6>&1\n</powershell>\n")
	return base64.StdEncoding.EncodeToString([]byte(script.String()))
}

// windowsKubelet is the bootstrap with systemReserved memory defaulted for Windows.
func windowsKubelet(b Bootstrap) Bootstrap {
	k := b.Kubelet.DeepCopy()
	if k == nil {
		k = &awsv1.KubeletConfiguration{}
	}
	if _, ok := k.SystemReserved[string(corev1.ResourceMemory)]; !ok {
		k.SystemReserved = maps.Clone(k.SystemReserved)
		if k.SystemReserved == nil {
			k.SystemReserved = map[string]string{}
		}
		k.SystemReserved[string(corev1.ResourceMemory)] = amifamily.WindowsSystemReservedMemory.String()
	}
	b.Kubelet = k
	return b
}

// powershellBody is the node class's user data without the <powershell> tags that EC2Launch
// looks for: Tailor writes its own around the whole.
func powershellBody(custom string) string {
	s := strings.TrimSpace(custom)
	if body, ok := strings.CutPrefix(s, "<powershell>"); ok {
		s, _ = strings.CutSuffix(strings.TrimSpace(body), "</powershell>")
	}
	return s
}

// powershellQuote quotes a word for PowerShell: a single-quoted string, in which a single
// quote is written twice.
func powershellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
