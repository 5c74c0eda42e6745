package localaws

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// nodeConfigMediaType marks the MIME part that holds a nodeadm NodeConfig.
const nodeConfigMediaType = "application/node.eks.aws"

// nodeConfig is the part of a nodeadm NodeConfig the simulated kubelet reads.
type nodeConfig struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Spec       nodeConfigSpec `json:"spec"`
}

type nodeConfigSpec struct {
	Cluster struct {
		Name              string `json:"name"`
		APIServerEndpoint string `json:"apiServerEndpoint"`
		CIDR              string `json:"cidr"`
	} `json:"cluster"`
	Instance struct {
		LocalStorage struct {
			Strategy string `json:"strategy"`
		} `json:"localStorage"`
	} `json:"instance"`
	Kubelet struct {
		Config kubeletConfig `json:"config"`
		Flags  []string      `json:"flags"`
	} `json:"kubelet"`
}

// kubeletConfig is the part of a KubeletConfiguration that shapes the Node.
type kubeletConfig struct {
	MaxPods        *int32            `json:"maxPods"`
	KubeReserved   map[string]string `json:"kubeReserved"`
	SystemReserved map[string]string `json:"systemReserved"`
	EvictionHard   map[string]string `json:"evictionHard"`
}

// kubeletSettings is what the user data asks of the kubelet: Node labels and taints, the pod
// limit and the resources held back from pods.
type kubeletSettings struct {
	labels         map[string]string
	taints         []corev1.Taint
	maxPods        *int32
	kubeReserved   corev1.ResourceList
	systemReserved corev1.ResourceList
	// defaultKubeReserved is set when the bootstrap fills in, by the EKS formula, the
	// kube-reserved resources the configuration leaves out: nodeadm (AL2023) and Bottlerocket
	// do so per resource, AL2's bootstrap.sh unless --kube-reserved replaces them all.
	defaultKubeReserved bool
	// raid0 is set when the bootstrap puts the instance store's disks in one RAID0 array
	// under the kubelet's directory.
	raid0 bool
	// memoryEviction and nodefsEviction are the evictionHard memory.available and
	// nodefs.available thresholds, each a quantity or a percentage; empty means the
	// kubelet's default.
	memoryEviction, nodefsEviction string
}

// errNoNodeConfig reports user data that holds no NodeConfig, such as Bottlerocket's TOML.
var errNoNodeConfig = errors.New("user data holds no NodeConfig")

// parseUserData reads the kubelet settings from base64 user data: a MIME multipart document
// with an application/node.eks.aws part, as nodeadm reads it, or a bare NodeConfig. Other MIME
// parts, such as shell scripts, are ignored; several NodeConfig parts are merged in order.
func parseUserData(encoded string) (kubeletSettings, error) {
	if encoded == "" {
		return kubeletSettings{}, errNoNodeConfig
	}
	raw, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return kubeletSettings{}, fmt.Errorf("decoding base64 user data: %w", err)
	}
	if settings, ok, err := parseBottlerocket(raw); ok {
		return settings, err
	}
	if settings, ok, err := parseEKSBootstrap(raw); ok {
		return settings, err
	}
	if settings, ok, err := parseWindowsBootstrap(raw); ok {
		return settings, err
	}
	documents, err := nodeConfigDocuments(raw)
	if err != nil {
		return kubeletSettings{}, err
	}
	var merged nodeConfig
	for _, doc := range documents {
		var cfg nodeConfig
		if err := yaml.Unmarshal(doc, &cfg); err != nil {
			return kubeletSettings{}, fmt.Errorf("decoding NodeConfig: %w", err)
		}
		if cfg.Kind != "NodeConfig" || !strings.HasPrefix(cfg.APIVersion, "node.eks.aws/") {
			return kubeletSettings{}, fmt.Errorf("decoding NodeConfig: got kind %q of %q", cfg.Kind, cfg.APIVersion)
		}
		mergeNodeConfig(&merged, cfg)
	}
	settings, err := settingsFrom(merged.Spec.Kubelet.Config, merged.Spec.Kubelet.Flags)
	settings.defaultKubeReserved = true
	settings.raid0 = merged.Spec.Instance.LocalStorage.Strategy == "RAID0"
	return settings, err
}

