// Package userdata renders the user data that bootstraps a node of each AMI family: AL2023
// nodeadm configuration, AL2 bootstrap.sh, Bottlerocket TOML settings and the PowerShell of
// the Windows AMIs, merged with the node class's own user data.
package userdata

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"net/textproto"
	"slices"
	"sort"
	"strconv"
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

// Complete reports whether the cluster settings need nothing from EKS.
func (c ClusterInfo) Complete() bool {
	return c.Endpoint != "" && c.CABundle != "" && c.ServiceCIDR != ""
}

// Bootstrap is what the user data of a node must say beyond the cluster: the labels and
// taints it registers with and the kubelet settings of its node class.
type Bootstrap struct {
	// Cluster is the cluster the node joins.
	Cluster ClusterInfo
	// Labels and Taints are those the node registers with.
	Labels map[string]string
	Taints []corev1.Taint
	// Kubelet holds the node class's kubelet settings.
	Kubelet *awsv1.KubeletConfiguration
	// Custom is the node class's own user data, merged in.
	Custom string
	// RAID0 puts the instance store's NVMe disks into one RAID0 array for ephemeral storage.
	RAID0 bool
}

// Render renders the user data of a node of the AMI family, base64-encoded as EC2 takes
// it: the family's bootstrap merged with the node class's own user data, or for Custom the
// node class's user data alone, unchanged.
func Render(family string, b Bootstrap) (string, error) {
	switch family {
	case awsv1.AMIFamilyAL2023:
		return al2023UserData(b)
	case awsv1.AMIFamilyAL2:
		return al2UserData(b)
	case awsv1.AMIFamilyBottlerocket:
		return bottlerocketUserData(b)
	case awsv1.AMIFamilyWindows2019, awsv1.AMIFamilyWindows2022:
		return windowsUserData(b), nil
	case awsv1.AMIFamilyCustom:
		return base64.StdEncoding.EncodeToString([]byte(b.Custom)), nil
	}
	return "", fmt.Errorf("unknown AMI family %q: use AL2023, AL2, Bottlerocket, Windows2019, Windows2022 or Custom", family)
}

// nodeConfig is the subset of the AL2023 nodeadm NodeConfig (node.eks.aws/v1alpha1) Tailor
// writes.
type nodeConfig struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Spec       nodeConfigSpec `json:"spec"`
}

type nodeConfigSpec struct {
	Cluster  nodeConfigCluster   `json:"cluster"`
	Instance *nodeConfigInstance `json:"instance,omitempty"`
	Kubelet  nodeConfigKubelet   `json:"kubelet"`
}

type nodeConfigInstance struct {
	LocalStorage nodeConfigLocalStorage `json:"localStorage"`
}

// nodeConfigLocalStorage is how nodeadm sets up the instance store (strategy RAID0 mounts
// one array of all NVMe disks under the kubelet's and containerd's directories).
type nodeConfigLocalStorage struct {
	Strategy string `json:"strategy"`
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

// mimeBoundary separates the parts of MIME user data, unless a part holds a line that
// would read as it (see boundaryFor).
const mimeBoundary = "//"

// boundaryFor returns a MIME boundary that no line of any part reads as: cloud-init splits
// the document at every line that is "--" and the boundary, whatever the part it is in, so
// a script whose here-document holds "--//" would otherwise be cut in two.
func boundaryFor(parts []mimePart) string {
	for i := 0; ; i++ {
		boundary := mimeBoundary
		if i > 0 {
			boundary += strconv.Itoa(i)
		}
		if !slices.ContainsFunc(parts, func(p mimePart) bool { return strings.Contains(p.body, "--"+boundary) }) {
			return boundary
		}
	}
}

// al2023UserData renders a nodeadm MIME document: the node class's own user data first
// (so it can prepare the machine), then the NodeConfig.
func al2023UserData(b Bootstrap) (string, error) {
	cfg := nodeConfig{
		APIVersion: "node.eks.aws/v1alpha1",
		Kind:       "NodeConfig",
		Spec: nodeConfigSpec{
			Cluster: nodeConfigCluster{Name: b.Cluster.Name, APIServerEndpoint: b.Cluster.Endpoint, CertificateAuthority: b.Cluster.CABundle, CIDR: b.Cluster.ServiceCIDR},
			Kubelet: nodeConfigKubelet{Config: kubeletConfig(b.Kubelet), Flags: kubeletFlags(b.Labels, b.Taints)},
		},
	}
	if b.RAID0 {
		cfg.Spec.Instance = &nodeConfigInstance{LocalStorage: nodeConfigLocalStorage{Strategy: "RAID0"}}
	}
	doc, err := yaml.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("encoding NodeConfig: %w", err)
	}
	contentType := "text/x-shellscript; charset=\"us-ascii\""
	if strings.HasPrefix(strings.TrimSpace(b.Custom), "apiVersion: node.eks.aws") {
		contentType = "application/node.eks.aws"
	}
	return mimeUserData(b.Custom, contentType, mimePart{contentType: "application/node.eks.aws", body: string(doc)})
}

// mimePart is one part of a MIME multipart user data document.
type mimePart struct {
	contentType, body string
}

// mimeUserData renders a MIME multipart document, base64-encoded: the node class's own user
// data first (its parts, when it is a MIME document itself, else one part of customType),
// so it can prepare the machine, then Tailor's parts.
func mimeUserData(custom, customType string, parts ...mimePart) (string, error) {
	var all []mimePart
	if custom != "" {
		own, err := customParts(custom, customType)
		if err != nil {
			return "", err
		}
		all = slices.Concat(own, parts)
	} else {
		all = parts
	}
	boundary := boundaryFor(all)
	var buf bytes.Buffer
	buf.WriteString("MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"" + boundary + "\"\r\n\r\n")
	w := multipart.NewWriter(&buf)
	if err := w.SetBoundary(boundary); err != nil {
		return "", fmt.Errorf("writing user data: %w", err)
	}
	for _, p := range all {
		if err := writePart(w, p.contentType, p.body); err != nil {
			return "", err
		}
	}
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("writing user data: %w", err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

// customParts splits the node class's user data into MIME parts: the parts of a MIME
// multipart document, or the whole as one part of contentType.
func customParts(custom, contentType string) ([]mimePart, error) {
	if !strings.HasPrefix(strings.TrimSpace(custom), "MIME-Version:") {
		return []mimePart{{contentType: contentType, body: custom}}, nil
	}
	// The multipart reader wants the closing boundary ended the way the first one is.
	newline := "\n"
	if strings.Contains(custom, "\r\n") {
		newline = "\r\n"
	}
	msg, err := mail.ReadMessage(strings.NewReader(strings.TrimSpace(custom) + newline))
	if err != nil {
		return nil, fmt.Errorf("reading userData as a MIME document: %w", err)
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mediaType, "multipart/") {
		return nil, fmt.Errorf("reading userData as a MIME document: Content-Type %q is not multipart", msg.Header.Get("Content-Type"))
	}
	var parts []mimePart
	r := multipart.NewReader(msg.Body, params["boundary"])
	for {
		part, err := r.NextPart()
		if errors.Is(err, io.EOF) {
			return parts, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading userData as a MIME document: %w", err)
		}
		body, err := io.ReadAll(part)
		if err != nil {
			return nil, fmt.Errorf("reading userData as a MIME document: %w", err)
		}
		parts = append(parts, mimePart{contentType: part.Header.Get("Content-Type"), body: string(body)})
	}
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
