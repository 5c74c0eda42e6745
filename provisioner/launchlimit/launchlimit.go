// Package launchlimit keeps Tailor from buying capacity again and again for pods the
// scheduler turns down on the nodes planned for them.
//
// A plan can miss for reasons the planner does not model: a filter plugin it knows nothing
// of, a device a driver never publishes, a CSI attach limit, an extended resource no device
// plugin advertises. The node then registers, the scheduler rejects the pod there, and
// planning again buys the same capacity again, and again, while consolidation removes the
// empty nodes: a runaway scale-up that is billed and never runs the pod. So every launch
// whose node rejected its pod is counted, per pod and per group of identical pods. After a
// rejection the pod waits before it is planned again, twice as long after each next one;
// past a bound nothing more is launched for it until something changes that could change
// the answer: the pod, its NodePools or its claims (the subject's version), or a pod of its
// group landing on capacity planned for it.
package launchlimit

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// PodCondition is the pod condition that says the scheduler rejected the pod on capacity
// Tailor planned for it: True while the pod is held back (reason BackingOff or
// LaunchLimitReached, the message naming the filter plugin and its reason), False once it
// is planned again. After a restart, a pod whose condition says LaunchLimitReached stays
// limited until it changes.
const PodCondition corev1.PodConditionType = "tailor.sh/PlannedCapacityRejected"

// Defaults of the provisioner's flags.
const (
	// DefaultPerPod is --launch-limit-per-pod.
	DefaultPerPod = 3
	// DefaultPerGroup is --launch-limit-per-group.
	DefaultPerGroup = 6
	// DefaultBackoff is --launch-backoff: a node takes most of a minute to register, so a
	// pod rejected by its first one is planned again a minute and a half after the first
	// launch, at the earliest.
	DefaultBackoff = 30 * time.Second
	// DefaultMaxBackoff caps the doubling waits.
	DefaultMaxBackoff = 10 * time.Minute
)

// Options configure a Limiter.
type Options struct {
	// Clock tells the time.
	Clock clock.PassiveClock
	// PerPod is how many launches a pod may get whose node then rejected it.
	PerPod int
	// PerGroup is the same for a group of identical pods: a group's pods share their
	// launches, so a controller that keeps creating new pods does not start afresh.
	PerGroup int
	// Backoff is the wait after a first rejection; each next one doubles it, up to
	// MaxBackoff.
	Backoff, MaxBackoff time.Duration
}

// Validate says which option is wrong and how to set it.
func (o Options) Validate() error {
	switch {
	case o.Clock == nil:
		return fmt.Errorf("launch limit: a clock is required")
	case o.PerPod < 1:
		return fmt.Errorf("--launch-limit-per-pod is %d: it must be at least 1", o.PerPod)
	case o.PerGroup < 1:
		return fmt.Errorf("--launch-limit-per-group is %d: it must be at least 1", o.PerGroup)
	case o.Backoff <= 0:
		return fmt.Errorf("--launch-backoff is %s: it must be positive", o.Backoff)
	case o.MaxBackoff < o.Backoff:
		return fmt.Errorf("the launch backoff's cap %s is below --launch-backoff %s", o.MaxBackoff, o.Backoff)
	}
	return nil
}

// Subject is a pod as the limiter counts it.
type Subject struct {
	UID types.UID
	// Group identifies the pods identical to this one (the same controller, the same
	// scheduling constraints); empty for a pod of its own.
	Group string
	// Version names what the pod's answer depends on: its spec, its NodePools, its claims.
	// Rejections counted at another version no longer hold the pod back.
	Version string
	// GroupVersion is Version for the group: what its pods share (their NodePools).
	GroupVersion string
}

// Rejection is the scheduler's verdict on a pod at the node planned for it.
type Rejection struct {
	// Plugin is the filter plugin that rejected the pod; Reason its message.
	Plugin, Reason string
	// Node and NodeClaim are where the pod was planned.
	Node, NodeClaim string
	// At is when the provisioner learnt of it.
	At time.Time
}

// String renders the rejection as users read it: "<plugin>: <reason>".
func (r Rejection) String() string {
	switch {
	case r.Plugin == "":
		return r.Reason
	case r.Reason == "":
		return r.Plugin
	}
	return r.Plugin + ": " + r.Reason
}

// State is whether a pod may be planned.
type State int

const (
	// Free means: plan the pod.
	Free State = iota
	// BackingOff means: plan the pod once Verdict.Until has passed.
	BackingOff
	// Limited means: launch nothing more for the pod until its version changes.
	Limited
)

func (s State) String() string {
	switch s {
	case BackingOff:
		return "BackingOff"
	case Limited:
		return "Limited"
	}
	return "Free"
}

// Verdict says whether a pod may be planned, and why not.
type Verdict struct {
	State State
	// Until is when a pod backing off may be planned again.
	Until time.Time
	// Launches is how many of the launches of the pod, or of its group when ByGroup, its
	// node rejected; Limit is the bound they count against.
	Launches, Limit int
	// ByGroup says the group's launches hold the pod back, not its own.
	ByGroup bool
	// Last is the latest rejection counted for the pod (or its group).
	Last Rejection
}

