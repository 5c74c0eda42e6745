package disruption

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/gang"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/provisioner/reservation"
	"github.com/tailor-autoscaler/tailor/provisioner/surge"
)

// view turns the planner's input into candidates and budgets.
func (c *Controller) view(ctx context.Context, in packing.Input) (Cluster, Budget, error) {
	now := c.clock.Now()
	claims := &karpv1.NodeClaimList{}
	if err := c.kube.List(ctx, claims, client.UnsafeDisableDeepCopy); err != nil {
		return Cluster{}, nil, fmt.Errorf("listing NodeClaims: %w", err)
	}
	total, disrupting := map[string]int{}, map[string]int{}
	for i := range claims.Items {
		pool := claims.Items[i].Labels[karpv1.NodePoolLabelKey]
		total[pool]++
		if claims.Items[i].DeletionTimestamp != nil {
			disrupting[pool]++
		}
	}
	pools := map[string]*packing.NodePool{}
	launchable := make([]packing.NodePool, 0, len(in.NodePools))
	for i := range in.NodePools {
		np := &in.NodePools[i]
		pools[np.NodePool.Name] = np
		if !c.static(np.NodePool) {
			launchable = append(launchable, *np)
		}
	}
	in.NodePools = launchable
	for owner, m := range c.moved {
		if now.Sub(m.last) >= c.opts.MovedPodsHold {
			delete(c.moved, owner)
		}
	}
	for name, at := range c.replacements {
		if now.Sub(at) >= c.opts.MovedPodsHold {
			delete(c.replacements, name)
		}
	}
	held, err := c.heldByBudgets(ctx, in, pools)
	if err != nil {
		return Cluster{}, nil, err
	}
	cluster := clusterOf(in)
	seen := map[string]bool{}
	for _, n := range in.Nodes {
		seen[n.Node.Name] = true
		if why, ok := held[n.Node.Name]; ok {
			log.FromContext(ctx).V(2).Info("leaving a node alone: a pod of it cannot be evicted now", "node", n.Node.Name, "why", why)
			continue
		}
		cand, ok := c.candidate(n, pools, now)
		if ok {
			cluster.Candidates = append(cluster.Candidates, cand)
		}
	}
	for name := range c.stable {
		if !seen[name] {
			delete(c.stable, name)
		}
	}
	// The budgets are read as the pass asks for them: a NodePool whose budgets cannot be
	// read is not disrupted, and said so once a pass.
	logger, unreadable := log.FromContext(ctx), map[string]bool{}
	budget := func(pool string, reason karpv1.DisruptionReason) int {
		np, ok := pools[pool]
		if !ok {
			return 0
		}
		n, err := Allowed(np.NodePool, reason, total[pool], disrupting[pool], now)
		if err != nil {
			if !unreadable[pool] {
				unreadable[pool] = true
				logger.Error(err, "reading disruption budgets; the NodePool is not disrupted", "nodePool", pool)
			}
			return 0
		}
		return n
	}
	return cluster, budget, nil
}

// heldByBudgets are the nodes, with why, that run a pod a PodDisruptionBudget lets no one
// evict now and that no copy could replace first (package surge): as in Karpenter, they are
// not disrupted until the budget allows it, rather than cordoned for a drain that cannot
// finish, and that would hold every later decision while it waits.
func (c *Controller) heldByBudgets(ctx context.Context, in packing.Input, pools map[string]*packing.NodePool) (map[string]string, error) {
	pdbs := &policyv1.PodDisruptionBudgetList{}
	if err := c.api.List(ctx, pdbs); err != nil {
		return nil, fmt.Errorf("listing PodDisruptionBudgets: %w", err)
	}
	type budget struct {
		namespace, name string
		selector        labels.Selector
	}
	var closed []budget
	for _, pdb := range pdbs.Items {
		if pdb.Status.DisruptionsAllowed > 0 {
			continue
		}
		// As the Eviction API reads it: an empty selector selects every pod of the namespace.
		if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil {
			closed = append(closed, budget{pdb.Namespace, pdb.Name, sel})
		}
	}
	if len(closed) == 0 {
		return nil, nil
	}
	checker := c.checker()
	held := map[string]string{}
	for _, n := range in.Nodes {
		if n.NodeClaim == nil {
			continue
		}
		var pool *karpv1.NodePool
		if np, ok := pools[n.NodeClaim.Labels[karpv1.NodePoolLabelKey]]; ok {
			pool = np.NodePool
		}
	pods:
		for _, p := range n.Pods {
			if !movable(p) {
				continue
			}
			for _, b := range closed {
				if b.namespace != p.Namespace || !b.selector.Matches(labels.Set(p.Labels)) {
					continue
				}
				if surge.OptedIn(p, pool) {
					v, err := checker.Check(ctx, p, map[types.UID]bool{p.UID: true})
					if err != nil {
						return nil, err
					}
					if v.Plan != nil {
						continue
					}
				}
				held[n.Node.Name] = fmt.Sprintf("PodDisruptionBudget %s allows no disruption of pod %s/%s", b.name, p.Namespace, p.Name)
				break pods
			}
		}
	}
	return held, nil
}

