package userdata

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// al2UserData renders the MIME document of an EKS-optimized Amazon Linux 2 node: the node
// class's own user data first, then a script that runs the AMI's /etc/eks/bootstrap.sh with
// the cluster, the node's labels and taints and the node class's kubelet settings.
// Settings left out are computed by bootstrap.sh per instance type (max pods from its ENI
// table, kube-reserved by the EKS formula).
func al2UserData(b Bootstrap) (string, error) {
	var script strings.Builder
	script.WriteString("#!/bin/bash -xe\n")
	script.WriteString("exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n")
	fmt.Fprintf(&script, "/etc/eks/bootstrap.sh %s --apiserver-endpoint %s --b64-cluster-ca %s",
		shellQuote(b.Cluster.Name), shellQuote(b.Cluster.Endpoint), shellQuote(b.Cluster.CABundle))
	if ip := clusterDNSIP(b); ip != "" {
		fmt.Fprintf(&script, " \\\n--dns-cluster-ip %s", shellQuote(ip))
	}
	if b.Kubelet != nil && b.Kubelet.MaxPods != nil {
		script.WriteString(" \\\n--use-max-pods false")
	}
	if b.RAID0 {
		script.WriteString(" \\\n--local-disks raid0")
	}
	if args := al2KubeletArgs(b); len(args) > 0 {
		fmt.Fprintf(&script, " \\\n--kubelet-extra-args %s", shellQuote(strings.Join(args, " ")))
	}
	script.WriteString("\n")
	return mimeUserData(b.Custom, "text/x-shellscript; charset=\"us-ascii\"", mimePart{contentType: "text/x-shellscript; charset=\"us-ascii\"", body: script.String()})
}

// al2KubeletArgs are the kubelet flags bootstrap.sh passes on: labels and taints, then the
// node class's settings. A flag replaces what bootstrap.sh would have configured for it.
func al2KubeletArgs(b Bootstrap) []string {
	args := kubeletFlags(b.Labels, b.Taints)
	k := b.Kubelet
	if k == nil {
		return args
	}
	if k.MaxPods != nil {
		args = append(args, "--max-pods="+strconv.Itoa(int(*k.MaxPods)))
	}
	if k.PodsPerCore != nil {
		args = append(args, "--pods-per-core="+strconv.Itoa(int(*k.PodsPerCore)))
	}
	for _, m := range []struct {
		flag, sep string
		values    map[string]string
	}{
		{"--system-reserved", "=", k.SystemReserved},
		{"--kube-reserved", "=", k.KubeReserved},
		{"--eviction-hard", "<", k.EvictionHard},
		{"--eviction-soft", "<", k.EvictionSoft},
	} {
		if len(m.values) > 0 {
			args = append(args, m.flag+"="+joinMap(m.values, m.sep))
		}
	}
	if len(k.EvictionSoftGracePeriod) > 0 {
		periods := map[string]string{}
		for signal, d := range k.EvictionSoftGracePeriod {
			periods[signal] = d.Duration.String()
		}
		args = append(args, "--eviction-soft-grace-period="+joinMap(periods, "="))
	}
	if k.EvictionMaxPodGracePeriod != nil {
		args = append(args, "--eviction-max-pod-grace-period="+strconv.Itoa(int(*k.EvictionMaxPodGracePeriod)))
	}
	if k.ImageGCHighThresholdPercent != nil {
		args = append(args, "--image-gc-high-threshold="+strconv.Itoa(int(*k.ImageGCHighThresholdPercent)))
	}
	if k.ImageGCLowThresholdPercent != nil {
		args = append(args, "--image-gc-low-threshold="+strconv.Itoa(int(*k.ImageGCLowThresholdPercent)))
	}
	if k.CPUCFSQuota != nil {
		args = append(args, "--cpu-cfs-quota="+strconv.FormatBool(*k.CPUCFSQuota))
	}
	return args
}

// joinMap writes a map as the kubelet's key<sep>value,... flag value, in key order.
func joinMap(m map[string]string, sep string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = k + sep + m[k]
	}
	return strings.Join(pairs, ",")
}

// clusterDNSIP is the node class's first clusterDNS, or the tenth address of the service
// CIDR, where EKS puts CoreDNS's Service.
func clusterDNSIP(b Bootstrap) string {
	if b.Kubelet != nil && len(b.Kubelet.ClusterDNS) > 0 {
		return b.Kubelet.ClusterDNS[0]
	}
	prefix, err := netip.ParsePrefix(b.Cluster.ServiceCIDR)
	if err != nil || !prefix.Addr().Is4() {
		return ""
	}
	addr := prefix.Masked().Addr()
	for range 10 {
		addr = addr.Next()
	}
	return addr.String()
}

// shellQuote quotes a word for bash.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