// record is the rejected launches of a pod or a group at one version.
type record struct {
	version string
	// claims are the NodeClaims whose node rejected it: one NodeClaim counts once, however
	// many of the group's pods it rejected.
	claims map[string]bool
	// restored counts the rejections a restart lost but the pod's condition kept.
	restored int
	next     time.Time
	last     Rejection
}

func (r *record) count() int { return r.restored + len(r.claims) }

// Limiter counts rejected launches and says which pods wait. It is safe for concurrent use.
type Limiter struct {
	opts Options

	mu     sync.Mutex
	pods   map[types.UID]*record
	groups map[string]*record
	// groupOf is the group each counted pod belongs to, for Landed.
	groupOf map[types.UID]string
}

// New validates the options and returns an empty Limiter.
func New(opts Options) (*Limiter, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Limiter{opts: opts, pods: map[types.UID]*record{}, groups: map[string]*record{}, groupOf: map[types.UID]string{}}, nil
}

// Rejected counts a launch whose node rejected the pod and returns the pod's verdict
// after it. The same NodeClaim counts once per pod and once per group.
func (l *Limiter) Rejected(s Subject, r Rejection) Verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	countIn(l.pods, s.UID, s.Version, r, l.wait)
	if s.Group != "" {
		countIn(l.groups, s.Group, s.GroupVersion, r, l.wait)
		l.groupOf[s.UID] = s.Group
	}
	return l.check(s)
}

// countIn adds the rejection to the record of key in records, at version, and sets when
// it may be planned again: wait after as many rejections as the record now counts.
func countIn[K comparable](records map[K]*record, key K, version string, r Rejection, wait func(int) time.Duration) {
	rec, ok := records[key]
	if !ok || rec.version != version {
		rec = &record{version: version, claims: map[string]bool{}}
		records[key] = rec
	}
	if rec.claims[r.NodeClaim] {
		return
	}
	rec.claims[r.NodeClaim] = true
	rec.last = r
	rec.next = r.At.Add(wait(rec.count()))
}

// wait is the backoff after n rejections: Backoff, doubled for each one past the first,
// capped at MaxBackoff.
func (l *Limiter) wait(n int) time.Duration {
	if n > 30 {
		return l.opts.MaxBackoff
	}
	return min(l.opts.Backoff<<(n-1), l.opts.MaxBackoff)
}

// Check returns the pod's verdict: Free unless its own launches or its group's hold it
// back at their current versions.
func (l *Limiter) Check(s Subject) Verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.check(s)
}

func (l *Limiter) check(s Subject) Verdict {
	now := l.opts.Clock.Now()
	pod := verdictOf(l.pods[s.UID], s.Version, l.opts.PerPod, now)
	if s.Group == "" {
		return pod
	}
	group := verdictOf(l.groups[s.Group], s.GroupVersion, l.opts.PerGroup, now)
	group.ByGroup = true
	return stricter(pod, group)
}

// verdictOf is what a record at version says, against limit.
func verdictOf(rec *record, version string, limit int, now time.Time) Verdict {
	if rec == nil || rec.version != version {
		return Verdict{State: Free, Limit: limit}
	}
	v := Verdict{State: Free, Launches: rec.count(), Limit: limit, Last: rec.last}
	switch {
	case rec.count() >= limit:
		v.State = Limited
	case now.Before(rec.next):
		v.State, v.Until = BackingOff, rec.next
	}
	return v
}

// stricter returns the verdict that holds the pod back longer.
func stricter(a, b Verdict) Verdict {
	switch {
	case a.State != b.State:
		if a.State > b.State {
			return a
		}
		return b
	case a.State == BackingOff && b.Until.After(a.Until):
		return b
	case a.State == Free && b.Launches > a.Launches:
		// Neither holds the pod: the one that counted more says more.
		return b
	}
	return a
}

// Landed records that the pod was bound to capacity planned for it: what its group was
// rejected for does not hold for all its pods, so the group starts afresh; the pod is
// forgotten.
func (l *Limiter) Landed(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g, ok := l.groupOf[uid]; ok {
		delete(l.groups, g)
	}
	l.forget(uid)
}

// Forget drops the pod's own record: it is gone. Its group's stays, for the pods a
// controller creates in its place.
func (l *Limiter) Forget(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forget(uid)
}

func (l *Limiter) forget(uid types.UID) {
	delete(l.pods, uid)
	delete(l.groupOf, uid)
}

// Restore seeds the counts a restart lost from what the pod's condition kept: launches
// rejected for the pod, or for its group when byGroup, counted at the subject's current
// versions, the latest rejection r. A pod or group the limiter counts already is left as it
// is; Restore reports whether it seeded anything.
func (l *Limiter) Restore(s Subject, launches int, byGroup bool, r Rejection) bool {
	if launches <= 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	seed := func(version string, rec *record) *record {
		if rec != nil {
			return nil
		}
		return &record{version: version, claims: map[string]bool{}, restored: launches, last: r, next: r.At.Add(l.wait(launches))}
	}
	if byGroup && s.Group != "" {
		rec := seed(s.GroupVersion, l.groups[s.Group])
		if rec == nil {
			return false
		}
		l.groups[s.Group], l.groupOf[s.UID] = rec, s.Group
		return true
	}
	rec := seed(s.Version, l.pods[s.UID])
	if rec == nil {
		return false
	}
	l.pods[s.UID] = rec
	return true
}
