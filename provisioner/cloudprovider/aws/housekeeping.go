package aws

import (
	"context"
	"time"

	"k8s.io/klog/v2"
)

// housekeepingPeriod is how often Start refreshes prices and collects launch templates.
const housekeepingPeriod = time.Minute

// Start refreshes the catalog and prices and garbage-collects launch templates every
// housekeeping period until ctx ends, so that planning finds prices fresh and templates of
// past AMIs, user data or classes do not pile up. A collection that fails is tried again
// after a wait that doubles up to five minutes. It implements manager.Runnable.
func (p *Provider) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("aws")
	for {
		if _, _, err := p.catalog.Get(ctx); err != nil {
			logger.Error(err, "failed to read the instance catalog and prices")
		}
		if p.failures.Wait(failureTemplateCollection, "") == 0 {
			if deleted, err := p.GarbageCollectLaunchTemplates(ctx); err != nil {
				wait := p.failures.Failed(failureTemplateCollection, "")
				logger.Error(err, "failed to garbage-collect launch templates", "retryIn", wait.String())
			} else {
				p.failures.Forget(failureTemplateCollection)
				if len(deleted) > 0 {
					logger.Info("deleted unused launch templates", "launchTemplates", deleted)
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.clock.After(housekeepingPeriod):
		}
	}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: only the leader deletes.
func (p *Provider) NeedLeaderElection() bool { return true }

// GarbageCollectLaunchTemplates deletes the launch templates owned by this cluster that no
// launch created or used within LaunchTemplateTTL and no NodeClaim references, and returns
// their names (see launch.Launcher.GarbageCollect).
func (p *Provider) GarbageCollectLaunchTemplates(ctx context.Context) ([]string, error) {
	return p.launcher.GarbageCollect(ctx)
}
