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
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
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
		if _, _, err := p.catalogAndPrices(ctx); err != nil {
			logger.Error(err, "Failed to read the instance catalog and prices")
		}
		if p.refreshFailures.Wait(failureTemplateCollection, "") == 0 {
			if deleted, err := p.GarbageCollectLaunchTemplates(ctx); err != nil {
				wait := p.refreshFailures.Failed(failureTemplateCollection, "")
				logger.Error(err, "Failed to garbage-collect launch templates", "retryIn", wait.String())
			} else {
				p.refreshFailures.Forget(failureTemplateCollection)
				if len(deleted) > 0 {
					logger.Info("Deleted unused launch templates", "launchTemplates", deleted)
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
// their names. Every launch uses the template of its (class, AMI, user data, …)
// combination, so a template left unused for that long belongs to a combination that is no
// longer current (a replaced AMI, changed user data, a deleted class); should it be needed
// again, a launch recreates it. What this replica's launches used is only part of the
// picture (the other replica may have launched with a template since, and a restart
// forgets), so the NodeClaims of the cluster say which templates are in use: the one each
// launched NodeClaim names, and every template of the NodePool and EC2NodeClass of a
// NodeClaim still launching.
func (p *Provider) GarbageCollectLaunchTemplates(ctx context.Context) ([]string, error) {
	inUse, err := p.templatesInUse(ctx)
	if err != nil {
		return nil, err
	}
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
			if inUse.has(name, lt.Tags) {
				continue
			}
			last := aws.ToTime(lt.CreateTime)
			p.mu.Lock()
			if known, ok := p.templates[name]; ok && known.used.After(last) {
				last = known.used
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

// templatesInUse are the launch templates the cluster's NodeClaims reference.
type templatesInUse struct {
	// names are the templates launched NodeClaims were launched from.
	names map[string]bool
	// launching are the NodePool and EC2NodeClass of NodeClaims not launched yet: whichever
	// replica launches them uses one of that pair's templates.
	launching map[[2]string]bool
}

// templatesInUse reads the templates in use from the cluster's NodeClaims.
func (p *Provider) templatesInUse(ctx context.Context) (templatesInUse, error) {
	claims := &karpv1.NodeClaimList{}
	// Read only: the cache's own objects, not copies of every NodeClaim.
	if err := p.claims.List(ctx, claims, client.UnsafeDisableDeepCopy); err != nil {
		return templatesInUse{}, fmt.Errorf("listing NodeClaims: %w", err)
	}
	inUse := templatesInUse{names: map[string]bool{}, launching: map[[2]string]bool{}}
	for i := range claims.Items {
		nc := &claims.Items[i]
		if name := nc.Annotations[awsv1.LaunchTemplateAnnotationKey]; name != "" {
			inUse.names[name] = true
		}
		if nc.Status.ProviderID == "" && nc.Spec.NodeClassRef != nil {
			inUse.launching[[2]string{nc.Labels[karpv1.NodePoolLabelKey], nc.Spec.NodeClassRef.Name}] = true
		}
	}
	return inUse, nil
}

// has reports whether a NodeClaim references the template with this name and tags.
func (u templatesInUse) has(name string, tags []ec2types.Tag) bool {
	if u.names[name] {
		return true
	}
	var pool, class string
	for _, t := range tags {
		switch aws.ToString(t.Key) {
		case tagNodePool:
			pool = aws.ToString(t.Value)
		case tagNodeClass:
			class = aws.ToString(t.Value)
		}
	}
	return u.launching[[2]string{pool, class}]
}
