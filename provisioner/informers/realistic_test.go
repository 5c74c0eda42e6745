package informers_test

import (
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// The generated workloads hold what planning needs and little else. The helpers below add
// what a cluster's pods and nodes carry besides, as the API server stores them: what a
// ReplicaSet's template, admission and the kubelet put into a pod, and what the kubelet
// reports of a node. The figures of the memory benchmark depend on it, and the transforms
// must drop it without changing a plan.

// started is when the objects' clocks start.
var started = metav1.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC)

// realisticPod adds to a workload pod what a Deployment's pods carry: an owning ReplicaSet,
// the pod-template-hash label, a couple of annotations, a container with image, command,
// environment, probes, mounts and a security context, the service account token volume,
// and the defaults admission fills in. i numbers the pod.
func realisticPod(p *corev1.Pod, i int) {
	hash := fmt.Sprintf("%08x", i/40)
	p.GenerateName = p.Name[:max(0, len(p.Name)-6)]
	p.Labels = maps.Clone(p.Labels)
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels["pod-template-hash"] = hash
	p.Annotations = map[string]string{
		"kubectl.kubernetes.io/restartedAt": started.Format("2006-01-02T15:04:05Z"),
		"prometheus.io/scrape":              "true",
		"prometheus.io/port":                "9090",
	}
	p.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "app-" + hash, UID: types.UID(fmt.Sprintf("6f1c2a8e-0000-4000-8000-%012d", i/40)),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
	token := fmt.Sprintf("kube-api-access-%05d", i%100000)
	s := &p.Spec
	for j := range s.Containers {
		c := &s.Containers[j]
		c.Command = []string{"/usr/local/bin/server"}
		c.Args = []string{"--listen=:8080", "--metrics=:9090", "--log-format=json"}
		c.WorkingDir = "/srv"
		c.Env = []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
			{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}},
			{Name: "GOMAXPROCS", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: resource.MustParse("1")}}},
			{Name: "LOG_LEVEL", Value: "info"},
			{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: "http://otel-collector.observability.svc.cluster.local:4317"},
		}
		c.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}}
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
			corev1.ContainerPort{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP})
		probe := func(path string) *corev1.Probe {
			return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTP}},
				InitialDelaySeconds: 5, TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
		}
		c.LivenessProbe, c.ReadinessProbe = probe("/healthz"), probe("/readyz")
		c.VolumeMounts = []corev1.VolumeMount{
			{Name: "config", MountPath: "/etc/app", ReadOnly: true},
			{Name: token, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
		}
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
		c.ImagePullPolicy = corev1.PullIfNotPresent
		c.SecurityContext = &corev1.SecurityContext{
			RunAsNonRoot: ptr.To(true), ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}
		if q, ok := c.Resources.Requests[corev1.ResourceMemory]; ok {
			c.Resources.Limits = maps.Clone(c.Resources.Limits)
			if c.Resources.Limits == nil {
				c.Resources.Limits = corev1.ResourceList{}
			}
			q.Add(q)
			c.Resources.Limits[corev1.ResourceMemory] = q
		}
	}
	s.Volumes = append(s.Volumes,
		corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}, DefaultMode: ptr.To[int32](0o644)}}},
		corev1.Volume{Name: token, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o644), Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](3607), Path: "token"}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		}}}},
	)
	s.RestartPolicy = corev1.RestartPolicyAlways
	s.TerminationGracePeriodSeconds = ptr.To[int64](30)
	s.DNSPolicy = corev1.DNSClusterFirst
	s.ServiceAccountName, s.DeprecatedServiceAccount = "default", "default"
	s.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](65532), FSGroup: ptr.To[int64](65532)}
	s.Priority = ptr.To[int32](0)
	s.EnableServiceLinks = ptr.To(true)
	s.PreemptionPolicy = ptr.To(corev1.PreemptLowerPriority)
	// DefaultTolerationSeconds admission.
	s.Tolerations = append(s.Tolerations,
		corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
		corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
	)
}

// runningStatus is the status the kubelet reports of a pod it runs on a node.
func runningStatus(p *corev1.Pod, i int) corev1.PodStatus {
	at := metav1.NewTime(started.Add(time.Duration(i%100) * 30 * time.Second))
	hostIP := fmt.Sprintf("10.0.%d.%d", (i/250)%250, i%250+1)
	podIP := fmt.Sprintf("10.1.%d.%d", (i/250)%250, i%250+1)
	cond := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: at}
	}
	status := corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{cond(corev1.PodReadyToStartContainers), cond(corev1.PodInitialized), cond(corev1.PodReady),
			cond(corev1.ContainersReady), cond(corev1.PodScheduled)},
		HostIP: hostIP, HostIPs: []corev1.HostIP{{IP: hostIP}},
		PodIP: podIP, PodIPs: []corev1.PodIP{{IP: podIP}},
		StartTime: &at,
		QOSClass:  p.Status.QOSClass,
	}
	for _, c := range p.Spec.Containers {
		status.ContainerStatuses = append(status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Ready: true, Started: ptr.To(true), RestartCount: 0,
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}},
			Image:       c.Image,
			ImageID:     "registry.k8s.io/pause@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a",
			ContainerID: fmt.Sprintf("containerd://%064x", i),
		})
	}
	return status
}

