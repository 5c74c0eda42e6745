package aws

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"k8s.io/klog/v2"
)

// windowsLicensePerVCPUHour is what a Windows Server license adds to an instance's hourly
// price, per vCPU, on demand and on spot: the difference between AWS's Windows (license
// included) and Linux on-demand prices, e.g. m5.large in us-east-1 at $0.188 against $0.096.
// It is a derived figure, used only where AWS's own Windows prices cannot be read (isolated
// VPC, the embedded catalog, a failed read).
const windowsLicensePerVCPUHour = 0.046

// spotProductWindows is the DescribeSpotPriceHistory product description of Windows.
const spotProductWindows = "Windows"

// Keys of the Windows price reads in Provider.refreshFailures.
const (
	failureWindowsOnDemand = "windows-" + kindOnDemand
	failureWindowsSpot     = "windows-" + kindSpot
)

// windowsPriceCache holds the prices of Windows instances, read only once a Windows node
// class plans, so that Linux-only clusters make no extra calls.
type windowsPriceCache struct {
	// readMu is held while prices are read from AWS.
	readMu sync.Mutex

	mu       sync.Mutex
	onDemand cached[map[string]float64]
	spot     cached[map[string]map[string]float64]
	// derivedOnDemand and derivedSpot are set while the prices in use were derived from
	// Linux prices because AWS failed; they are read again, as stale ones are, once the
	// wait after the failure has passed.
	derivedOnDemand, derivedSpot bool
	refreshing                   bool
}

// windowsPriceBook returns the prices of Windows instances: the first call reads them from
// AWS (one attempt within firstPriceReadTimeout for on-demand prices, as for Linux), later
// calls return them at once and refresh what is due in the background. Prices AWS cannot
// give are derived from the Linux ones (deriveWindowsPrices).
func (p *Provider) windowsPriceBook(ctx context.Context, linux *priceBook, entries map[string]*catalogEntry) *priceBook {
	w := &p.windows
	if book, ok := p.cachedWindowsPrices(ctx, linux, entries); ok {
		return book
	}
	w.readMu.Lock()
	defer w.readMu.Unlock()
	if book, ok := p.cachedWindowsPrices(ctx, linux, entries); ok {
		return book
	}
	p.readWindowsPricesLocked(ctx, linux, entries, true)
	if book, ok := p.cachedWindowsPrices(ctx, linux, entries); ok {
		return book
	}
	return deriveWindowsPrices(linux, catalogVCPUs(entries))
}

// cachedWindowsPrices returns the cached Windows prices, starting a background refresh when
// some are due; false before the first read.
func (p *Provider) cachedWindowsPrices(ctx context.Context, linux *priceBook, entries map[string]*catalogEntry) (*priceBook, bool) {
	w := &p.windows
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.onDemand.valid || !w.spot.valid {
		return nil, false
	}
	if onDemand, spot := p.windowsDueLocked(p.clock.Now()); (onDemand || spot) && !w.refreshing {
		w.refreshing = true
		go func() {
			w.readMu.Lock()
			defer w.readMu.Unlock()
			p.readWindowsPricesLocked(context.WithoutCancel(ctx), linux, entries, false)
		}()
	}
	return &priceBook{onDemand: w.onDemand.value, spot: w.spot.value}, true
}

// windowsDueLocked reports which kinds of Windows prices are to be read: those older than
// their TTL and those derived after a failure, either not before the wait after a failed
// read has passed. In an isolated VPC on-demand prices are derived by design and follow
// their TTL only. w.mu must be held.
func (p *Provider) windowsDueLocked(now time.Time) (onDemand, spot bool) {
	w := &p.windows
	due := func(key string, fresh, derived bool) bool {
		return (!fresh || derived) && p.refreshFailures.Wait(key, "") == 0
	}
	onDemand = due(failureWindowsOnDemand, w.onDemand.fresh(now, p.opts.CatalogTTL), w.derivedOnDemand && !p.opts.IsolatedVPC)
	spot = due(failureWindowsSpot, w.spot.fresh(now, p.opts.SpotPriceTTL), w.derivedSpot)
	return onDemand, spot
}

