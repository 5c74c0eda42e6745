package leader

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"

	"github.com/tailor-autoscaler/tailor/test/testenv"
)

var cs kubernetes.Interface

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(cfg *rest.Config) error {
		var err error
		cs, err = kubernetes.NewForConfig(cfg)
		return err
	}))
}

// Timings short enough for a hand-over in a few seconds, long enough that a leader renews
// in time on a loaded machine.
const (
	leaseDuration = 4 * time.Second
	renewDeadline = 3 * time.Second
	retryPeriod   = 250 * time.Millisecond
	guard         = renewDeadline + retryPeriod
)

// candidate runs one leader elector and records whether it leads.
type candidate struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	leading bool
	stints  int
}

func (c *candidate) isLeading() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leading
}

func run(t *testing.T, name string, lock resourcelock.Interface) *candidate {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &candidate{name: name, cancel: cancel, done: make(chan struct{})}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		ReleaseOnCancel: true, Name: name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				c.mu.Lock()
				c.leading, c.stints = true, c.stints+1
				c.mu.Unlock()
			},
			OnStoppedLeading: func() {
				c.mu.Lock()
				c.leading = false
				c.mu.Unlock()
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.done)
		// An elector runs one term; run it again after losing, as a restarted process would.
		for ctx.Err() == nil {
			elector.Run(ctx)
		}
	}()
	t.Cleanup(func() { c.stop() })
	return c
}

func (c *candidate) stop() {
	c.cancel()
	<-c.done
}

// schedulerLock is the Lease lock the scheduler of a replica takes.
func schedulerLock(t *testing.T, namespace, replica string) resourcelock.Interface {
	t.Helper()
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, "tailor-scheduler", cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: Identity(replica)})
	if err != nil {
		t.Fatal(err)
	}
	return lock
}

// waitFor polls until want holds for every candidate, or fails after a few lease terms.
func waitFor(t *testing.T, what string, want map[*candidate]bool) {
	t.Helper()
	deadline := time.Now().Add(10 * leaseDuration)
	for {
		got, wantNames := map[string]bool{}, map[string]bool{}
		for c, w := range want {
			got[c.name], wantNames[c.name] = c.isLeading(), w
		}
		diff := cmp.Diff(wantNames, got)
		if diff == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: leading (-want +got):\n%s", what, diff)
		}
		time.Sleep(retryPeriod)
	}
}

func namespace(t *testing.T) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "leader-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// TestSidecarLeadsWithTheSchedulerOfItsReplica runs the schedulers and sidecars of two
// replicas: the sidecar beside the leading scheduler leads, the other waits, and when the
// leading scheduler goes the lead moves to the other replica's scheduler and sidecar, with
// never two sidecars leading at once.
func TestSidecarLeadsWithTheSchedulerOfItsReplica(t *testing.T) {
	ns := namespace(t)
	sidecarA := run(t, "sidecar-a", NewLock(cs.CoordinationV1(), ns, "tailor-scheduler", "replica-a", guard, clock.RealClock{}))
	sidecarB := run(t, "sidecar-b", NewLock(cs.CoordinationV1(), ns, "tailor-scheduler", "replica-b", guard, clock.RealClock{}))
	time.Sleep(3 * retryPeriod)
	waitFor(t, "before any scheduler runs, no sidecar leads", map[*candidate]bool{sidecarA: false, sidecarB: false})

	schedulerA := run(t, "scheduler-a", schedulerLock(t, ns, "replica-a"))
	waitFor(t, "replica a's scheduler leads", map[*candidate]bool{schedulerA: true, sidecarA: true, sidecarB: false})

	var overlap bool
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(10 * time.Millisecond):
				if sidecarA.isLeading() && sidecarB.isLeading() {
					overlap = true
				}
			}
		}
	}()
	schedulerB := run(t, "scheduler-b", schedulerLock(t, ns, "replica-b"))
	time.Sleep(4 * retryPeriod)
	waitFor(t, "replica b's scheduler waits while a's leads", map[*candidate]bool{schedulerA: true, schedulerB: false, sidecarA: true, sidecarB: false})

	schedulerA.stop()
	waitFor(t, "replica a's scheduler is gone", map[*candidate]bool{schedulerB: true, sidecarA: false, sidecarB: true})
	close(stopWatch)
	<-watched
	if overlap {
		t.Error("both sidecars led at the same time")
	}
	if got := sidecarB.stints; got != 1 {
		t.Errorf("sidecar b started leading %d times, want 1", got)
	}
}

func TestLockNeverWritesTheLease(t *testing.T) {
	ns := namespace(t)
	lock := NewLock(cs.CoordinationV1(), ns, "tailor-scheduler", "replica-a", guard, clock.RealClock{})
	if err := lock.Create(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "replica-a"}); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Create error = %v, want ErrNotHeld", err)
	}
	if _, err := cs.CoordinationV1().Leases(ns).Get(context.Background(), "tailor-scheduler", metav1.GetOptions{}); err == nil {
		t.Error("Create made the Lease, want it left to the scheduler")
	}
	holder := Identity("replica-b")
	scheduler := schedulerLock(t, ns, "replica-b")
	if err := scheduler.Create(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: holder, LeaseDurationSeconds: 15}); err != nil {
		t.Fatal(err)
	}
	if err := lock.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "replica-a"}); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Update of a Lease held by another replica: error = %v, want ErrNotHeld", err)
	}
	record, _, err := lock.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if record.HolderIdentity != holder {
		t.Errorf("holder seen by replica a = %q, want replica b's scheduler %q", record.HolderIdentity, holder)
	}
}