// realisticNode is a node as the kubelet of an EKS node reports it: Tailor's labels and
// taints, the cloud's labels and annotations, capacity, conditions, addresses, system info
// and the images it pulled. i numbers the node.
func realisticNode(name string, i int, labels map[string]string, taints []corev1.Taint, allocatable corev1.ResourceList) *corev1.Node {
	labels = maps.Clone(labels)
	maps.Copy(labels, map[string]string{
		corev1.LabelHostname: name, corev1.LabelOSStable: "linux", "beta.kubernetes.io/os": "linux",
		"beta.kubernetes.io/arch": labels[corev1.LabelArchStable], "beta.kubernetes.io/instance-type": labels[corev1.LabelInstanceTypeStable],
		"failure-domain.beta.kubernetes.io/region": "us-east-1", "failure-domain.beta.kubernetes.io/zone": labels[corev1.LabelTopologyZone],
		corev1.LabelTopologyRegion: "us-east-1", "topology.k8s.aws/zone-id": "use1-az" + fmt.Sprint(i%6+1),
		"k8s.io/cloud-provider-aws": "6b0f0b4c3e5a6c1d9f0b2a7e8d4c3b1a", "karpenter.sh/registered": "true", "karpenter.sh/initialized": "true",
	})
	capacity := corev1.ResourceList{}
	for k, v := range allocatable {
		capacity[k] = v.DeepCopy()
	}
	capacity[corev1.ResourceName("hugepages-1Gi")] = resource.MustParse("0")
	capacity[corev1.ResourceName("hugepages-2Mi")] = resource.MustParse("0")
	ip := fmt.Sprintf("10.0.%d.%d", (i/250)%250, i%250+1)
	at := metav1.NewTime(started.Add(time.Duration(i%100) * 30 * time.Second))
	cond := func(t corev1.NodeConditionType, status corev1.ConditionStatus, reason, message string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: status, LastHeartbeatTime: at, LastTransitionTime: at, Reason: reason, Message: message}
	}
	var images []corev1.ContainerImage
	for j := range 30 {
		repo := fmt.Sprintf("123456789012.dkr.ecr.us-east-1.amazonaws.com/team-%02d/service-%02d", j%7, j)
		images = append(images, corev1.ContainerImage{
			Names:     []string{fmt.Sprintf("%s@sha256:%064x", repo, j), fmt.Sprintf("%s:v1.%d.%d", repo, j, i%10)},
			SizeBytes: int64(20_000_000 + j*1_000_000),
		})
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: labels,
			Annotations: map[string]string{
				"alpha.kubernetes.io/provided-node-ip":                   ip,
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
				"csi.volume.kubernetes.io/nodeid":                        fmt.Sprintf(`{"ebs.csi.aws.com":"i-%017x"}`, i),
				"karpenter.sh/nodepool-hash":                             "9821736455218842421",
			},
		},
		Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("aws:///%s/i-%017x", labels[corev1.LabelTopologyZone], i), Taints: taints},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: allocatable,
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
			},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: ip},
				{Type: corev1.NodeInternalDNS, Address: fmt.Sprintf("ip-%s.ec2.internal", ip)},
				{Type: corev1.NodeHostName, Address: fmt.Sprintf("ip-%s.ec2.internal", ip)},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID: fmt.Sprintf("ec2%029x", i), SystemUUID: fmt.Sprintf("ec2%05x-0000-0000-0000-%012x", i, i), BootID: fmt.Sprintf("%08x-1111-2222-3333-%012x", i, i),
				KernelVersion: "6.1.119-129.201.amzn2023.x86_64", OSImage: "Amazon Linux 2023.6.20241212",
				ContainerRuntimeVersion: "containerd://1.7.23", KubeletVersion: "v1.34.2-eks-b3126f4",
				OperatingSystem: "linux", Architecture: labels[corev1.LabelArchStable],
			},
			Images:          images,
			RuntimeHandlers: []corev1.NodeRuntimeHandler{{Name: "runc", Features: &corev1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptr.To(true), UserNamespaces: ptr.To(true)}}, {Name: "", Features: &corev1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptr.To(true), UserNamespaces: ptr.To(true)}}},
			Features:        &corev1.NodeFeatures{SupplementalGroupsPolicy: ptr.To(true)},
		},
	}
}
