package instancetype

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/tailor-autoscaler/tailor/provisioner/backoff"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/expiring"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/pricing"
)

// FailureCatalog is the key of the catalog's reads in the failures given to NewCatalog.
const FailureCatalog = "instance-types"

// errNotRead is the error while the catalog and prices were never read.
var errNotRead = errors.New("the instance catalog and prices are not read yet")

// Catalog holds the instance types of the region as EC2 describes them and their prices,
// and reads them again when they are due.
type Catalog struct {
	ec2    *ec2.Client
	prices *pricing.Provider
	clock  clock.Clock
	ttl    time.Duration
	// failures space out the reads of the catalog and prices that fail, by FailureCatalog
	// and the kinds of prices.
	failures *backoff.Failures

	mu      sync.Mutex
	entries expiring.Value[map[string]*Entry]
	// err is why the catalog could not be read, while it never was.
	err error
	// refreshing is set while a background refresh of the catalog and prices runs.
	refreshing bool
	// refreshMu is held while the catalog and prices are read from AWS, so that callers
	// that find nothing cached wait for one read rather than each making their own.
	refreshMu sync.Mutex
}

// NewCatalog returns a catalog read from EC2 and reused for ttl, with the prices of prices.
func NewCatalog(client *ec2.Client, prices *pricing.Provider, clk clock.Clock, ttl time.Duration, failures *backoff.Failures) *Catalog {
	return &Catalog{ec2: client, prices: prices, clock: clk, ttl: ttl, failures: failures}
}

// Prices returns the provider of the catalog's prices.
func (c *Catalog) Prices() *pricing.Provider { return c.prices }

// Get returns the instance catalog and current prices. Only the first call waits for AWS,
// and for on-demand prices at most one attempt of each request within a timeout; later ones
// return what is cached at once and refresh what is stale in the background, so planning
// never waits on the Pricing or EC2 APIs. A catalog that could not be read returns the same
// error until the wait after the failure has passed.
func (c *Catalog) Get(ctx context.Context) (map[string]*Entry, *pricing.Book, error) {
	c.mu.Lock()
	ready := c.readyLocked()
	if ready {
		defer c.mu.Unlock()
		if c.staleLocked(c.clock.Now()) && !c.refreshing {
			c.refreshing = true
			go func() {
				c.refreshMu.Lock()
				defer c.refreshMu.Unlock()
				_ = c.refreshLocked(context.WithoutCancel(ctx))
			}()
		}
		return c.entries.Value, c.prices.Book(), nil
	}
	c.mu.Unlock()
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	c.mu.Lock()
	ready = c.readyLocked()
	lastErr := c.err
	c.mu.Unlock()
	if !ready {
		if lastErr != nil && c.failures.Wait(FailureCatalog, "") > 0 {
			return nil, nil, lastErr
		}
		if err := c.refreshLocked(ctx); err != nil {
			return nil, nil, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.readyLocked() {
		return nil, nil, errNotRead
	}
	return c.entries.Value, c.prices.Book(), nil
}

// readyLocked reports whether the catalog and prices can be planned with. c.mu must be held.
func (c *Catalog) readyLocked() bool {
	return c.entries.Valid && c.prices.Ready()
}

// Ready is a readiness check (healthz.Checker): it fails until the instance catalog and
// prices can be planned with, so a replica is not reported ready before it could plan.
// Load reads them on every replica.
func (c *Catalog) Ready(*http.Request) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.readyLocked() {
		return errNotRead
	}
	return nil
}

// Load reads the instance catalog and prices until they can be planned with or ctx ends,
// waiting after each failure as long as the failure's wait; it returns nil either way. Run
// on every replica, it makes Ready true without waiting for leadership.
func (c *Catalog) Load(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("aws")
	for {
		_, _, err := c.Get(ctx)
		if err == nil {
			return nil
		}
		wait := max(c.failures.Wait(FailureCatalog, ""), time.Second)
		logger.Error(err, "failed to read the instance catalog", "retryIn", wait.String())
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(wait):
		}
	}
}

// staleLocked reports whether a part of the catalog or prices is due for a refresh. c.mu
// must be held.
func (c *Catalog) staleLocked(now time.Time) bool {
	entries := c.dueLocked(now)
	onDemand, spot := c.prices.Due(now)
	return entries || onDemand || spot
}

// dueLocked reports whether the catalog is to be read again: when older than its TTL, not
// before the wait after a failed read has passed. c.mu must be held.
func (c *Catalog) dueLocked(now time.Time) bool {
	return !c.entries.Fresh(now, c.ttl) && c.failures.Wait(FailureCatalog, "") == 0
}

// refreshLocked reads what is stale of the catalog and prices from AWS, without holding c.mu
// during the calls. Prices that AWS cannot give fall back to the embedded catalog's; the
// catalog itself has no fallback. c.refreshMu must be held.
func (c *Catalog) refreshLocked(ctx context.Context) error {
	now := c.clock.Now()
	c.mu.Lock()
	needEntries := c.dueLocked(now)
	c.mu.Unlock()
	needOnDemand, needSpot := c.prices.Due(now)
	defer func() {
		c.mu.Lock()
		c.refreshing = false
		c.mu.Unlock()
	}()
	var errs []error
	if needEntries {
		entries, err := Describe(ctx, c.ec2)
		c.mu.Lock()
		if err == nil {
			c.entries = expiring.Of(entries, now)
			c.err = nil
			pricing.Refreshed(FailureCatalog)
		} else if !c.entries.Valid {
			c.err = err
			errs = append(errs, err)
		}
		c.mu.Unlock()
		if err != nil {
			wait := c.failures.Failed(FailureCatalog, "")
			klog.FromContext(ctx).Error(err, "failed to refresh the instance catalog", "retryIn", wait.String())
		} else {
			c.failures.Forget(FailureCatalog)
		}
	}
	c.prices.Refresh(ctx, now, needOnDemand, needSpot)
	return errors.Join(errs...)
}

// VCPUs is the vCPU count of each instance type of the catalog.
func VCPUs(entries map[string]*Entry) map[string]int64 {
	out := make(map[string]int64, len(entries))
	for name, e := range entries {
		out[name] = int64(aws.ToInt32(e.Info.VCpuInfo.DefaultVCpus))
	}
	return out
}

// Refreshing reports whether a background refresh of the catalog and prices runs.
func (c *Catalog) Refreshing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refreshing
}