// nodeConfigDocuments returns the NodeConfig YAML documents of decoded user data.
func nodeConfigDocuments(raw []byte) ([][]byte, error) {
	if msg, err := mail.ReadMessage(bytes.NewReader(raw)); err == nil {
		mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
		if err == nil && strings.HasPrefix(mediaType, "multipart/") {
			return multipartNodeConfigs(multipart.NewReader(msg.Body, params["boundary"]))
		}
	}
	if bytes.Contains(raw, []byte("kind: NodeConfig")) {
		return [][]byte{raw}, nil
	}
	return nil, errNoNodeConfig
}

// multipartNodeConfigs returns the bodies of the NodeConfig parts of a MIME multipart document.
func multipartNodeConfigs(reader *multipart.Reader) ([][]byte, error) {
	var docs [][]byte
	for {
		part, err := reader.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading MIME part of user data: %w", err)
		}
		partType, _, err := mime.ParseMediaType(part.Header.Get("Content-Type"))
		if err != nil || partType != nodeConfigMediaType {
			continue
		}
		var body io.Reader = part
		if strings.EqualFold(part.Header.Get("Content-Transfer-Encoding"), "base64") {
			body = base64.NewDecoder(base64.StdEncoding, part)
		}
		doc, err := io.ReadAll(body)
		if err != nil {
			return nil, fmt.Errorf("reading NodeConfig part of user data: %w", err)
		}
		docs = append(docs, doc)
	}
	if len(docs) == 0 {
		return nil, errNoNodeConfig
	}
	return docs, nil
}

// mergeNodeConfig lays cfg over into: flags add up, set settings replace earlier ones.
func mergeNodeConfig(into *nodeConfig, cfg nodeConfig) {
	if cfg.Spec.Instance.LocalStorage.Strategy != "" {
		into.Spec.Instance = cfg.Spec.Instance
	}
	into.Spec.Kubelet.Flags = append(into.Spec.Kubelet.Flags, cfg.Spec.Kubelet.Flags...)
	c, next := &into.Spec.Kubelet.Config, cfg.Spec.Kubelet.Config
	if next.MaxPods != nil {
		c.MaxPods = next.MaxPods
	}
	c.KubeReserved = mergeStrings(c.KubeReserved, next.KubeReserved)
	c.SystemReserved = mergeStrings(c.SystemReserved, next.SystemReserved)
	c.EvictionHard = mergeStrings(c.EvictionHard, next.EvictionHard)
}

