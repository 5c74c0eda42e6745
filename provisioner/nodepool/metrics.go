package nodepool

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/metrics"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

var (
	nodePoolUsageDesc = prometheus.NewDesc(prometheus.BuildFQName("tailor", "nodepool", "usage"),
		"Capacity held by a NodePool's NodeClaims, per resource (cores, bytes, count), the measure its limits apply to.",
		[]string{metrics.LabelNodePool, metrics.LabelResource}, nil)
	nodePoolLimitDesc = prometheus.NewDesc(prometheus.BuildFQName("tailor", "nodepool", "limit"),
		"A NodePool's limit per resource (cores, bytes, count); absent when unlimited.",
		[]string{metrics.LabelNodePool, metrics.LabelResource}, nil)
	nodePoolCostDesc = prometheus.NewDesc(prometheus.BuildFQName("tailor", "nodepool", "cost_per_hour"),
		"What a NodePool's NodeClaims cost per hour in USD, by part: instance (less the DaemonSets' share), volumes, publicIPv4, monitoring, daemonSets. Each NodeClaim counts as launched (status.price), or as planned (the tailor.sh/planned-price annotation) until then; those with neither are left out.",
		[]string{metrics.LabelNodePool, "part"}, nil)
	// Karpenter's names of the same figures, for its dashboards and alerts.
	karpenterNodePoolUsageDesc = prometheus.NewDesc("karpenter_nodepools_usage",
		"The amount of resources that have been provisioned for a nodepool, per resource type; the same figure as tailor_nodepool_usage.",
		[]string{metrics.LabelNodePool, "resource_type"}, nil)
	karpenterNodePoolLimitDesc = prometheus.NewDesc("karpenter_nodepools_limit",
		"Limits specified on the nodepool that restrict the quantity of resources provisioned; the same figure as tailor_nodepool_limit.",
		[]string{metrics.LabelNodePool, "resource_type"}, nil)
)

// scrapeTimeout bounds reading the cache on a scrape.
const scrapeTimeout = 5 * time.Second

// Collector reports every NodePool's usage and limits when scraped, read from the
// manager's cache, so the figures are as fresh as the cache.
type Collector struct {
	kube client.Reader
}

var _ prometheus.Collector = &Collector{}

// NewCollector returns a collector reading NodePools and NodeClaims from kube.
func NewCollector(kube client.Reader) *Collector {
	return &Collector{kube: kube}
}

// Describe sends the descriptors of the NodePool metrics.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- nodePoolUsageDesc
	ch <- nodePoolLimitDesc
	ch <- nodePoolCostDesc
	ch <- karpenterNodePoolUsageDesc
	ch <- karpenterNodePoolLimitDesc
}

// Collect sends each NodePool's usage and limits.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	pools := &karpv1.NodePoolList{}
	claims := &karpv1.NodeClaimList{}
	// Read only: the cache's own objects, not copies of every NodeClaim at each scrape.
	if err := c.kube.List(ctx, pools, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing NodePools for metrics")
		return
	}
	if err := c.kube.List(ctx, claims, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing NodeClaims for metrics")
		return
	}
	usage := map[string]corev1.ResourceList{}
	costs := map[string]cloudprovider.PriceParts{}
	for i := range claims.Items {
		pool := claims.Items[i].Labels[karpv1.NodePoolLabelKey]
		if parts, ok := cloudprovider.NodeClaimPrice(&claims.Items[i]); ok {
			costs[pool] = costs[pool].Plus(parts)
		}
		if usage[pool] == nil {
			usage[pool] = corev1.ResourceList{}
		}
		for name, q := range packing.ClaimedCapacity(&claims.Items[i]) {
			total := usage[pool][name]
			total.Add(q)
			usage[pool][name] = total
		}
	}
	for i := range pools.Items {
		np := &pools.Items[i]
		for name, q := range usage[np.Name] {
			for _, desc := range []*prometheus.Desc{nodePoolUsageDesc, karpenterNodePoolUsageDesc} {
				ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, q.AsApproximateFloat64(), np.Name, string(name))
			}
		}
		if c, ok := costs[np.Name]; ok {
			for part, v := range map[string]float64{"instance": c.Instance, "volumes": c.Volumes, "publicIPv4": c.PublicIPv4, "monitoring": c.Monitoring, "daemonSets": c.DaemonSets} {
				ch <- prometheus.MustNewConstMetric(nodePoolCostDesc, prometheus.GaugeValue, v, np.Name, part)
			}
		}
		for name, q := range np.Spec.Limits {
			for _, desc := range []*prometheus.Desc{nodePoolLimitDesc, karpenterNodePoolLimitDesc} {
				ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, q.AsApproximateFloat64(), np.Name, string(name))
			}
		}
	}
}
