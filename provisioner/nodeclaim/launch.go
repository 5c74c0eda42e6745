package nodeclaim

import (
	"time"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// LaunchStartedAnnotationKey on a NodeClaim is when its latest launch began (RFC 3339),
// written before the launch and removed once it fails: a sidecar that takes over sees that
// a predecessor's launch may still be in flight, and termination that an instance may still
// appear for a NodeClaim deleted while it launched.
const LaunchStartedAnnotationKey = "tailor.sh/launch-started"

// LaunchTimeout bounds one launch, shutdown or not; the manager's graceful shutdown waits
// at least as long.
const LaunchTimeout = 90 * time.Second

// InFlightWindow is how long after a launch began it may still create an instance: the
// launch's own bound and a margin for the cloud to show what it launched. A launch the
// cloud answers slowly (a sidecar killed while CreateFleet took tens of seconds) otherwise
// got a second instance (randomized fault trials, seed 5033).
const InFlightWindow = LaunchTimeout + 30*time.Second

// LaunchInFlight reports whether the NodeClaim's launch began less than InFlightWindow
// before now and recorded no instance yet, and when it began.
func LaunchInFlight(nc *karpv1.NodeClaim, now time.Time) (time.Time, bool) {
	if nc.Status.ProviderID != "" {
		return time.Time{}, false
	}
	started, err := time.Parse(time.RFC3339, nc.Annotations[LaunchStartedAnnotationKey])
	if err != nil {
		return time.Time{}, false
	}
	return started, now.Sub(started) < InFlightWindow
}
