package pricing

import (
	"context"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/expiring"
)

// spotProductWindows is the DescribeSpotPriceHistory product description of Windows.
const spotProductWindows = "Windows"

// Keys of the Windows price reads in Provider.failures.
const (
	FailureWindowsOnDemand = "windows-" + KindOnDemand
	FailureWindowsSpot     = "windows-" + KindSpot
)

// windowsPriceCache holds the prices of Windows instances, read only once a Windows node
// class plans, so that Linux-only clusters make no extra calls.
type windowsPriceCache struct {
	// readMu is held while prices are read from AWS.
	readMu sync.Mutex

	mu       sync.Mutex
	onDemand expiring.Value[map[string]float64]
	spot     expiring.Value[map[string]map[string]float64]
	// derivedOnDemand and derivedSpot are set while the prices in use were derived from
	// Linux prices because AWS failed; they are read again, as stale ones are, once the
	// wait after the failure has passed.
	derivedOnDemand, derivedSpot bool
	refreshing                   bool
}

// Windows returns the prices of Windows instances: the first call reads them from
// AWS (one attempt within firstReadTimeout for on-demand prices, as for Linux), later
// calls return them at once and refresh what is due in the background. Prices AWS cannot
// give are derived from the Linux ones (DeriveWindows); vcpus are the vCPUs of each instance type.
func (p *Provider) Windows(ctx context.Context, linux *Book, vcpus map[string]int64) *Book {
	w := &p.windows
	if book, ok := p.cachedWindowsPrices(ctx, linux, vcpus); ok {
		return book
	}
	w.readMu.Lock()
	defer w.readMu.Unlock()
	if book, ok := p.cachedWindowsPrices(ctx, linux, vcpus); ok {
		return book
	}
	p.readWindowsPricesLocked(ctx, linux, vcpus, true)
	if book, ok := p.cachedWindowsPrices(ctx, linux, vcpus); ok {
		return book
	}
	return DeriveWindows(linux, vcpus)
}

// cachedWindowsPrices returns the cached Windows prices, starting a background refresh when
// some are due; false before the first read.
func (p *Provider) cachedWindowsPrices(ctx context.Context, linux *Book, vcpus map[string]int64) (*Book, bool) {
	w := &p.windows
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.onDemand.Valid || !w.spot.Valid {
		return nil, false
	}
	if onDemand, spot := p.windowsDueLocked(p.clock.Now()); (onDemand || spot) && !w.refreshing {
		w.refreshing = true
		go func() {
			w.readMu.Lock()
			defer w.readMu.Unlock()
			p.readWindowsPricesLocked(context.WithoutCancel(ctx), linux, vcpus, false)
		}()
	}
	return &Book{OnDemand: w.onDemand.Value, Spot: w.spot.Value}, true
}

// windowsDueLocked reports which kinds of Windows prices are to be read: those older than
// their TTL and those derived after a failure, either not before the wait after a failed
// read has passed. In an isolated VPC on-demand prices are derived by design and follow
// their TTL only. w.mu must be held.
func (p *Provider) windowsDueLocked(now time.Time) (onDemand, spot bool) {
	w := &p.windows
	due := func(key string, fresh, derived bool) bool {
		return (!fresh || derived) && p.failures.Wait(key, "") == 0
	}
	onDemand = due(FailureWindowsOnDemand, w.onDemand.Fresh(now, p.opts.OnDemandTTL), w.derivedOnDemand && !p.opts.IsolatedVPC)
	spot = due(FailureWindowsSpot, w.spot.Fresh(now, p.opts.SpotTTL), w.derivedSpot)
	return onDemand, spot
}

// readWindowsPricesLocked reads the due Windows prices from AWS: on-demand from the Pricing
// API (operatingSystem Windows, license included), spot from DescribeSpotPriceHistory
// (product Windows). A failed read keeps the prices cached, or before the first success
// derives them from the Linux prices, and is not retried before the failure's wait; in an
// isolated VPC on-demand prices are derived from the start. w.readMu must be held.
func (p *Provider) readWindowsPricesLocked(ctx context.Context, linux *Book, vcpus map[string]int64, first bool) {
	w := &p.windows
	now := p.clock.Now()
	w.mu.Lock()
	needOnDemand, needSpot := p.windowsDueLocked(now)
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.refreshing = false
		w.mu.Unlock()
	}()
	derived := DeriveWindows(linux, vcpus)
	logger := klog.FromContext(ctx)
	// store records a read of one kind: on success, or on failure with nothing cached yet,
	// set stores the prices (derived ones when fallback is true).
	store := func(kind, key string, err error, valid bool, set func(fallback bool)) {
		if err != nil {
			wait := p.failures.Failed(key, "")
			logger.Error(err, "failed to read Windows prices from AWS", "kind", kind, "derivedFromLinux", !valid, "retryIn", wait.String())
		} else {
			p.failures.Forget(key)
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if err == nil || !valid {
			set(err != nil)
		}
	}
	if needOnDemand && p.opts.IsolatedVPC {
		w.mu.Lock()
		w.onDemand = expiring.Of(derived.OnDemand, now)
		w.derivedOnDemand = true
		w.mu.Unlock()
	} else if needOnDemand {
		prices, err := p.readWindowsOnDemandPrices(ctx, first)
		store(KindOnDemand, FailureWindowsOnDemand, err, w.onDemandValid(), func(fallback bool) {
			if fallback {
				prices = derived.OnDemand
			}
			w.onDemand = expiring.Of(prices, now)
			w.derivedOnDemand = fallback
		})
	}
	if needSpot {
		prices, err := describeSpotPrices(ctx, p.ec2, now, spotAttempts(first), spotProductWindows)
		store(KindSpot, FailureWindowsSpot, err, w.spotValid(), func(fallback bool) {
			if fallback {
				prices = derived.Spot
			}
			w.spot = expiring.Of(prices, now)
			w.derivedSpot = fallback
		})
	}
}

func (w *windowsPriceCache) onDemandValid() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.onDemand.Valid
}

func (w *windowsPriceCache) spotValid() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.spot.Valid
}

// readWindowsOnDemandPrices reads the Windows Server, license-included, shared-tenancy
// on-demand prices of the region, with the attempts and timeout readOnDemandPrices uses.
func (p *Provider) readWindowsOnDemandPrices(ctx context.Context, first bool) (map[string]float64, error) {
	return boundedRead(ctx, first, func(ctx context.Context, attempts int) (map[string]float64, error) {
		return getOnDemandPrices(ctx, p.pricing, attempts,
			termMatch("regionCode", p.opts.Region),
			termMatch("operatingSystem", "Windows"),
			termMatch("licenseModel", "License included"),
			termMatch("tenancy", "Shared"),
			termMatch("preInstalledSw", "NA"),
			termMatch("capacitystatus", "Used"),
			termMatch("marketoption", "OnDemand"),
		)
	})
}