func mergeStrings(base, over map[string]string) map[string]string {
	if len(over) == 0 {
		return base
	}
	out := make(map[string]string, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// settingsFrom reads the kubelet configuration and command-line flags. Flags win over the
// configuration, as they do for the kubelet.
func settingsFrom(cfg kubeletConfig, flags []string) (kubeletSettings, error) {
	out := kubeletSettings{labels: map[string]string{}, maxPods: cfg.MaxPods}
	var err error
	if out.kubeReserved, err = resourceList(cfg.KubeReserved); err != nil {
		return kubeletSettings{}, fmt.Errorf("reading kubeReserved: %w", err)
	}
	if out.systemReserved, err = resourceList(cfg.SystemReserved); err != nil {
		return kubeletSettings{}, fmt.Errorf("reading systemReserved: %w", err)
	}
	for signal, into := range map[string]*string{"memory.available": &out.memoryEviction, "nodefs.available": &out.nodefsEviction} {
		v, ok := cfg.EvictionHard[signal]
		if !ok {
			continue
		}
		if _, err := evictionThreshold(v, resource.MustParse("1Gi")); err != nil {
			return kubeletSettings{}, fmt.Errorf("reading evictionHard %s: %w", signal, err)
		}
		*into = v
	}
	for _, flag := range flags {
		name, value, _ := strings.Cut(strings.TrimLeft(flag, "-"), "=")
		switch name {
		case "node-labels":
			for _, pair := range splitList(value) {
				k, v, ok := strings.Cut(pair, "=")
				if !ok || k == "" {
					return kubeletSettings{}, fmt.Errorf("reading --node-labels: %q is not key=value", pair)
				}
				out.labels[k] = v
			}
		case "register-with-taints":
			for _, spec := range splitList(value) {
				t, err := parseTaint(spec)
				if err != nil {
					return kubeletSettings{}, fmt.Errorf("reading --register-with-taints: %w", err)
				}
				out.taints = append(out.taints, t)
			}
		case "kube-reserved", "system-reserved":
			values, err := flagMap(value, "=")
			if err == nil {
				var list corev1.ResourceList
				list, err = resourceList(values)
				if name == "kube-reserved" {
					out.kubeReserved = list
				} else {
					out.systemReserved = list
				}
			}
			if err != nil {
				return kubeletSettings{}, fmt.Errorf("reading --%s: %w", name, err)
			}
		case "eviction-hard":
			values, err := flagMap(value, "<")
			if err != nil {
				return kubeletSettings{}, fmt.Errorf("reading --eviction-hard: %w", err)
			}
			if v, ok := values["memory.available"]; ok {
				out.memoryEviction = v
			}
			if v, ok := values["nodefs.available"]; ok {
				out.nodefsEviction = v
			}
		case "max-pods":
			n, err := strconv.ParseInt(value, 10, 32)
			if err != nil || n < 1 {
				return kubeletSettings{}, fmt.Errorf("reading --max-pods: %q is not a positive number", value)
			}
			pods := int32(n)
			out.maxPods = &pods
		}
	}
	return out, nil
}

// flagMap reads a flag value written key<sep>value,...
func flagMap(value, sep string) (map[string]string, error) {
	out := map[string]string{}
	for _, pair := range splitList(value) {
		k, v, ok := strings.Cut(pair, sep)
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key%svalue", pair, sep)
		}
		out[k] = v
	}
	return out, nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// parseTaint reads a taint written key[=value]:Effect.
func parseTaint(spec string) (corev1.Taint, error) {
	keyValue, effect, ok := strings.Cut(spec, ":")
	if !ok {
		return corev1.Taint{}, fmt.Errorf("taint %q has no effect; write key[=value]:Effect", spec)
	}
	switch corev1.TaintEffect(effect) {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return corev1.Taint{}, fmt.Errorf("taint %q has effect %q; use NoSchedule, PreferNoSchedule or NoExecute", spec, effect)
	}
	key, value, _ := strings.Cut(keyValue, "=")
	if key == "" {
		return corev1.Taint{}, fmt.Errorf("taint %q has no key", spec)
	}
	return corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)}, nil
}

// resourceList parses reserved resources such as {cpu: 70m, memory: 574Mi}.
func resourceList(in map[string]string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for name, v := range in {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[corev1.ResourceName(name)] = q
	}
	return out, nil
}

// evictionThreshold returns a threshold given as a quantity or as a percentage of capacity.
func evictionThreshold(v string, capacity resource.Quantity) (resource.Quantity, error) {
	if pct, ok := strings.CutSuffix(v, "%"); ok {
		f, err := strconv.ParseFloat(pct, 64)
		if err != nil || f < 0 || f > 100 {
			return resource.Quantity{}, fmt.Errorf("%q is not a percentage", v)
		}
		return *resource.NewQuantity(int64(float64(capacity.Value())*f/100), resource.BinarySI), nil
	}
	return resource.ParseQuantity(v)
}
