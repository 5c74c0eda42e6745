package metrics

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

var (
	podStateDesc = prometheus.NewDesc("karpenter_pods_state",
		"Pod state is the current state of pods, labeled by the pod name, namespace, owner, node, whether it is scheduled, nodepool name, zone, architecture, capacity type, instance type, pod phase, readiness and whether its node belongs to a NodePool.",
		[]string{"name", "namespace", "owner", "node", "scheduled", LabelNodePool, LabelZone, "arch", LabelCapacityType, LabelInstanceType, "phase", "ready", "managed"}, nil)
	nodeCountDesc = prometheus.NewDesc("karpenter_cluster_state_node_count",
		"Current count of nodes in the sidecar's view of the cluster.", nil, nil)
	syncedDesc = prometheus.NewDesc("karpenter_cluster_state_synced",
		"1 once the sidecar's caches of nodes, NodeClaims and pods have synced with the API server, 0 otherwise.", nil, nil)
	unsyncedDesc = prometheus.NewDesc("karpenter_cluster_state_unsynced_time_seconds",
		"The time for which the sidecar's caches have not been synced.", nil, nil)
)

// ClusterCollector serves, at scrape time and from the sidecar's caches, Karpenter's
// metrics of the cluster state: one karpenter_pods_state series per pod, the node count,
// and whether the caches are synced.
type ClusterCollector struct {
	kube   client.Reader
	synced func() bool
	clock  clock.PassiveClock

	mu            sync.Mutex
	unsyncedSince time.Time
}

// NewClusterCollector reads pods and nodes through kube; synced says whether the caches
// kube reads have synced.
func NewClusterCollector(kube client.Reader, synced func() bool, clk clock.PassiveClock) *ClusterCollector {
	return &ClusterCollector{kube: kube, synced: synced, clock: clk}
}

// Describe implements prometheus.Collector.
func (c *ClusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{podStateDesc, nodeCountDesc, syncedDesc, unsyncedDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *ClusterCollector) Collect(ch chan<- prometheus.Metric) {
	synced := c.synced()
	ch <- prometheus.MustNewConstMetric(syncedDesc, prometheus.GaugeValue, boolValue(synced))
	ch <- prometheus.MustNewConstMetric(unsyncedDesc, prometheus.GaugeValue, c.unsynced(synced).Seconds())
	if !synced {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodes := &corev1.NodeList{}
	pods := &corev1.PodList{}
	for _, list := range []client.ObjectList{nodes, pods} {
		if err := c.kube.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			log.FromContext(ctx).Error(err, "reading the cluster state for metrics")
			return
		}
	}
	ch <- prometheus.MustNewConstMetric(nodeCountDesc, prometheus.GaugeValue, float64(len(nodes.Items)))
	byName := make(map[string]*corev1.Node, len(nodes.Items))
	for i := range nodes.Items {
		byName[nodes.Items[i].Name] = &nodes.Items[i]
	}
	for i := range pods.Items {
		ch <- prometheus.MustNewConstMetric(podStateDesc, prometheus.GaugeValue, 1, podStateLabels(&pods.Items[i], byName)...)
	}
}

// unsynced is how long the caches have been unsynced, zero while they are synced.
func (c *ClusterCollector) unsynced(synced bool) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if synced {
		c.unsyncedSince = time.Time{}
		return 0
	}
	now := c.clock.Now()
	if c.unsyncedSince.IsZero() {
		c.unsyncedSince = now
	}
	return now.Sub(c.unsyncedSince)
}

// podStateLabels are the values of karpenter_pods_state's labels for a pod, in the order
// podStateDesc names them.
func podStateLabels(pod *corev1.Pod, nodes map[string]*corev1.Node) []string {
	owner := ""
	if len(pod.OwnerReferences) > 0 {
		ref := pod.OwnerReferences[0]
		owner = fmt.Sprintf("/apis/%s/namespaces/%s/%ss/%s", ref.APIVersion, pod.Namespace, strings.ToLower(ref.Kind), ref.Name)
	}
	var nodeLabels map[string]string
	if n, ok := nodes[pod.Spec.NodeName]; ok {
		nodeLabels = n.Labels
	}
	ready := false
	for _, cond := range pod.Status.Conditions {
		ready = ready || (cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue)
	}
	return []string{
		pod.Name, pod.Namespace, owner, pod.Spec.NodeName, strconv.FormatBool(pod.Spec.NodeName != ""),
		nodeLabels[karpv1.NodePoolLabelKey], nodeLabels[corev1.LabelTopologyZone], nodeLabels[corev1.LabelArchStable],
		nodeLabels[karpv1.CapacityTypeLabelKey], nodeLabels[corev1.LabelInstanceTypeStable],
		string(pod.Status.Phase), strconv.FormatBool(ready), strconv.FormatBool(nodeLabels[karpv1.NodePoolLabelKey] != ""),
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// PodTimings observes, for every pod the sidecar sees bound or running, the time from its
// creation: karpenter_pods_bound_duration_seconds and
// karpenter_pods_startup_duration_seconds. Only the leader observes, as only Karpenter's
// leader does, so that the sums over replicas count each pod once.
type PodTimings struct {
	clock   clock.PassiveClock
	leading func() bool
}

// NewPodTimings observes with clk while leading says this replica leads.
func NewPodTimings(clk clock.PassiveClock, leading func() bool) *PodTimings {
	return &PodTimings{clock: clk, leading: leading}
}

// Handler is the pod informer's event handler that observes the timings.
func (t *PodTimings) Handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{UpdateFunc: t.update}
}

func (t *PodTimings) update(oldObj, newObj any) {
	old, ok := oldObj.(*corev1.Pod)
	if !ok {
		return
	}
	pod, ok := newObj.(*corev1.Pod)
	if !ok || !t.leading() {
		return
	}
	age := t.clock.Since(pod.CreationTimestamp.Time).Seconds()
	if old.Spec.NodeName == "" && pod.Spec.NodeName != "" {
		KarpenterPodsBoundDuration.WithLabelValues().Observe(age)
	}
	if old.Status.Phase != corev1.PodRunning && pod.Status.Phase == corev1.PodRunning {
		KarpenterPodsStartupDuration.WithLabelValues().Observe(age)
	}
}
