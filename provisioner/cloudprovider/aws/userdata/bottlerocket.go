package userdata

import (
	"bytes"
	"encoding/base64"
	"fmt"

	"github.com/BurntSushi/toml"
)

// bottlerocketUserData renders Bottlerocket's settings TOML: the node class's own TOML with
// Tailor's [settings.kubernetes] laid over it. The cluster fields are Tailor's; labels and
// taints of the same key are Tailor's, others the node class's; the node class's kubelet
// settings replace what its TOML says. Settings left out are computed by Bottlerocket per
// instance type (max pods from its ENI table, kube-reserved by the EKS formula).
// podsPerCore and evictionSoft have no Bottlerocket setting and are refused by
// validateFamily.
func bottlerocketUserData(b Bootstrap) (string, error) {
	doc := map[string]any{}
	if b.Custom != "" {
		if _, err := toml.Decode(b.Custom, &doc); err != nil {
			return "", fmt.Errorf("reading userData as Bottlerocket TOML: %w", err)
		}
	}
	settings, err := table(doc, "settings")
	if err != nil {
		return "", err
	}
	k8s, err := table(settings, "kubernetes")
	if err != nil {
		return "", err
	}
	k8s["cluster-name"] = b.Cluster.Name
	k8s["api-server"] = b.Cluster.Endpoint
	k8s["cluster-certificate"] = b.Cluster.CABundle
	if ip := clusterDNSIP(b); ip != "" {
		k8s["cluster-dns-ip"] = ip
	}
	labels, err := table(k8s, "node-labels")
	if err != nil {
		return "", err
	}
	for key, v := range b.Labels {
		labels[key] = v
	}
	if len(labels) == 0 {
		delete(k8s, "node-labels")
	}
	taints, err := table(k8s, "node-taints")
	if err != nil {
		return "", err
	}
	ours := map[string][]string{}
	for _, t := range b.Taints {
		ours[t.Key] = append(ours[t.Key], t.Value+":"+string(t.Effect))
	}
	for key, v := range ours {
		taints[key] = v
	}
	if len(taints) == 0 {
		delete(k8s, "node-taints")
	}
	if k := b.Kubelet; k != nil {
		if k.MaxPods != nil {
			k8s["max-pods"] = int64(*k.MaxPods)
		}
		for name, values := range map[string]map[string]string{"kube-reserved": k.KubeReserved, "system-reserved": k.SystemReserved, "eviction-hard": k.EvictionHard} {
			if len(values) > 0 {
				k8s[name] = values
			}
		}
		if len(k.ClusterDNS) > 1 {
			k8s["cluster-dns-ip"] = k.ClusterDNS
		}
		if k.ImageGCHighThresholdPercent != nil {
			k8s["image-gc-high-threshold-percent"] = int64(*k.ImageGCHighThresholdPercent)
		}
		if k.ImageGCLowThresholdPercent != nil {
			k8s["image-gc-low-threshold-percent"] = int64(*k.ImageGCLowThresholdPercent)
		}
		if k.CPUCFSQuota != nil {
			k8s["cpu-cfs-quota-enforced"] = *k.CPUCFSQuota
		}
	}
	if b.RAID0 {
		// Bottlerocket's own way to RAID0 the instance store and move the kubelet's,
		// containerd's and pod logs' directories onto it, before the kubelet starts.
		commands, err := table(settings, "bootstrap-commands")
		if err != nil {
			return "", err
		}
		commands["000-mount-instance-storage"] = map[string]any{
			"commands": [][]string{
				{"apiclient", "ephemeral-storage", "init"},
				{"apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"},
			},
			"mode":      "always",
			"essential": true,
		}
	}
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(doc); err != nil {
		return "", fmt.Errorf("encoding Bottlerocket settings: %w", err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

// table returns the TOML table parent[key], creating it when missing.
func table(parent map[string]any, key string) (map[string]any, error) {
	v, ok := parent[key]
	if !ok {
		t := map[string]any{}
		parent[key] = t
		return t, nil
	}
	t, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("reading userData as Bottlerocket TOML: %s is a %T, not a table", key, v)
	}
	return t, nil
}