// clusterOf is the cluster of a planner's input, without candidates.
func clusterOf(in packing.Input) Cluster {
	return Cluster{Nodes: in.Nodes, NodePools: in.NodePools, DaemonSets: in.DaemonSets, Volumes: in.Volumes, MinValuesPolicy: in.MinValuesPolicy}
}

// candidate decides whether a node may be disrupted at all, and how.
func (c *Controller) candidate(n packing.Node, pools map[string]*packing.NodePool, now time.Time) (Candidate, bool) {
	nc := n.NodeClaim
	if nc == nil || nc.DeletionTimestamp != nil || !nodeclaim.IsTrue(nc, karpv1.ConditionTypeInitialized) || !n.Schedulable {
		return Candidate{}, false
	}
	pool, ok := pools[nc.Labels[karpv1.NodePoolLabelKey]]
	if !ok || now.Sub(nc.CreationTimestamp.Time) < c.opts.MinNodeAge {
		return Candidate{}, false
	}
	if n.Node.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" || len(c.planned.PodsOf(nc.Name)) > 0 {
		return Candidate{}, false
	}
	cand := Candidate{
		Node: n.Node.Name, NodeClaim: nc.Name, NodePool: pool.NodePool.Name,
		CapacityType: n.Node.Labels[karpv1.CapacityTypeLabelKey],
		Price:        offeringPrice(pool, n.Node.Labels),
		Drifted:      nodeclaim.IsTrue(nc, karpv1.ConditionTypeDrifted),
		Planned:      c.rest[n.Node.Name],
	}
	digest := fnv.New64a()
	_, holdsMoved := c.replacements[nc.Name]
	holdsGang := false
	for _, p := range n.Pods {
		if p.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" {
			return Candidate{}, false
		}
		if movable(p) {
			cand.Pods = append(cand.Pods, p)
			_, _ = digest.Write([]byte(p.Namespace + "/" + p.Name + "/" + string(p.UID) + ";"))
			holdsMoved = holdsMoved || c.wasMoved(p)
			_, member := gang.KeyOf(p)
			holdsGang = holdsGang || member
		}
	}
	st, ok := c.stable[cand.Node]
	if !ok || st.digest != digest.Sum64() {
		st = stability{digest: digest.Sum64(), since: now}
		c.stable[cand.Node] = st
	}
	disruption := pool.NodePool.Spec.Disruption
	if after := disruption.ConsolidateAfter.Duration; after != nil && now.Sub(st.since) >= *after && !c.static(pool.NodePool) {
		cand.MayRemoveEmpty = true
		// A gang's members run together: moving one stops them all until it lands again,
		// so consolidation leaves their nodes alone.
		cand.MayConsolidate = disruption.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmpty && !holdsMoved && !holdsGang
	}
	return cand, true
}

type stability struct {
	digest uint64
	since  time.Time
}

// static reports whether the NodePool keeps a fixed number of nodes, which consolidation
// leaves alone.
func (c *Controller) static(np *karpv1.NodePool) bool {
	return c.opts.StaticCapacity && np.IsStatic()
}

// moves are when consolidation first and last evicted pods of one controller.
type moves struct{ first, last time.Time }

// wasMoved reports whether a pod took the place of one consolidation evicted: its
// controller lost pods to consolidation before the pod was created. A later eviction does
// not make the pods created since the first any less moved.
func (c *Controller) wasMoved(p *corev1.Pod) bool {
	owner, ok := reservation.ControllerOf(p)
	if !ok {
		return false
	}
	if c.inherited(p) {
		return true
	}
	m, ok := c.moved[owner]
	return ok && !p.CreationTimestamp.Time.Before(m.first.Truncate(time.Second))
}

// inherited reports whether a pod was created before this controller led and is younger
// than MovedPodsHold: a predecessor may have moved it (found by the randomized fault
// trials: a sidecar killed just after a consolidation left its successor free to move the
// same pods again). Creation timestamps have whole seconds, so a pod created in the second
// the controller began to lead counts as created after: otherwise a pod created a moment
// after a single replica started would look older than it, and stay put for MovedPodsHold.
func (c *Controller) inherited(p *corev1.Pod) bool {
	created := p.CreationTimestamp.Time
	return !c.leadingSince.IsZero() && created.Before(c.leadingSince.Truncate(time.Second)) && c.clock.Since(created) < c.opts.MovedPodsHold
}

// movable reports whether a pod must find another node when its node goes: not a DaemonSet
// pod, not a mirror pod, not finished.
func movable(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil {
		return false
	}
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	return !nodeclaim.OwnedByDaemonSet(p)
}

// offeringPrice is the hourly price of a node of the offering a node runs on (its instance
// and its node costs: volumes, public IPv4, monitoring); zero when unknown. A node in a
// capacity reservation has its reservation's offering, priced next to nothing: consolidation
// keeps it rather than replace it.
func offeringPrice(pool *packing.NodePool, labels map[string]string) float64 {
	if o, ok := cloudprovider.OfferingOf(pool.InstanceTypes, labels); ok {
		return o.NodePrice()
	}
	return 0
}
