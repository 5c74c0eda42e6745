package packing

import (
	"cmp"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/packing/lowerbound"
	"github.com/tailor-autoscaler/tailor/provisioner/requirements"
)

// pool is a NodePool as the planner uses it: every offering its requirements allow, with
// the labels, allocatable resources and DaemonSet overhead a node launched from it has.
type pool struct {
	nodePool *karpv1.NodePool
	weight   int32
	taints   []corev1.Taint
	types    []*typeInfo
	offers   []*offer
	// remaining is how much of each limited resource may still be launched in the round,
	// from limit at its start; nil: no limits.
	remaining, limit vec
	// limited marks the dimensions the NodePool limits.
	limited []bool
	// dsPorts are the host ports DaemonSet pods take on the pool's nodes.
	dsPorts []hostPort
	// compatible caches, per group node key (its number, group.nodeID), which offers the
	// group's pods may run on.
	compatible map[int]*compat
	// sorted are the offers by price, cheapest first, built on first use.
	sorted []*offer
	// prices are the marginal prices of each resource when buying the pool's capacity for
	// the whole batch: what makes one unit of a pod's request worth paying for.
	prices []float64
	// guide is the price the round ranks and picks offerings by; priceKey names it and
	// prices, for the rankings kept per both.
	guide    guide
	priceKey string
	// cols are the offers as columns of the LP that prices resources, by guide, built on
	// first use.
	cols [guides][]lowerbound.Column
	// minValues are the keys the NodePool's requirements set minValues for, by key.
	minValues []minValue
	// reserved are how many instances each capacity reservation of the pool's reserved
	// offerings takes, by reservation id.
	reserved map[string]int
}

// guide is a price the planner can rank offerings by.
type guide int

const (
	// wholeNode is what a node of the offering costs: its instance and its node costs.
	wholeNode guide = iota
	// instanceOnly is the instance's price alone, as planners that do not count node costs
	// rank offerings. A plan guided by it is still priced whole: Solve keeps it when it
	// comes out cheaper that way (see Solve).
	instanceOnly
	guides
)

// guidePrice is the offering's price by the round's guide.
func (p *pool) guidePrice(o *offer) float64 {
	if p.guide == instanceOnly {
		return o.offering.Price
	}
	return o.price
}

// columns are the pool's offers as the LP that prices resources sees them.
func (p *pool) columns() []lowerbound.Column {
	if p.cols[p.guide] == nil {
		cols := make([]lowerbound.Column, 0, len(p.offers))
		for _, o := range p.offers {
			cols = append(cols, lowerbound.Column{Price: p.guidePrice(o), Capacity: toFloats(o.alloc)})
		}
		p.cols[p.guide] = cols
	}
	return p.cols[p.guide]
}

// setPrices sets the resource prices of a round. The ranks of types are kept per prices
// and guide: rounds of one Snapshot that plan similar pods come back to the same prices (the
// LP's duals change by steps), and ranking every type again is most of what opening a node
// costs.
func (p *pool) setPrices(prices []float64) {
	p.prices = prices
	p.priceKey = fmt.Sprint(p.guide, prices)
}

// typeInfo is an instance type within one pool.
type typeInfo struct {
	it   *cloudprovider.InstanceType
	pool *pool
	// labels of a node of this type in this pool, zone and capacity type aside.
	labels map[string]string
	// node carries labels for node affinity matching.
	node     *corev1.Node
	capacity vec
	alloc    vec
	offers   []*offer
}

// offer is an offering of an instance type in a NodePool: a (type, zone, capacity type).
type offer struct {
	index int
	typ   *typeInfo
	// offering is the cloud provider's: its zone, capacity type and capacity reservation,
	// the instance's price and what the node pays besides.
	offering cloudprovider.Offering
	// price is what a node of the offering costs: its instance and its node costs.
	price float64
	// ds is what DaemonSet pods take on a node of this offering.
	ds vec
	// alloc is what is left for the batch's pods: allocatable less DaemonSet overhead.
	alloc vec
	node  *corev1.Node
}

// label is the value of a label a node of the offering in the pool has.
func (o *offer) label(key string) (string, bool) { return o.offering.Label(key, o.typ.labels) }

// choice is the offering as a plan reports it, its price split into parts.
func (o *offer) choice() Choice {
	return Choice{
		InstanceType: o.typ.it.Name, Zone: o.offering.Zone, CapacityType: o.offering.CapacityType, Price: o.price,
		ReservationID: o.offering.ReservationID, ReservationType: o.offering.ReservationType,
		Parts: cloudprovider.NewPriceParts(o.offering.Price, o.offering.NodeCosts, o.daemonSetShare()),
	}
}

