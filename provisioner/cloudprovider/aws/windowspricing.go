package aws

import (
	"context"
	"math"
	"sync"

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

// windowsPriceCache holds the prices of Windows instances, read only once a Windows node
// class plans, so that Linux-only clusters make no extra calls.
type windowsPriceCache struct {
	// readMu is held while prices are read from AWS.
	readMu sync.Mutex

	mu         sync.Mutex
	onDemand   cached[map[string]float64]
	spot       cached[map[string]map[string]float64]
	refreshing bool
}

// windowsPriceBook returns the prices of Windows instances: the first call reads them from
// AWS (one attempt within firstPriceReadTimeout for on-demand prices, as for Linux), later
// calls return them at once and refresh what is stale in the background. Prices AWS cannot
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
	book, _ := p.cachedWindowsPrices(ctx, linux, entries)
	return book
}

// cachedWindowsPrices returns the cached Windows prices, starting a background refresh when
// they are stale; false before the first read.
func (p *Provider) cachedWindowsPrices(ctx context.Context, linux *priceBook, entries map[string]*catalogEntry) (*priceBook, bool) {
	w := &p.windows
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.onDemand.valid || !w.spot.valid {
		return nil, false
	}
	now := p.clock.Now()
	if (!w.onDemand.fresh(now, p.opts.CatalogTTL) || !w.spot.fresh(now, p.opts.SpotPriceTTL)) && !w.refreshing {
		w.refreshing = true
		go func() {
			w.readMu.Lock()
			defer w.readMu.Unlock()
			p.readWindowsPricesLocked(context.WithoutCancel(ctx), linux, entries, false)
		}()
	}
	return &priceBook{onDemand: w.onDemand.value, spot: w.spot.value}, true
}

// readWindowsPricesLocked reads the stale Windows prices from AWS: on-demand from the
// Pricing API (operatingSystem Windows, license included), spot from
// DescribeSpotPriceHistory (product Windows). A failed read keeps the prices cached, or
// before the first success derives them from the Linux prices; in an isolated VPC on-demand
// prices are derived from the start. w.readMu must be held.
func (p *Provider) readWindowsPricesLocked(ctx context.Context, linux *priceBook, entries map[string]*catalogEntry, first bool) {
	w := &p.windows
	now := p.clock.Now()
	w.mu.Lock()
	needOnDemand, needSpot := !w.onDemand.fresh(now, p.opts.CatalogTTL), !w.spot.fresh(now, p.opts.SpotPriceTTL)
	w.mu.Unlock()
	derived := deriveWindowsPrices(linux, catalogVCPUs(entries))
	logger := klog.FromContext(ctx)
	store := func(kind string, err error, set func(fallback bool)) {
		w.mu.Lock()
		defer w.mu.Unlock()
		valid := w.onDemand.valid
		if kind == kindSpot {
			valid = w.spot.valid
		}
		if err != nil {
			logger.Error(err, "Failed to read Windows prices from AWS", "kind", kind, "derivedFromLinux", !valid)
			if valid {
				return
			}
		}
		set(err != nil)
	}
	if needOnDemand {
		var prices map[string]float64
		var err error
		if !p.opts.IsolatedVPC {
			prices, err = p.readWindowsOnDemandPrices(ctx, first)
		}
		store(kindOnDemand, err, func(fallback bool) {
			if fallback || p.opts.IsolatedVPC {
				prices = derived.onDemand
			}
			w.onDemand = cached[map[string]float64]{value: prices, at: now, valid: true}
		})
	}
	if needSpot {
		attempts := backgroundReadAttempts
		if first {
			attempts = 0
		}
		prices, err := describeSpotPrices(ctx, p.ec2, now, attempts, spotProductWindows)
		store(kindSpot, err, func(fallback bool) {
			if fallback {
				prices = derived.spot
			}
			w.spot = cached[map[string]map[string]float64]{value: prices, at: now, valid: true}
		})
	}
	w.mu.Lock()
	w.refreshing = false
	w.mu.Unlock()
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
