// Package nomination tracks where planned pods will land: the NodeClaim each pod was planned
// onto and, once that NodeClaim's instance is launched, the node it will register as. It
// streams those nominations to the scheduler plugin as soon as the plan is made, so the
// plugin keeps each pod off other nodes while its own launches, and nominates the pod to its
// node once the name is known.
//
// The tracker's state is derived from NodeClaims (their planned-pods annotation and
// status.nodeName), so a restarted provisioner rebuilds it from the API server.
package nomination

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// PlannedPodsAnnotationKey on a NodeClaim lists the pods planned onto it, as a JSON array
// of "namespace/name/uid".
const PlannedPodsAnnotationKey = "tailor.sh/planned-pods"

// Pod identifies a pod.
type Pod struct {
	Namespace string
	Name      string
	UID       types.UID
}

func (p Pod) String() string { return p.Namespace + "/" + p.Name + "/" + string(p.UID) }

// Nomination is a pod, its NodeClaim, and the node name (empty until launched).
type Nomination struct {
	Pod       Pod
	NodeClaim string
	NodeName  string
}

// Update is a change subscribers receive: pods planned onto a NodeClaim or nominated to its
// node, or plans withdrawn.
type Update struct {
	Nominated []Nomination
	Withdrawn []Pod
}

// Tracker holds the plan of every pod planned and not yet bound.
type Tracker struct {
	mu      sync.Mutex
	plans   map[types.UID]*Nomination
	byClaim map[string]map[types.UID]bool
	// stale is, per pod whose plan was dropped because its node rejected it, that plan's
	// NodeClaim: its planned-pods annotation may still list the pod, and Sync must not take
	// the pod back there.
	stale map[types.UID]string
	// gone are the pods forgotten because they were bound or deleted, oldest first, kept
	// for goneFor: a plan for one of them that was made from a read older than its binding
	// (Sync's pending check, a batch that planned the pod before it bound) is not taken,
	// where it would hold its NodeClaim's node as awaited by a pod that never comes.
	gone      map[types.UID]bool
	goneOrder []goneAt
	clock     clock.PassiveClock
	subs      map[*subscriber]bool
}

// goneFor is how long a forgotten pod's plans are refused: far longer than any read a plan
// is made from can lag behind the pod's binding.
const goneFor = 10 * time.Minute

type goneAt struct {
	uid types.UID
	at  time.Time
}

type subscriber struct {
	updates chan Update
}

// subscriberBuffer bounds how far a subscriber may lag; one that falls further behind is
// dropped and must subscribe again for a fresh snapshot.
const subscriberBuffer = 256

// NewTracker returns an empty tracker.
func NewTracker(clk clock.PassiveClock) *Tracker {
	return &Tracker{plans: map[types.UID]*Nomination{}, byClaim: map[string]map[types.UID]bool{}, stale: map[types.UID]string{},
		gone: map[types.UID]bool{}, clock: clk, subs: map[*subscriber]bool{}}
}

// Planned reports whether the pod has a live plan.
func (t *Tracker) Planned(uid types.UID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.plans[uid]
	return ok
}

// Get returns the pod's plan.
func (t *Tracker) Get(uid types.UID) (Nomination, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.plans[uid]
	if !ok {
		return Nomination{}, false
	}
	return *n, true
}

// PodsOf returns the pods planned onto a NodeClaim.
func (t *Tracker) PodsOf(nodeClaim string) []Pod {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Pod
	for uid := range t.byClaim[nodeClaim] {
		out = append(out, t.plans[uid].Pod)
	}
	return out
}

// Plan records that pods are planned onto a NodeClaim whose node will be nodeName (empty
// while unknown). Pods already planned elsewhere move.
func (t *Tracker) Plan(nodeClaim, nodeName string, pods []Pod) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.plan(nodeClaim, nodeName, pods)
}

// plan is Plan; t.mu must be held.
func (t *Tracker) plan(nodeClaim, nodeName string, pods []Pod) {
	var nominated []Nomination
	for _, p := range pods {
		if t.gone[p.UID] {
			continue
		}
		delete(t.stale, p.UID)
		if cur, ok := t.plans[p.UID]; ok && cur.NodeClaim != nodeClaim {
			delete(t.byClaim[cur.NodeClaim], p.UID)
		}
		cur, ok := t.plans[p.UID]
		if ok && cur.NodeClaim == nodeClaim && cur.NodeName == nodeName {
			continue
		}
		n := &Nomination{Pod: p, NodeClaim: nodeClaim, NodeName: nodeName}
		t.plans[p.UID] = n
		if t.byClaim[nodeClaim] == nil {
			t.byClaim[nodeClaim] = map[types.UID]bool{}
		}
		t.byClaim[nodeClaim][p.UID] = true
		nominated = append(nominated, *n)
	}
	t.publish(Update{Nominated: nominated})
}

// SetNode records the node name of a NodeClaim and nominates its pods to it.
func (t *Tracker) SetNode(nodeClaim, nodeName string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var nominated []Nomination
	for uid := range t.byClaim[nodeClaim] {
		n := t.plans[uid]
		if n.NodeName == nodeName {
			continue
		}
		n.NodeName = nodeName
		nominated = append(nominated, *n)
	}
	t.publish(Update{Nominated: nominated})
}

