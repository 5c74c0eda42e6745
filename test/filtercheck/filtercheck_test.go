package filtercheck

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
)

const (
	zoneKey = corev1.LabelTopologyZone
	hostKey = corev1.LabelHostname
	gpu     = corev1.ResourceName("nvidia.com/gpu")

	// Messages of the plugins, as kubectl describe shows them.
	insufficientCPU      = "Insufficient cpu"
	nodeSelectorMismatch = "node(s) didn't match Pod's node affinity/selector"
	noFreePorts          = "node(s) didn't have free ports for the requested pod ports"
	affinityMismatch     = "node(s) didn't match pod affinity rules"
	antiAffinityMismatch = "node(s) didn't match pod anti-affinity rules"
	existingAntiAffinity = "node(s) didn't satisfy existing pods anti-affinity rules"
	spreadMismatch       = "node(s) didn't match pod topology spread constraints"
	volumeNodeConflict   = "node(s) didn't match PersistentVolume's node affinity"
	volumeBindConflict   = "node(s) didn't find available persistent volumes to bind"
	volumeZoneConflict   = "node(s) had no available volume zone"
	unschedulableNode    = "node(s) were unschedulable"
	untoleratedTaint     = "node(s) had untolerated taint(s)"
	claimInUse           = "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"
)

// node is a node of a zone with 4 CPUs, 8Gi of memory and room for 110 pods.
func node(name, zone string) *st.NodeWrapper {
	return st.MakeNode().Name(name).Label(hostKey, name).Label(zoneKey, zone).
		Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "8Gi", corev1.ResourcePods: "110"})
}

// pod is a pod of the default namespace, placed on a node, that asks for a little CPU.
func pod(name, nodeName string) *st.PodWrapper {
	return st.MakePod().Namespace("default").Name(name).Node(nodeName).
		Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "100m"})
}

// web is a pod labelled app=web.
func web(name, nodeName string) *st.PodWrapper {
	return pod(name, nodeName).Label("app", "web")
}

func rejected(podName, nodeName, plugin string, reasons ...string) Rejection {
	return Rejection{Pod: "default/" + podName, Node: nodeName, Plugin: plugin, Reasons: reasons}
}

func appIs(app string) *metav1.LabelSelector {
	return st.MakeLabelSelector().Label("app", app).Obj()
}

func nodes(ws ...*st.NodeWrapper) []*corev1.Node {
	out := make([]*corev1.Node, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.Obj())
	}
	return out
}

func pods(ws ...*st.PodWrapper) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.Obj())
	}
	return out
}

// twoZones has a node in zone-a, a second one in zone-a and one in zone-b.
func twoZones() []*corev1.Node {
	return nodes(node("a-1", "zone-a"), node("a-2", "zone-a"), node("b-1", "zone-b"))
}

// zoneSpread is a web pod spread over zones with maxSkew 1.
func zoneSpread(name, nodeName string, mode corev1.UnsatisfiableConstraintAction, minDomains *int32) *st.PodWrapper {
	return web(name, nodeName).SpreadConstraint(1, zoneKey, mode, appIs("web"), minDomains, nil, nil, nil)
}

func zoneAffinity(zone string) *corev1.VolumeNodeAffinity {
	return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: zoneKey, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}},
	}}}}
}

// boundClaim is a claim of the default namespace bound to a volume, as the PV controller leaves it.
func boundClaim(name, volume string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
			VolumeName:  volume,
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
}

// boundVolume is a volume bound to a claim of the default namespace.
func boundVolume(name, claim string, labels map[string]string, affinity *corev1.VolumeNodeAffinity) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			ClaimRef:               &corev1.ObjectReference{Namespace: "default", Name: claim},
			NodeAffinity:           affinity,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: name}},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
}

