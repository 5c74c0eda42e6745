// Package leader makes the provisioner sidecar lead exactly when the scheduler in its own
// pod leads. The scheduler plugin hands pods to the sidecar over a unix socket inside the
// pod, so the active sidecar must be the one beside the active scheduler; electing the
// sidecars separately could pair an active scheduler with an idle sidecar.
//
// The scheduler keeps its own Lease, with an identity that starts with the replica's name
// (Identity). The sidecar runs a leader elector over a Lock that reads that Lease: the
// sidecar holds the lock while the scheduler of its replica holds the Lease, and can never
// take the Lease from anyone.
package leader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// ReplicaEnv names the replica (its pod) in the environment of both containers; the host
// name is used when it is unset, which in Kubernetes is the pod's name as well.
const ReplicaEnv = "TAILOR_REPLICA"

// Replica returns the name of this replica.
func Replica() (string, error) {
	if r := os.Getenv(ReplicaEnv); r != "" {
		return r, nil
	}
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("naming this replica: set %s or a host name: %w", ReplicaEnv, err)
	}
	return host, nil
}

// Identity is the scheduler's leader election identity for a replica: the replica's name, then
// a unique suffix so that a restarted scheduler is a new candidate.
func Identity(replica string) string {
	return replica + "_" + string(uuid.NewUUID())
}

// heldBy reports whether a Lease holder identity is a scheduler of the replica.
func heldBy(holder, replica string) bool {
	return strings.HasPrefix(holder, replica+"_")
}

// ErrNotHeld is returned when the sidecar would take a Lease its scheduler does not hold.
var ErrNotHeld = errors.New("the scheduler of this replica does not hold the Lease")

// Lock is a resourcelock.Interface over the scheduler's Lease, read-only: its holder is this
// replica once the replica's scheduler has held the Lease for the guard period.
//
// The guard keeps two sidecars from leading at once. A sidecar whose scheduler lost the Lease
// only notices when its next renewal fails, and gives up after its elector's renew deadline;
// the sidecar of the new holder waits that long (the renew deadline plus a retry period)
// before it leads.
type Lock struct {
	leases          coordinationv1client.LeasesGetter
	namespace, name string
	replica         string
	guard           time.Duration
	clock           clock.PassiveClock

	mu sync.Mutex
	// heldSince is when this replica's scheduler was first seen holding the Lease, in the
	// current stretch; zero while it does not hold it.
	heldSince time.Time
}

var _ resourcelock.Interface = &Lock{}

// NewLock returns the Lock of a replica over the scheduler's Lease namespace/name, with the
// guard period described on Lock.
func NewLock(leases coordinationv1client.LeasesGetter, namespace, name, replica string, guard time.Duration, clk clock.PassiveClock) *Lock {
	return &Lock{leases: leases, namespace: namespace, name: name, replica: replica, guard: guard, clock: clk}
}

// ours reports whether the replica's scheduler holds the Lease and has for the guard period.
func (l *Lock) ours(holder string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !heldBy(holder, l.replica) {
		l.heldSince = time.Time{}
		return false
	}
	now := l.clock.Now()
	if l.heldSince.IsZero() {
		l.heldSince = now
	}
	return now.Sub(l.heldSince) >= l.guard
}

// Get returns the scheduler's Lease as a record whose holder is this replica when the
// replica's scheduler holds it.
func (l *Lock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	lease, err := l.leases.Leases(l.namespace).Get(ctx, l.name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	record := resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec)
	if l.ours(record.HolderIdentity) {
		record.HolderIdentity = l.replica
	}
	raw, err := json.Marshal(record)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the record of Lease %s: %w", l.Describe(), err)
	}
	return record, raw, nil
}

// Create fails: only the scheduler creates its Lease.
func (l *Lock) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	return fmt.Errorf("waiting for the scheduler to create Lease %s: %w", l.Describe(), ErrNotHeld)
}

// Update writes nothing; it succeeds while the replica's scheduler holds the Lease (past the
// guard period), which is how the sidecar acquires and renews its leadership.
func (l *Lock) Update(ctx context.Context, _ resourcelock.LeaderElectionRecord) error {
	lease, err := l.leases.Leases(l.namespace).Get(ctx, l.name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if holder := holderOf(lease); !l.ours(holder) {
		return fmt.Errorf("the Lease %s is held by %q: %w", l.Describe(), holder, ErrNotHeld)
	}
	return nil
}

// RecordEvent does nothing: the scheduler records leadership events on its Lease.
func (l *Lock) RecordEvent(string) {}

// Identity is the replica's name.
func (l *Lock) Identity() string { return l.replica }

// Describe names the Lease.
func (l *Lock) Describe() string { return l.namespace + "/" + l.name }

func holderOf(lease *coordinationv1.Lease) string {
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}
