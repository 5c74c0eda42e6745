// Package backoff spaces out the attempts of objects whose reconcile keeps failing: after
// each consecutive failure an object waits twice as long, up to a cap, on an injected clock.
// A persistent error (a missing AMI, a denied permission, an outage) then costs a few AWS
// requests per object every few minutes instead of several a second. Controllers return the
// wait as RequeueAfter and, when a reconcile starts, skip an object whose wait has not
// passed, whatever triggered it: a watch event, their own status write, a resync.
package backoff

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Waits of the controllers that call AWS: the SDK has retried each request already, so the
// first wait is short; at the cap a failing object makes one attempt every five minutes.
const (
	DefaultInitial = 5 * time.Second
	DefaultMax     = 5 * time.Minute
)

// Failures counts the consecutive failures of each object and says how long it waits before
// its next attempt. It is safe for concurrent use.
type Failures struct {
	clock        clock.PassiveClock
	initial, max time.Duration

	mu      sync.Mutex
	objects map[string]failures
}

// failures are an object's consecutive failures at one version of it.
type failures struct {
	version string
	count   int
	next    time.Time
}

// New returns Failures whose objects wait initial after a first failure, twice as long after
// each next one, and never longer than max.
func New(clk clock.PassiveClock, initial, max time.Duration) *Failures {
	return &Failures{clock: clk, initial: initial, max: max, objects: map[string]failures{}}
}

// Wait returns how long the object must wait before its next attempt, zero when it may make
// one now. version names what the object's failures were about (its UID and generation, say):
// another version starts afresh, so that a fixed spec is tried at once.
func (f *Failures) Wait(key, version string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.objects[key]
	if !ok || o.version != version {
		return 0
	}
	return max(o.next.Sub(f.clock.Now()), 0)
}

// Failed records a failed attempt of the object at this version and returns how long it waits
// before the next one.
func (f *Failures) Failed(key, version string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	o := f.objects[key]
	if o.version != version {
		o = failures{version: version}
	}
	o.count++
	wait := f.max
	// Past 2^30 the shift would overflow; the cap is reached long before.
	if o.count <= 30 {
		wait = min(f.initial<<(o.count-1), f.max)
	}
	o.next = f.clock.Now().Add(wait)
	f.objects[key] = o
	return wait
}

// Forget drops the object's failures: after a success, or once the object is gone.
func (f *Failures) Forget(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.objects, key)
}

// Retain drops the failures of the objects keep does not want, such as those gone from a
// list.
func (f *Failures) Retain(keep func(key string) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for key := range f.objects {
		if !keep(key) {
			delete(f.objects, key)
		}
	}
}

// NewQueue returns controller-runtime's NewQueue option for a work queue whose delays follow
// clk: RequeueAfter and rate-limited retries come due on clk's time, so a test that steps a
// fake clock sees the requeues it would see in real time.
func NewQueue(clk clock.WithTicker) func(string, workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return func(name string, limiter workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		return workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Name: name, Clock: clk})
	}
}