// readWindowsPricesLocked reads the due Windows prices from AWS: on-demand from the Pricing
// API (operatingSystem Windows, license included), spot from DescribeSpotPriceHistory
// (product Windows). A failed read keeps the prices cached, or before the first success
// derives them from the Linux prices, and is not retried before the failure's wait; in an
// isolated VPC on-demand prices are derived from the start. w.readMu must be held.
func (p *Provider) readWindowsPricesLocked(ctx context.Context, linux *priceBook, entries map[string]*catalogEntry, first bool) {
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
	derived := deriveWindowsPrices(linux, catalogVCPUs(entries))
	logger := klog.FromContext(ctx)
	// store records a read of one kind: on success, or on failure with nothing cached yet,
	// set stores the prices (derived ones when fallback is true).
	store := func(kind, key string, err error, valid bool, set func(fallback bool)) {
		if err != nil {
			wait := p.refreshFailures.Failed(key, "")
			logger.Error(err, "Failed to read Windows prices from AWS", "kind", kind, "derivedFromLinux", !valid, "retryIn", wait.String())
		} else {
			p.refreshFailures.Forget(key)
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if err == nil || !valid {
			set(err != nil)
		}
	}
	if needOnDemand && p.opts.IsolatedVPC {
		w.mu.Lock()
		w.onDemand = cached[map[string]float64]{value: derived.onDemand, at: now, valid: true}
		w.derivedOnDemand = true
		w.mu.Unlock()
	} else if needOnDemand {
		prices, err := p.readWindowsOnDemandPrices(ctx, first)
		store(kindOnDemand, failureWindowsOnDemand, err, w.onDemandValid(), func(fallback bool) {
			if fallback {
				prices = derived.onDemand
			}
			w.onDemand = cached[map[string]float64]{value: prices, at: now, valid: true}
			w.derivedOnDemand = fallback
		})
	}
	if needSpot {
		attempts := backgroundReadAttempts
		if first {
			attempts = 0
		}
		prices, err := describeSpotPrices(ctx, p.ec2, now, attempts, spotProductWindows)
		store(kindSpot, failureWindowsSpot, err, w.spotValid(), func(fallback bool) {
			if fallback {
				prices = derived.spot
			}
			w.spot = cached[map[string]map[string]float64]{value: prices, at: now, valid: true}
			w.derivedSpot = fallback
		})
	}
}

func (w *windowsPriceCache) onDemandValid() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.onDemand.valid
}

func (w *windowsPriceCache) spotValid() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.spot.valid
}

// readWindowsOnDemandPrices reads the Windows Server, license-included, shared-tenancy
// on-demand prices of the region, with the attempts and timeout readOnDemandPrices uses.
func (p *Provider) readWindowsOnDemandPrices(ctx context.Context, first bool) (map[string]float64, error) {
	attempts := backgroundReadAttempts
	if first {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, firstPriceReadTimeout)
		defer cancel()
		attempts = 1
	}
	return getOnDemandPrices(ctx, p.pricing, attempts,
		termMatch("regionCode", p.opts.Region),
		termMatch("operatingSystem", "Windows"),
		termMatch("licenseModel", "License included"),
		termMatch("tenancy", "Shared"),
		termMatch("preInstalledSw", "NA"),
		termMatch("capacitystatus", "Used"),
		termMatch("marketoption", "OnDemand"),
	)
}

// deriveWindowsPrices adds the Windows license (windowsLicensePerVCPUHour per vCPU) to Linux
// prices, on demand and on spot, rounded to the millionth of a dollar spot prices are given in.
func deriveWindowsPrices(linux *priceBook, vcpus map[string]int64) *priceBook {
	license := func(name string) float64 { return float64(vcpus[name]) * windowsLicensePerVCPUHour }
	round := func(v float64) float64 { return math.Round(v*1e6) / 1e6 }
	out := &priceBook{onDemand: map[string]float64{}, spot: map[string]map[string]float64{}}
	for name, price := range linux.onDemand {
		if _, ok := vcpus[name]; ok {
			out.onDemand[name] = round(price + license(name))
		}
	}
	for name, zones := range linux.spot {
		if _, ok := vcpus[name]; !ok {
			continue
		}
		out.spot[name] = map[string]float64{}
		for zone, price := range zones {
			out.spot[name][zone] = round(price + license(name))
		}
	}
	return out
}

// catalogVCPUs is the vCPU count of each instance type of the catalog.
func catalogVCPUs(entries map[string]*catalogEntry) map[string]int64 {
	out := make(map[string]int64, len(entries))
	for name, e := range entries {
		out[name] = int64(aws.ToInt32(e.info.VCpuInfo.DefaultVCpus))
	}
	return out
}