// daemonSetShare is the largest fraction of the node's allocatable CPU, memory or pods that
// its DaemonSet pods request.
func (o *offer) daemonSetShare() float64 {
	share := 0.0
	for _, i := range []int{dimCPU, dimMemory, dimPods} {
		if i < len(o.ds) && o.typ.alloc[i] > 0 {
			share = max(share, float64(o.ds[i])/float64(o.typ.alloc[i]))
		}
	}
	return share
}

// nodeObject is a node with the offering's labels, built on first use, for matchers that
// need zone, capacity type or capacity reservation.
func (o *offer) nodeObject() *corev1.Node {
	if o.node == nil {
		labels := make(map[string]string, len(o.typ.labels)+5)
		for k, v := range o.typ.labels {
			labels[k] = v
		}
		o.offering.AddLabels(labels)
		o.node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labels}}
	}
	return o.node
}

func newPool(np NodePool, d *dims, daemons []*daemon) *pool {
	tmpl := np.NodePool.Spec.Template
	p := &pool{
		nodePool:   np.NodePool,
		weight:     weight(np.NodePool),
		taints:     tmpl.Spec.Taints,
		compatible: map[int]*compat{},
		minValues:  minValuesOf(tmpl.Spec.Requirements),
		reserved:   map[string]int{},
	}
	if np.Remaining != nil {
		p.limit = d.of(np.Remaining)
		p.limited = make([]bool, len(d.names))
		for name := range np.Remaining {
			if i, ok := d.index[name]; ok {
				p.limited[i] = true
			}
		}
	}
	base := map[string]string{}
	for k, v := range requirements.SingleValueLabels(tmpl.Spec.Requirements) {
		base[k] = v
	}
	for k, v := range tmpl.ObjectMeta.Labels {
		base[k] = v
	}
	base[karpv1.NodePoolLabelKey] = np.NodePool.Name
	reqs := tmpl.Spec.Requirements

	var landing []*daemon
	for _, ds := range daemons {
		if ds.toleratesTaints(p.taints) {
			landing = append(landing, ds)
			p.dsPorts = append(p.dsPorts, ds.ports...)
		}
	}
	for _, it := range np.InstanceTypes {
		// The type's own labels win over values the NodePool's requirements pin: an
		// offering whose labels contradict the requirements is filtered out below.
		labels := make(map[string]string, len(base)+len(it.Labels))
		for k, v := range base {
			labels[k] = v
		}
		for k, v := range it.Labels {
			labels[k] = v
		}
		t := &typeInfo{it: it, pool: p, labels: labels, capacity: d.of(it.Capacity), alloc: d.of(it.Allocatable())}
		t.node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labels}}
		for _, o := range it.Offerings {
			if !o.Available {
				continue
			}
			if o.CapacityType == karpv1.CapacityTypeReserved && o.ReservedInstances <= 0 {
				continue
			}
			of := &offer{typ: t, offering: o, price: o.NodePrice()}
			if !requirements.MatchesFunc(reqs, of.label) {
				continue
			}
			of.ds = make(vec, len(d.names))
			for _, ds := range landing {
				if ds.landsOn(of) {
					of.ds.add(ds.need)
				}
			}
			of.alloc = t.alloc.minus(of.ds)
			if o.ReservationID != "" {
				p.reserved[o.ReservationID] = o.ReservedInstances
			}
			of.index = len(p.offers)
			p.offers = append(p.offers, of)
			t.offers = append(t.offers, of)
		}
		if len(t.offers) > 0 {
			p.types = append(p.types, t)
		}
	}
	return p
}

func weight(np *karpv1.NodePool) int32 {
	if np.Spec.Weight == nil {
		return 0
	}
	return *np.Spec.Weight
}

// byPrice returns the pool's offers, cheapest first.
func (p *pool) byPrice() []*offer {
	if p.sorted == nil {
		p.sorted = slices.Clone(p.offers)
		slices.SortStableFunc(p.sorted, func(a, b *offer) int {
			if c := cmp.Compare(a.price, b.price); c != 0 {
				return c
			}
			return cmp.Compare(a.typ.it.Name, b.typ.it.Name)
		})
	}
	return p.sorted
}

// withinLimits reports whether launching capacity keeps the pool within its limits.
func (p *pool) withinLimits(capacity vec) bool {
	if p.remaining == nil {
		return true
	}
	for i, limited := range p.limited {
		if limited && capacity[i] > p.remaining[i] {
			return false
		}
	}
	return true
}

// daemon is a DaemonSet's pod as it would run on a new node.
type daemon struct {
	uid      types.UID
	pod      *corev1.Pod
	need     vec
	affinity nodeaffinity.RequiredNodeAffinity
	// offerKeys says whether its node affinity looks at zone or capacity type, so it has to
	// be matched per offering rather than per instance type.
	offerKeys bool
	ports     []hostPort
	perType   map[*typeInfo]bool
}