// DropClaim withdraws the plans of every pod of a NodeClaim (it failed or was deleted).
func (t *Tracker) DropClaim(nodeClaim string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var withdrawn []Pod
	for uid := range t.byClaim[nodeClaim] {
		withdrawn = append(withdrawn, t.plans[uid].Pod)
		delete(t.plans, uid)
	}
	delete(t.byClaim, nodeClaim)
	for uid, claim := range t.stale {
		if claim == nodeClaim {
			delete(t.stale, uid)
		}
	}
	t.publish(Update{Withdrawn: withdrawn})
}

// Forget drops a pod's plan without withdrawing it: the pod was bound or deleted. Plans
// made for it from then on are not taken.
func (t *Tracker) Forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.drop(uid)
	delete(t.stale, uid)
	now := t.clock.Now()
	for len(t.goneOrder) > 0 && now.Sub(t.goneOrder[0].at) >= goneFor {
		delete(t.gone, t.goneOrder[0].uid)
		t.goneOrder = t.goneOrder[1:]
	}
	if !t.gone[uid] {
		t.gone[uid] = true
		t.goneOrder = append(t.goneOrder, goneAt{uid: uid, at: now})
	}
}

// Replan drops a pod's plan without withdrawing it because its node rejected the pod, which
// is to be planned again. Sync does not take the pod back to that NodeClaim, whose
// planned-pods annotation may still list it. It returns the dropped plan's NodeClaim.
func (t *Tracker) Replan(uid types.UID) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.plans[uid]
	if !ok {
		return "", false
	}
	t.drop(uid)
	t.stale[uid] = n.NodeClaim
	return n.NodeClaim, true
}

// drop removes a pod's plan; t.mu must be held.
func (t *Tracker) drop(uid types.UID) {
	if n, ok := t.plans[uid]; ok {
		delete(t.byClaim[n.NodeClaim], uid)
		delete(t.plans, uid)
	}
}

// Subscribe returns every current plan, launched or not, and a channel of later updates. The
// channel is closed when the subscriber falls too far behind or cancel is called.
func (t *Tracker) Subscribe() (snapshot []Nomination, updates <-chan Update, cancel func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range t.plans {
		snapshot = append(snapshot, *n)
	}
	s := &subscriber{updates: make(chan Update, subscriberBuffer)}
	t.subs[s] = true
	return snapshot, s.updates, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.subs[s] {
			delete(t.subs, s)
			close(s.updates)
		}
	}
}

// publish sends an update to every subscriber; t.mu must be held.
func (t *Tracker) publish(u Update) {
	if len(u.Nominated) == 0 && len(u.Withdrawn) == 0 {
		return
	}
	for s := range t.subs {
		select {
		case s.updates <- u:
		default:
			delete(t.subs, s)
			close(s.updates)
		}
	}
}

// Sync brings the tracker in line with a NodeClaim from the API server: its planned pods
// that pending says still wait, and its node name. It is how a restarted provisioner
// recovers its plans. A pod planned since onto another NodeClaim, or planned again because
// this one's node rejected it, stays where it is: the annotation lists such a pod until the
// provisioner's next batch takes it off, and a NodeClaim read from a cache may lag behind.
func (t *Tracker) Sync(nc *karpv1.NodeClaim, pending func(Pod) bool) error {
	recorded, err := DecodePods(nc.Annotations[PlannedPodsAnnotationKey])
	if err != nil {
		return fmt.Errorf("reading planned pods of NodeClaim %s: %w", nc.Name, err)
	}
	// pending reads the API server, so it runs before the lock; the plans are checked and
	// changed under one hold of it, so no plan made in between is undone.
	waiting := slices.DeleteFunc(recorded, func(p Pod) bool { return !pending(p) })
	t.mu.Lock()
	t.plan(nc.Name, nc.Status.NodeName, slices.DeleteFunc(waiting, func(p Pod) bool { return t.plannedElsewhere(p.UID, nc.Name) }))
	t.mu.Unlock()
	if nc.Status.NodeName != "" {
		t.SetNode(nc.Name, nc.Status.NodeName)
	}
	return nil
}

// plannedElsewhere reports whether the pod is planned onto another NodeClaim than the
// one named, or was planned again away from it; t.mu must be held.
func (t *Tracker) plannedElsewhere(uid types.UID, nodeClaim string) bool {
	if n, ok := t.plans[uid]; ok && n.NodeClaim != nodeClaim {
		return true
	}
	return t.stale[uid] == nodeClaim
}

// EncodePods renders pods for the planned-pods annotation.
func EncodePods(pods []Pod) (string, error) {
	list := make([]string, len(pods))
	for i, p := range pods {
		list[i] = p.String()
	}
	b, err := json.Marshal(list)
	if err != nil {
		return "", fmt.Errorf("encoding planned pods: %w", err)
	}
	return string(b), nil
}

// DecodePods parses the planned-pods annotation; an empty value is no pods.
func DecodePods(value string) ([]Pod, error) {
	if value == "" {
		return nil, nil
	}
	var list []string
	if err := json.Unmarshal([]byte(value), &list); err != nil {
		return nil, fmt.Errorf("decoding %s (want a JSON array of \"namespace/name/uid\"): %w", PlannedPodsAnnotationKey, err)
	}
	out := make([]Pod, 0, len(list))
	for _, s := range list {
		parts := strings.Split(s, "/")
		if len(parts) != 3 {
			return nil, fmt.Errorf("decoding %s: %q is not namespace/name/uid", PlannedPodsAnnotationKey, s)
		}
		out = append(out, Pod{Namespace: parts[0], Name: parts[1], UID: types.UID(parts[2])})
	}
	return out, nil
}
