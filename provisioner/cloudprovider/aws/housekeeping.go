package aws

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/klog/v2"
)

// housekeepingPeriod is how often Start refreshes prices and collects launch templates.
const housekeepingPeriod = time.Minute

// Start refreshes the catalog and prices and garbage-collects launch templates every
// housekeeping period until ctx ends, so that planning finds prices fresh and templates of
// past AMIs, user data or classes do not pile up. It implements manager.Runnable.
func (p *Provider) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("aws")
	for {
		if _, _, err := p.catalogAndPrices(ctx); err != nil {
			logger.Error(err, "Failed to read the instance catalog and prices")
		}
		if deleted, err := p.GarbageCollectLaunchTemplates(ctx); err != nil {
			logger.Error(err, "Failed to garbage-collect launch templates")
		} else if len(deleted) > 0 {
			logger.Info("Deleted unused launch templates", "launchTemplates", deleted)
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
// launch created or used within LaunchTemplateTTL, and returns their names. Every launch
// uses the template of its (class, AMI, user data, …) combination, so a template left
// unused for that long belongs to a combination that is no longer current (a replaced AMI,
// changed user data, a deleted class); should it be needed again, a launch recreates it.
func (p *Provider) GarbageCollectLaunchTemplates(ctx context.Context) ([]string, error) {
	pages := ec2.NewDescribeLaunchTemplatesPaginator(p.ec2, &ec2.DescribeLaunchTemplatesInput{
		Filters: []ec2types.Filter{{Name: aws.String("tag:" + clusterTagKey(p.opts.Cluster.Name)), Values: []string{"owned"}}},
	})
	now := p.clock.Now()
	var unused []string
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing launch templates: %w", err)
		}
		for _, lt := range page.LaunchTemplates {
			name := aws.ToString(lt.LaunchTemplateName)
			last := aws.ToTime(lt.CreateTime)
			p.mu.Lock()
			if used, ok := p.templates[name]; ok && used.After(last) {
				last = used
			}
			if now.Sub(last) < p.opts.LaunchTemplateTTL {
				p.mu.Unlock()
				continue
			}
			// Forgotten before deleting, so a launch from now on recreates it.
			delete(p.templates, name)
			p.mu.Unlock()
			unused = append(unused, name)
		}
	}
	sort.Strings(unused)
	var deleted []string
	for _, name := range unused {
		_, err := p.ec2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(name)})
		if err != nil && !isAPIError(err, "InvalidLaunchTemplateName.NotFoundException") {
			return deleted, fmt.Errorf("deleting launch template %s: %w", name, err)
		}
		deleted = append(deleted, name)
	}
	return deleted, nil
}
