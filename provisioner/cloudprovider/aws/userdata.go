package aws

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"mime/multipart"
	"net/textproto"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
)

// ClusterInfo is what a node needs to join the cluster.
type ClusterInfo struct {
	// Name of the EKS cluster.
	Name string
	// Endpoint of the API server.
	Endpoint string
	// CABundle is the base64 PEM of the cluster CA.
	CABundle string
	// ServiceCIDR of the cluster.
	ServiceCIDR string
}

// bootstrap is what the user data of a node must say beyond the cluster: the labels and
// taints it registers with and the kubelet settings of its node class.
type bootstrap struct {
	cluster ClusterInfo
	labels  map[string]string
	taints  []corev1.Taint
	kubelet *awsv1.KubeletConfiguration
	// custom is the node class's own user data, merged in.
	custom string
}

// nodeConfig is the subset of the AL2023 nodeadm NodeConfig (node.eks.aws/v1alpha1) Tailor
// writes.
type nodeConfig struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Spec       nodeConfigSpec `json:"spec"`
}

type nodeConfigSpec struct {
	Cluster nodeConfigCluster `json:"cluster"`
	Kubelet nodeConfigKubelet `json:"kubelet"`
}

type nodeConfigCluster struct {
	Name                 string `json:"name"`
	APIServerEndpoint    string `json:"apiServerEndpoint"`
	CertificateAuthority string `json:"certificateAuthority"`
	CIDR                 string `json:"cidr"`
}

type nodeConfigKubelet struct {
	Config map[string]any `json:"config,omitempty"`
	Flags  []string       `json:"flags,omitempty"`
}

const mimeBoundary = "//"

// al2023UserData renders a nodeadm MIME document: the node class's own user data first
// (so it can prepare the machine), then the NodeConfig.
func al2023UserData(b bootstrap) (string, error) {
	cfg := nodeConfig{
		APIVersion: "node.eks.aws/v1alpha1",
		Kind:       "NodeConfig",
		Spec: nodeConfigSpec{
			Cluster: nodeConfigCluster{Name: b.cluster.Name, APIServerEndpoint: b.cluster.Endpoint, CertificateAuthority: b.cluster.CABundle, CIDR: b.cluster.ServiceCIDR},
			Kubelet: nodeConfigKubelet{Config: kubeletConfig(b.kubelet), Flags: kubeletFlags(b.labels, b.taints)},
		},
	}
	doc, err := yaml.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("encoding NodeConfig: %w", err)
	}
	var buf bytes.Buffer
	buf.WriteString("MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"" + mimeBoundary + "\"\r\n\r\n")
	w := multipart.NewWriter(&buf)
	if err := w.SetBoundary(mimeBoundary); err != nil {
		return "", fmt.Errorf("writing user data: %w", err)
	}
	if b.custom != "" {
		contentType := "text/x-shellscript; charset=\"us-ascii\""
		if strings.HasPrefix(strings.TrimSpace(b.custom), "apiVersion: node.eks.aws") {
			contentType = "application/node.eks.aws"
		}
		if err := writePart(w, contentType, b.custom); err != nil {
			return "", err
		}
	}
	if err := writePart(w, "application/node.eks.aws", string(doc)); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("writing user data: %w", err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

func writePart(w *multipart.Writer, contentType, body string) error {
	part, err := w.CreatePart(textproto.MIMEHeader{"Content-Type": {contentType}})
	if err != nil {
		return fmt.Errorf("writing user data part: %w", err)
	}
	if _, err := part.Write([]byte(body)); err != nil {
		return fmt.Errorf("writing user data part: %w", err)
	}
	return nil
}

// kubeletConfig carries the node class's kubelet settings. Settings it leaves out are
// computed by nodeadm per instance type (max pods, kube-reserved).
func kubeletConfig(k *awsv1.KubeletConfiguration) map[string]any {
	if k == nil {
		return nil
	}
	out := map[string]any{}
	if k.MaxPods != nil {
		out["maxPods"] = *k.MaxPods
	}
	if k.PodsPerCore != nil {
		out["podsPerCore"] = *k.PodsPerCore
	}
	if len(k.ClusterDNS) > 0 {
		out["clusterDNS"] = k.ClusterDNS
	}
	if len(k.KubeReserved) > 0 {
		out["kubeReserved"] = k.KubeReserved
	}
	if len(k.SystemReserved) > 0 {
		out["systemReserved"] = k.SystemReserved
	}
	if len(k.EvictionHard) > 0 {
		out["evictionHard"] = k.EvictionHard
	}
	if len(k.EvictionSoft) > 0 {
		out["evictionSoft"] = k.EvictionSoft
	}
	if k.ImageGCHighThresholdPercent != nil {
		out["imageGCHighThresholdPercent"] = *k.ImageGCHighThresholdPercent
	}
	if k.ImageGCLowThresholdPercent != nil {
		out["imageGCLowThresholdPercent"] = *k.ImageGCLowThresholdPercent
	}
	if k.CPUCFSQuota != nil {
		out["cpuCFSQuota"] = *k.CPUCFSQuota
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// kubeletFlags registers the node with its labels and taints.
func kubeletFlags(labels map[string]string, taints []corev1.Taint) []string {
	var flags []string
	if len(labels) > 0 {
		keys := make([]string, 0, len(labels))
		for k := range labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		pairs := make([]string, len(keys))
		for i, k := range keys {
			pairs[i] = k + "=" + labels[k]
		}
		flags = append(flags, "--node-labels="+strings.Join(pairs, ","))
	}
	if len(taints) > 0 {
		parts := make([]string, len(taints))
		for i, t := range taints {
			parts[i] = t.ToString()
		}
		flags = append(flags, "--register-with-taints="+strings.Join(parts, ","))
	}
	return flags
}