// exclusiveClaim is a bound claim with the ReadWriteOncePod access mode, and its volume.
func exclusiveClaim(name, volume string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	claim, pv := boundClaim(name, volume), boundVolume(volume, name, nil, nil)
	claim.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}
	pv.Spec.AccessModes = claim.Spec.AccessModes
	return claim, pv
}

// withNamespaceSelector gives the pod's first required anti-affinity term a namespace selector
// for the named namespace.
func withNamespaceSelector(p *corev1.Pod, namespace string) *corev1.Pod {
	terms := p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	terms[0].NamespaceSelector = st.MakeLabelSelector().Label(corev1.LabelMetadataName, namespace).Obj()
	return p
}

// pendingClaim is an unbound claim of the default namespace of a storage class.
func pendingClaim(name, class string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
			StorageClassName: ptr.To(class),
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
}

// zonalClass provisions volumes when a pod is scheduled, in zone-b only.
func zonalClass(name string) *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       "ebs.csi.aws.com",
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: zoneKey, Values: []string{"zone-b"}}}}},
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name    string
		cluster Cluster
		pods    []string
		want    []Rejection
	}{
		{
			name: "pods that fit are accepted",
			cluster: Cluster{
				Nodes: twoZones(),
				Pods:  pods(pod("p-0", "a-1").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "3"}), pod("p-1", "b-1"), pod("p-2", "b-1")),
			},
		},
		{
			name: "cpu: two pods that fit alone but not together are both rejected",
			cluster: Cluster{
				Nodes: twoZones(),
				Pods: pods(
					st.MakePod().Namespace("default").Name("big-0").Node("a-1").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "3"}),
					st.MakePod().Namespace("default").Name("big-1").Node("a-1").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "3"}),
					st.MakePod().Namespace("default").Name("big-2").Node("a-2").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "3"}),
				),
			},
			want: []Rejection{
				rejected("big-0", "a-1", "NodeResourcesFit", insufficientCPU),
				rejected("big-1", "a-1", "NodeResourcesFit", insufficientCPU),
			},
		},
		{
			name: "memory: a pod asking for more than the node has is rejected",
			cluster: Cluster{
				Nodes: twoZones(),
				Pods:  pods(pod("fat", "a-1").Req(map[corev1.ResourceName]string{corev1.ResourceMemory: "9Gi"}), pod("thin", "a-1")),
			},
			want: []Rejection{rejected("fat", "a-1", "NodeResourcesFit", "Insufficient memory")},
		},
		{
			name: "pods: a node with room for two pods rejects each of three",
			cluster: Cluster{
				Nodes: nodes(node("small", "zone-a").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourcePods: "2"})),
				Pods:  pods(pod("p-0", "small"), pod("p-1", "small"), pod("p-2", "small")),
			},
			want: []Rejection{
				rejected("p-0", "small", "NodeResourcesFit", "Too many pods"),
				rejected("p-1", "small", "NodeResourcesFit", "Too many pods"),
				rejected("p-2", "small", "NodeResourcesFit", "Too many pods"),
			},
		},
		{
			name: "extended resource: a GPU pod fits the GPU node only",
			cluster: Cluster{
				Nodes: nodes(
					node("cpu-1", "zone-a"),
					node("gpu-1", "zone-a").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "4", gpu: "1"}),
				),
				Pods: pods(
					pod("train-0", "gpu-1").Req(map[corev1.ResourceName]string{gpu: "1"}),
					pod("train-1", "cpu-1").Req(map[corev1.ResourceName]string{gpu: "1"}),
				),
			},
			want: []Rejection{rejected("train-1", "cpu-1", "NodeResourcesFit", "Insufficient nvidia.com/gpu")},
		},
		{
			name: "extended resource: two GPU pods on a one-GPU node are both rejected",
			cluster: Cluster{
				Nodes: nodes(node("gpu-1", "zone-a").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "4", gpu: "1"})),
				Pods: pods(
					pod("train-0", "gpu-1").Req(map[corev1.ResourceName]string{gpu: "1"}),
					pod("train-1", "gpu-1").Req(map[corev1.ResourceName]string{gpu: "1"}),
				),
			},
			want: []Rejection{
				rejected("train-0", "gpu-1", "NodeResourcesFit", "Insufficient nvidia.com/gpu"),
				rejected("train-1", "gpu-1", "NodeResourcesFit", "Insufficient nvidia.com/gpu"),
			},
		},
		{
			name: "node affinity: a nodeSelector for another zone is rejected, for its own zone accepted",
			cluster: Cluster{
				Nodes: twoZones(),
				Pods: pods(
					pod("wrong", "a-1").NodeSelector(map[string]string{zoneKey: "zone-b"}),
					pod("right", "b-1").NodeSelector(map[string]string{zoneKey: "zone-b"}),
				),
			},
			want: []Rejection{rejected("wrong", "a-1", "NodeAffinity", nodeSelectorMismatch)},
		},
		{
			name: "node affinity: required affinity to another zone is rejected",
			cluster: Cluster{
				Nodes: twoZones(),
				Pods: pods(
					pod("wrong", "b-1").NodeAffinityIn(zoneKey, []string{"zone-a"}, st.NodeSelectorTypeMatchExpressions),
					pod("right", "a-2").NodeAffinityIn(zoneKey, []string{"zone-a"}, st.NodeSelectorTypeMatchExpressions),
				),
			},
			want: []Rejection{rejected("wrong", "b-1", "NodeAffinity", nodeSelectorMismatch)},
		},
		{
			name: "node affinity: a metadata.name field selector narrows PreFilter to other nodes",
			cluster: Cluster{
				Nodes: twoZones(),
				Pods:  pods(pod("pinned", "a-1").NodeAffinityIn("metadata.name", []string{"b-1"}, st.NodeSelectorTypeMatchFields)),
			},
			want: []Rejection{rejected("pinned", "a-1", "NodeAffinity", "node(s) didn't satisfy plugin(s) [NodeAffinity]")},
		},
		{
			name: "taints: NoSchedule and NoExecute reject pods without a toleration, PreferNoSchedule does not",
			cluster: Cluster{
				Nodes: nodes(
					node("gpu", "zone-a").Taints([]corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}),
					node("draining", "zone-a").Taints([]corev1.Taint{{Key: "draining", Effect: corev1.TaintEffectNoExecute}}),
					node("spot", "zone-a").Taints([]corev1.Taint{{Key: "spot", Value: "true", Effect: corev1.TaintEffectPreferNoSchedule}}),
				),
				Pods: pods(
					pod("intruder", "gpu"),
					pod("tolerant", "gpu").Tolerations([]corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}}),
					pod("late", "draining"),
					pod("thrifty", "spot"),
				),
			},
			want: []Rejection{
				rejected("intruder", "gpu", "TaintToleration", untoleratedTaint),
				rejected("late", "draining", "TaintToleration", untoleratedTaint),
			},
		},
		{
			name: "host ports: two pods with the same host port on one node are both rejected",
			cluster: Cluster{
				Nodes: twoZones(),
				Pods:  pods(pod("ingress-0", "a-1").HostPort(8080), pod("ingress-1", "a-1").HostPort(8080), pod("ingress-2", "a-2").HostPort(8080)),
			},
			want: []Rejection{
				rejected("ingress-0", "a-1", "NodePorts", noFreePorts),
				rejected("ingress-1", "a-1", "NodePorts", noFreePorts),
			},
		},
		{
			name: "pod affinity: a pod needing a db pod in its zone is rejected where there is none",
			cluster: Cluster{
				Nodes: twoZones(),
				Pods: pods(
					pod("db-0", "b-1").Label("app", "db"),
					web("web-0", "a-1").PodAffinity(zoneKey, appIs("db"), st.PodAffinityWithRequiredReq),
					web("web-1", "b-1").PodAffinity(zoneKey, appIs("db"), st.PodAffinityWithRequiredReq),
				),
			},
			want: []Rejection{rejected("web-0", "a-1", "InterPodAffinity", affinityMismatch)},
		},
		{
			name: "pod anti-affinity on hostname: two replicas on one node are both rejected",
			cluster: Cluster{
				Nodes: twoZones(),
				Pods: pods(
					web("web-0", "a-1").PodAntiAffinity(hostKey, appIs("web"), st.PodAntiAffinityWithRequiredReq),
					web("web-1", "a-1").PodAntiAffinity(hostKey, appIs("web"), st.PodAntiAffinityWithRequiredReq),
					web("web-2", "a-2").PodAntiAffinity(hostKey, appIs("web"), st.PodAntiAffinityWithRequiredReq),
				),
			},
			want: []Rejection{
				rejected("web-0", "a-1", "InterPodAffinity", antiAffinityMismatch),
				rejected("web-1", "a-1", "InterPodAffinity", antiAffinityMismatch),
			},
		},
		{
			name: "pod anti-affinity on zone: two replicas on two nodes of one zone are both rejected",
			cluster: Cluster{
				Nodes: twoZones(),
				Pods: pods(
					web("web-0", "a-1").PodAntiAffinity(zoneKey, appIs("web"), st.PodAntiAffinityWithRequiredReq),
					web("web-1", "a-2").PodAntiAffinity(zoneKey, appIs("web"), st.PodAntiAffinityWithRequiredReq),
				),
			},
			want: []Rejection{
				rejected("web-0", "a-1", "InterPodAffinity", antiAffinityMismatch),
				rejected("web-1", "a-2", "InterPodAffinity", antiAffinityMismatch),
			},
		},
		{
			name: "pod anti-affinity on zone: replicas in two zones are accepted",
			cluster: Cluster{
				Nodes: twoZones(),
				Pods: pods(
					web("web-0", "a-1").PodAntiAffinity(zoneKey, appIs("web"), st.PodAntiAffinityWithRequiredReq),
					web("web-1", "b-1").PodAntiAffinity(zoneKey, appIs("web"), st.PodAntiAffinityWithRequiredReq),
				),
			},
		},
		{
			name: "symmetric anti-affinity: a pod without terms is rejected next to a pod that repels it",
			cluster: Cluster{
				Nodes: twoZones(),
				Pods: pods(
					pod("loner", "a-1").PodAntiAffinity(hostKey, appIs("web"), st.PodAntiAffinityWithRequiredReq),
					web("web-0", "a-1"),
					web("web-1", "a-2"),
				),
			},
			want: []Rejection{
				rejected("loner", "a-1", "InterPodAffinity", antiAffinityMismatch),
				rejected("web-0", "a-1", "InterPodAffinity", existingAntiAffinity),
			},
		},
		{
			name: "anti-affinity with a namespace selector repels pods of that namespace only",
			cluster: Cluster{
				Nodes: twoZones(),
				Pods: []*corev1.Pod{
					withNamespaceSelector(pod("loner", "a-1").PodAntiAffinity(hostKey, appIs("web"), st.PodAntiAffinityWithRequiredReq).Obj(), "team-b"),
					web("web-0", "a-1").Obj(),
					web("web-1", "a-1").Namespace("team-b").Obj(),
				},
			},
			want: []Rejection{
				rejected("loner", "a-1", "InterPodAffinity", antiAffinityMismatch),
				{Pod: "team-b/web-1", Node: "a-1", Plugin: "InterPodAffinity", Reasons: []string{existingAntiAffinity}},
			},
		},
		{
			name: "zone spread: three pods over two zones placed 2+1 are accepted",
			cluster: Cluster{
				Nodes: twoZones(),
				Pods: pods(
					zoneSpread("web-0", "a-1", corev1.DoNotSchedule, nil),
					zoneSpread("web-1", "a-2", corev1.DoNotSchedule, nil),
					zoneSpread("web-2", "b-1", corev1.DoNotSchedule, nil),
				),
			},
		},
		{
			name: "zone spread: three pods over two zones placed 3+0 are rejected in the crowded zone",
			cluster: Cluster{
				Nodes: twoZones(),
				Pods: pods(
					zoneSpread("web-0", "a-1", corev1.DoNotSchedule, nil),
					zoneSpread("web-1", "a-2", corev1.DoNotSchedule, nil),
					zoneSpread("web-2", "a-1", corev1.DoNotSchedule, nil),
					pod("other", "b-1"),
				),
			},
			want: []Rejection{
				rejected("web-0", "a-1", "PodTopologySpread", spreadMismatch),
				rejected("web-1", "a-2", "PodTopologySpread", spreadMismatch),
				rejected("web-2", "a-1", "PodTopologySpread", spreadMismatch),
			},
		},
		{
			name: "zone spread: ScheduleAnyway never rejects",
			cluster: Cluster{
				Nodes: twoZones(),
				Pods: pods(
					zoneSpread("web-0", "a-1", corev1.ScheduleAnyway, nil),
					zoneSpread("web-1", "a-2", corev1.ScheduleAnyway, nil),
					zoneSpread("web-2", "a-1", corev1.ScheduleAnyway, nil),
				),
			},
		},
		{
			name: "zone spread: with minDomains 3 over two zones, 2+1 is rejected in the zone with two",
			cluster: Cluster{
				Nodes: twoZones(),
				Pods: pods(
					zoneSpread("web-0", "a-1", corev1.DoNotSchedule, ptr.To[int32](3)),
					zoneSpread("web-1", "a-2", corev1.DoNotSchedule, ptr.To[int32](3)),
					zoneSpread("web-2", "b-1", corev1.DoNotSchedule, ptr.To[int32](3)),
				),
			},
			want: []Rejection{
				rejected("web-0", "a-1", "PodTopologySpread", spreadMismatch),
				rejected("web-1", "a-2", "PodTopologySpread", spreadMismatch),
			},
		},
		{
			name: "hostname spread: two pods on one of two nodes are rejected, one per node accepted",
			cluster: Cluster{
				Nodes: nodes(node("a-1", "zone-a"), node("a-2", "zone-a")),
				Pods: pods(
					web("web-0", "a-1").SpreadConstraint(1, hostKey, corev1.DoNotSchedule, appIs("web"), nil, nil, nil, nil),
					web("web-1", "a-1").SpreadConstraint(1, hostKey, corev1.DoNotSchedule, appIs("web"), nil, nil, nil, nil),
					pod("api-0", "a-1").Label("app", "api").SpreadConstraint(1, hostKey, corev1.DoNotSchedule, appIs("api"), nil, nil, nil, nil),
					pod("api-1", "a-2").Label("app", "api").SpreadConstraint(1, hostKey, corev1.DoNotSchedule, appIs("api"), nil, nil, nil, nil),
				),
			},
			want: []Rejection{
				rejected("web-0", "a-1", "PodTopologySpread", spreadMismatch),
				rejected("web-1", "a-1", "PodTopologySpread", spreadMismatch),
			},
		},
		{
			name: "volume binding: a bound volume with node affinity to another zone is rejected",
			cluster: Cluster{
				Nodes:   twoZones(),
				Pods:    pods(pod("db-0", "a-1").PVC("data-0"), pod("db-1", "b-1").PVC("data-1")),
				Claims:  []*corev1.PersistentVolumeClaim{boundClaim("data-0", "pv-0"), boundClaim("data-1", "pv-1")},
				Volumes: []*corev1.PersistentVolume{boundVolume("pv-0", "data-0", nil, zoneAffinity("zone-b")), boundVolume("pv-1", "data-1", nil, zoneAffinity("zone-b"))},
			},
			want: []Rejection{rejected("db-0", "a-1", "VolumeBinding", volumeNodeConflict)},
		},
		{
			name: "volume binding: a WaitForFirstConsumer claim whose class allows another zone only is rejected",
			cluster: Cluster{
				Nodes:          twoZones(),
				Pods:           pods(pod("db-0", "a-1").PVC("data-0"), pod("db-1", "b-1").PVC("data-1")),
				Claims:         []*corev1.PersistentVolumeClaim{pendingClaim("data-0", "zonal"), pendingClaim("data-1", "zonal")},
				StorageClasses: []*storagev1.StorageClass{zonalClass("zonal")},
			},
			want: []Rejection{rejected("db-0", "a-1", "VolumeBinding", volumeBindConflict)},
		},
		{
			name: "volume zone: a bound volume labelled with another zone is rejected",
			cluster: Cluster{
				Nodes:  twoZones(),
				Pods:   pods(pod("db-0", "a-1").PVC("data-0"), pod("db-1", "b-1").PVC("data-1")),
				Claims: []*corev1.PersistentVolumeClaim{boundClaim("data-0", "pv-0"), boundClaim("data-1", "pv-1")},
				Volumes: []*corev1.PersistentVolume{
					boundVolume("pv-0", "data-0", map[string]string{zoneKey: "zone-b"}, nil),
					boundVolume("pv-1", "data-1", map[string]string{zoneKey: "zone-b"}, nil),
				},
			},
			want: []Rejection{rejected("db-0", "a-1", "VolumeZone", volumeZoneConflict)},
		},
		{
			name: "read-write-once-pod: a claim used by one pod is accepted, a claim used by two pods rejects both",
			cluster: func() Cluster {
				solo, soloPV := exclusiveClaim("solo", "pv-solo")
				shared, sharedPV := exclusiveClaim("shared", "pv-shared")
				return Cluster{
					Nodes:   twoZones(),
					Pods:    pods(pod("db-0", "a-1").PVC("solo"), pod("db-1", "a-1").PVC("shared"), pod("db-2", "a-2").PVC("shared")),
					Claims:  []*corev1.PersistentVolumeClaim{solo, shared},
					Volumes: []*corev1.PersistentVolume{soloPV, sharedPV},
				}
			}(),
			want: []Rejection{
				rejected("db-1", "a-1", "VolumeRestrictions", claimInUse),
				rejected("db-2", "a-2", "VolumeRestrictions", claimInUse),
			},
		},
		{
			name: "unschedulable node: a pod placed on a cordoned node is rejected",
			cluster: Cluster{
				Nodes: nodes(node("cordoned", "zone-a").Unschedulable(true), node("open", "zone-a")),
				Pods:  pods(pod("p-0", "cordoned"), pod("p-1", "open")),
			},
			want: []Rejection{rejected("p-0", "cordoned", "NodeUnschedulable", unschedulableNode)},
		},
		{
			name: "a pod on a node that is not in the cluster is rejected by no plugin",
			cluster: Cluster{
				Nodes: twoZones(),
				Pods:  pods(pod("lost", "ghost"), pod("p-1", "a-1")),
			},
			want: []Rejection{rejected("lost", "ghost", "", `node "ghost" is not in the cluster`)},
		},
		{
			name: "only the named pods are checked, against all the others",
			cluster: Cluster{
				Nodes: twoZones(),
				Pods: pods(
					st.MakePod().Namespace("default").Name("big-0").Node("a-1").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "3"}),
					st.MakePod().Namespace("default").Name("big-1").Node("a-1").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "3"}),
				),
			},
			pods: []string{"default/big-1"},
			want: []Rejection{rejected("big-1", "a-1", "NodeResourcesFit", insufficientCPU)},
		},
		{
			name: "named pods that are not placed or have terminated are rejected by no plugin; terminated pods take no room",
			cluster: Cluster{
				Nodes: twoZones(),
				Pods: pods(
					pod("pending", ""),
					pod("done", "a-1").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "3"}).Phase(corev1.PodSucceeded),
					pod("running", "a-1").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "3"}),
				),
			},
			pods: []string{"default/pending", "default/done", "default/running"},
			want: []Rejection{
				rejected("done", "a-1", "", "pod has terminated (phase Succeeded)"),
				rejected("pending", "", "", "pod has no spec.nodeName"),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Check(context.Background(), tt.cluster, tt.pods)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("rejections (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckOne(t *testing.T) {
	cluster := Cluster{
		Nodes: twoZones(),
		Pods: pods(
			st.MakePod().Namespace("default").Name("big-0").Node("a-1").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "3"}),
			web("web-0", "b-1").PodAntiAffinity(zoneKey, appIs("web"), st.PodAntiAffinityWithRequiredReq),
		),
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		node string
		want *Rejection
	}{
		{
			name: "a pod that fits beside the cluster's pods is accepted",
			pod:  pod("small", "").Obj(),
			node: "a-1",
		},
		{
			name: "a pod that does not fit beside the cluster's pods is rejected",
			pod:  st.MakePod().Namespace("default").Name("big-1").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "3"}).Obj(),
			node: "a-1",
			want: ptr.To(rejected("big-1", "a-1", "NodeResourcesFit", insufficientCPU)),
		},
		{
			name: "the pod's own nodeName is ignored",
			pod:  st.MakePod().Namespace("default").Name("big-1").Node("a-2").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "3"}).Obj(),
			node: "a-1",
			want: ptr.To(rejected("big-1", "a-1", "NodeResourcesFit", insufficientCPU)),
		},
		{
			name: "the cluster's pod of the same name is taken out, as it is the pod being scheduled",
			pod:  st.MakePod().Namespace("default").Name("big-0").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "3"}).Obj(),
			node: "a-1",
		},
		{
			name: "a pod repelled by a pod of the cluster is rejected",
			pod:  web("web-1", "").Obj(),
			node: "b-1",
			want: ptr.To(rejected("web-1", "b-1", "InterPodAffinity", existingAntiAffinity)),
		},
		{
			name: "a node that is not in the cluster is a rejection by no plugin",
			pod:  pod("small", "").Obj(),
			node: "ghost",
			want: ptr.To(rejected("small", "ghost", "", `node "ghost" is not in the cluster`)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CheckOne(context.Background(), cluster, tt.pod, tt.node)
			if err != nil {
				t.Fatalf("CheckOne: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("rejection (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckErrors(t *testing.T) {
	tests := []struct {
		name    string
		cluster Cluster
		pods    []string
		wantErr error
	}{
		{
			name:    "a named pod that is not in the cluster",
			cluster: Cluster{Nodes: twoZones(), Pods: pods(pod("p-0", "a-1"))},
			pods:    []string{"default/p-1"},
			wantErr: &UnknownPodError{Pod: "default/p-1"},
		},
		{
			name:    "two pods with one name",
			cluster: Cluster{Nodes: twoZones(), Pods: pods(pod("p-0", "a-1"), pod("p-0", "a-2"))},
			wantErr: &DuplicateError{Kind: "pod", Name: "default/p-0"},
		},
		{
			name:    "two nodes with one name",
			cluster: Cluster{Nodes: nodes(node("a-1", "zone-a"), node("a-1", "zone-b"))},
			wantErr: &DuplicateError{Kind: "node", Name: "a-1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Check(context.Background(), tt.cluster, tt.pods)
			if diff := cmp.Diff(tt.wantErr, unwrapTyped(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

// unwrapTyped returns the package's typed error inside err, or err itself.
func unwrapTyped(err error) error {
	var unknown *UnknownPodError
	if errors.As(err, &unknown) {
		return unknown
	}
	var dup *DuplicateError
	if errors.As(err, &dup) {
		return dup
	}
	return err
}
