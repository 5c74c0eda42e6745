package nodecost

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
)

// Price list usage types Read looks for. Outside us-east-1 they carry a region prefix
// ("USE2-EBS:VolumeUsage.gp3"), so they are matched from their first known part on.
const (
	usageVolume     = "EBS:VolumeUsage"
	usageIops       = "EBS:VolumeP-IOPS."
	usageThroughput = "EBS:VolumeP-Throughput."
	usagePublicIPv4 = "PublicIPv4:InUseAddress"
)

// Price list service codes: EBS is sold under EC2, public IPv4 addresses under VPC.
const (
	serviceEC2 = "AmazonEC2"
	serviceVPC = "AmazonVPC"
)

// Read returns fallback with the prices the Pricing API has for the region: each EBS volume
// type's storage, gp3's IOPS and throughput above the free baseline, io1's IOPS, and the
// hourly price of a public IPv4 address. What the API does not list (io2's IOPS tiers,
// detailed monitoring, the default block device mappings) stays as fallback has it. Each
// request is made at most attempts times (0: the client's retryer decides).
func Read(ctx context.Context, client *pricing.Client, region string, fallback *Table, attempts int) (*Table, error) {
	out := fallback.clone()
	out.Region = region
	volumes, err := products(ctx, client, attempts, serviceEC2, region, "EBS:Volume")
	if err != nil {
		return nil, fmt.Errorf("getting EBS prices: %w", err)
	}
	for _, p := range volumes {
		_, usage, ok := strings.Cut(p.usageType, "EBS:")
		if !ok {
			continue
		}
		usage = "EBS:" + usage
		switch {
		case usage == usageVolume:
			out.setVolume("standard", func(v *VolumePrices) { v.PerGiBMonth = p.price })
		case strings.HasPrefix(usage, usageVolume+"."):
			out.setVolume(p.volumeType, func(v *VolumePrices) { v.PerGiBMonth = p.price })
		case strings.HasPrefix(usage, usageIops) && p.volumeType == VolumeTypeGP3:
			out.setVolume(VolumeTypeGP3, func(v *VolumePrices) { v.PerIopsMonthAboveFree = p.price })
		case strings.HasPrefix(usage, usageIops) && p.volumeType == VolumeTypeIO1:
			out.setVolume(VolumeTypeIO1, func(v *VolumePrices) { v.PerIopsMonth = p.price })
		case strings.HasPrefix(usage, usageThroughput) && p.volumeType == VolumeTypeGP3:
			out.setVolume(VolumeTypeGP3, func(v *VolumePrices) { v.PerMiBpsMonthAboveFree = p.price })
		}
	}
	addresses, err := products(ctx, client, attempts, serviceVPC, region, usagePublicIPv4)
	if err != nil {
		return nil, fmt.Errorf("getting public IPv4 prices: %w", err)
	}
	for _, p := range addresses {
		out.PublicIPv4.PerHour = p.price
	}
	return out, nil
}

// setVolume changes the prices of a volume type, keeping those the change leaves alone.
func (t *Table) setVolume(volumeType string, set func(*VolumePrices)) {
	if volumeType == "" {
		return
	}
	v := t.EBS[volumeType]
	set(&v)
	t.EBS[volumeType] = v
}

// listedPrice is a price list product as Read uses it.
type listedPrice struct {
	usageType  string
	volumeType string
	price      float64
}

// products lists the region's products of a service whose usage type contains usage, with
// their first positive USD price (the first tier, for tiered prices).
func products(ctx context.Context, client *pricing.Client, attempts int, service, region, usage string) ([]listedPrice, error) {
	pages := pricing.NewGetProductsPaginator(client, &pricing.GetProductsInput{
		ServiceCode: aws.String(service),
		Filters: []pricingtypes.Filter{
			{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String("regionCode"), Value: aws.String(region)},
			{Type: pricingtypes.FilterTypeContains, Field: aws.String("usagetype"), Value: aws.String(usage)},
		},
		MaxResults: aws.Int32(100),
	})
	var out []listedPrice
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx, func(o *pricing.Options) { o.RetryMaxAttempts = attempts })
		if err != nil {
			return nil, err
		}
		for _, doc := range page.PriceList {
			p, ok, err := parseProduct(doc)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// productDocument is the part of a price list product document Read uses.
type productDocument struct {
	Product struct {
		Attributes struct {
			UsageType     string `json:"usagetype"`
			VolumeAPIName string `json:"volumeApiName"`
		} `json:"attributes"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				BeginRange   string            `json:"beginRange"`
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

// UsablePrice reports whether price is one the planner can compare: finite, not negative.
// NaN and infinities would compare false, or win, against every other price.
func UsablePrice(price float64) bool {
	return !math.IsNaN(price) && !math.IsInf(price, 0) && price >= 0
}

// ParsePrice reads a price list's or EC2's price in dollars, a UsablePrice: ParseFloat
// alone takes "NaN" and "Inf".
func ParsePrice(s string) (float64, error) {
	price, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("price %q is not a number", s)
	}
	if !UsablePrice(price) {
		return 0, fmt.Errorf("price %q is not a finite amount of dollars", s)
	}
	return price, nil
}

func parseProduct(doc string) (listedPrice, bool, error) {
	var d productDocument
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return listedPrice{}, false, fmt.Errorf("decoding price list document: %w", err)
	}
	attrs := d.Product.Attributes
	for _, term := range d.Terms.OnDemand {
		for _, dim := range term.PriceDimensions {
			usd, ok := dim.PricePerUnit["USD"]
			if !ok || (dim.BeginRange != "" && dim.BeginRange != "0") {
				continue
			}
			price, err := ParsePrice(usd)
			if err != nil {
				return listedPrice{}, false, fmt.Errorf("parsing pricePerUnit.USD of %s: %w", attrs.UsageType, err)
			}
			if price > 0 {
				return listedPrice{usageType: attrs.UsageType, volumeType: attrs.VolumeAPIName, price: price}, true, nil
			}
		}
	}
	return listedPrice{}, false, nil
}