// tolerationsDaemonSetsGet are the tolerations the DaemonSet controller adds to its pods.
var tolerationsDaemonSetsGet = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

func newDaemon(ds *appsv1.DaemonSet, d *dims) *daemon {
	pod := &corev1.Pod{ObjectMeta: *ds.Spec.Template.ObjectMeta.DeepCopy(), Spec: *ds.Spec.Template.Spec.DeepCopy()}
	pod.Namespace = ds.Namespace
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, tolerationsDaemonSetsGet...)
	if pod.Spec.HostNetwork {
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	return &daemon{
		uid:       ds.UID,
		pod:       pod,
		need:      d.of(podRequests(pod)),
		affinity:  nodeaffinity.GetRequiredNodeAffinity(pod),
		offerKeys: referencesOfferKeys(pod.Spec.NodeSelector, requiredTerms(pod)),
		ports:     podHostPorts(pod),
		perType:   map[*typeInfo]bool{},
	}
}

func (ds *daemon) toleratesTaints(taints []corev1.Taint) bool {
	return tolerates(ds.pod.Spec.Tolerations, taints)
}

// landsOn reports whether the DaemonSet's pod would run on a node of the offering.
func (ds *daemon) landsOn(o *offer) bool {
	if ds.offerKeys {
		ok, _ := ds.affinity.Match(o.nodeObject())
		return ok
	}
	ok, cached := ds.perType[o.typ]
	if !cached {
		ok, _ = ds.affinity.Match(o.typ.node)
		ds.perType[o.typ] = ok
	}
	return ok
}

// owns reports whether the pod belongs to the DaemonSet.
func (ds *daemon) owns(pod *corev1.Pod) bool {
	ref := metav1.GetControllerOf(pod)
	return ref != nil && ref.UID == ds.uid
}

// compat is which offers of a pool a group's pods may run on, by taints, node selector,
// node affinity and volume topology.
type compat struct {
	ok  []bool
	any bool
	// types lists, per resource prices (pool.priceKey), the pool's types with at least one
	// compatible offer, most cost-efficient first (see pool.rank).
	types map[string][]*rankedType
	// launchable caches the values of a key on the offers that can take a request.
	launchable map[launchKey][]string
}

// maxRanksKept bounds the rankings a compat keeps, one per resource prices seen.
const maxRanksKept = 16

type rankedType struct {
	t *typeInfo
	// offers are the type's compatible offers, cheapest by the pool's guide first.
	offers []*offer
	// efficiency is price per unit of value: lower is better.
	efficiency float64
	// value is what a node of this type holds, priced at the pool's resource prices.
	value float64
}

// compatibleOffers computes, once per distinct set of node constraints, which offers the
// group may use.
func (p *pool) compatibleOffers(g *group) *compat {
	if c, ok := p.compatible[g.nodeID]; ok {
		return c
	}
	c := &compat{ok: make([]bool, len(p.offers))}
	p.compatible[g.nodeID] = c
	// A node named in the pod's affinity exists already: no new one is it.
	if g.onNodes != nil || !tolerates(g.tolerations, p.taints) {
		return c
	}
	for _, t := range p.types {
		if !g.offerKeys {
			if !g.matchesNode(t.node) {
				continue
			}
			for _, o := range t.offers {
				c.ok[o.index], c.any = true, true
			}
			continue
		}
		for _, o := range t.offers {
			if g.matchesNode(o.nodeObject()) {
				c.ok[o.index], c.any = true, true
			}
		}
	}
	return c
}

// rank orders the types the compat allows by cost efficiency at the pool's resource prices.
func (p *pool) rank(c *compat) []*rankedType {
	if !c.any {
		return nil
	}
	if ranked, ok := c.types[p.priceKey]; ok {
		return ranked
	}
	if c.types == nil || len(c.types) >= maxRanksKept {
		c.types = map[string][]*rankedType{}
	}
	var ranked []*rankedType
	for _, t := range p.types {
		var offers []*offer
		for _, o := range t.offers {
			if c.ok[o.index] {
				offers = append(offers, o)
			}
		}
		if len(offers) == 0 {
			continue
		}
		slices.SortStableFunc(offers, func(a, b *offer) int { return cmp.Compare(p.guidePrice(a), p.guidePrice(b)) })
		value := offers[0].alloc.value(p.prices)
		rt := &rankedType{t: t, offers: offers, value: value, efficiency: p.guidePrice(offers[0]) / max(value, 1e-12)}
		ranked = append(ranked, rt)
	}
	slices.SortStableFunc(ranked, func(a, b *rankedType) int {
		if x := cmp.Compare(a.efficiency, b.efficiency); x != 0 {
			return x
		}
		return cmp.Compare(a.t.it.Name, b.t.it.Name)
	})
	c.types[p.priceKey] = ranked
	return ranked
}
