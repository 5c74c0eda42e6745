package cloudprovider

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// APIPrice is the parts as a NodeClaim's or NodePool's status.price: decimal strings rounded
// to a millionth of a dollar, zero parts left out.
func (p PriceParts) APIPrice() *karpv1.Price {
	format := func(v float64) string {
		return strconv.FormatFloat(math.Round(v*1e6)/1e6, 'f', -1, 64)
	}
	part := func(v float64) string {
		if math.Round(v*1e6) == 0 {
			return ""
		}
		return format(v)
	}
	return &karpv1.Price{
		PerHour: format(p.Total()), Instance: part(p.Instance), Volumes: part(p.Volumes),
		PublicIPv4: part(p.PublicIPv4), Monitoring: part(p.Monitoring), DaemonSets: part(p.DaemonSets),
	}
}

// PartsOf reads a status.price back into its parts.
func PartsOf(price *karpv1.Price) (PriceParts, error) {
	var out PriceParts
	for _, f := range []struct {
		name  string
		value string
		to    *float64
	}{
		{"instance", price.Instance, &out.Instance}, {"volumes", price.Volumes, &out.Volumes},
		{"publicIPv4", price.PublicIPv4, &out.PublicIPv4}, {"monitoring", price.Monitoring, &out.Monitoring},
		{"daemonSets", price.DaemonSets, &out.DaemonSets},
	} {
		if f.value == "" {
			continue
		}
		v, err := strconv.ParseFloat(f.value, 64)
		if err != nil {
			return PriceParts{}, fmt.Errorf("price.%s %q: %w", f.name, f.value, err)
		}
		*f.to = v
	}
	return out, nil
}

// NodeClaimPrice is what the NodeClaim's node costs per hour: its status.price once
// launched, its planned price (PlannedPriceAnnotationKey) until then; false when it has
// neither, or they cannot be read.
func NodeClaimPrice(nc *karpv1.NodeClaim) (PriceParts, bool) {
	if nc.Status.Price != nil {
		parts, err := PartsOf(nc.Status.Price)
		return parts, err == nil
	}
	return PlannedPrice(nc)
}

// PlannedPrice is the price the NodeClaim was planned at (PlannedPriceAnnotationKey); false
// without one that can be read.
func PlannedPrice(nc *karpv1.NodeClaim) (PriceParts, bool) {
	value, ok := nc.Annotations[PlannedPriceAnnotationKey]
	if !ok {
		return PriceParts{}, false
	}
	var parts PriceParts
	if err := json.Unmarshal([]byte(value), &parts); err != nil {
		return PriceParts{}, false
	}
	return parts, true
}

// WithDaemonSetShare splits the instance part as the planned parts split theirs: the
// DaemonSet pods' share of the instance is a property of the node's size, which a launch of
// another instance type of the plan changes little.
func (p PriceParts) WithDaemonSetShare(planned PriceParts) PriceParts {
	instance := p.Instance + p.DaemonSets
	share := 0.0
	if whole := planned.Instance + planned.DaemonSets; whole > 0 {
		share = planned.DaemonSets / whole
	}
	return NewPriceParts(instance, p.NodeCosts(), share)
}

// NodeCosts are the parts the node pays besides its instance.
func (p PriceParts) NodeCosts() NodeCosts {
	return NodeCosts{Volumes: p.Volumes, PublicIPv4: p.PublicIPv4, Monitoring: p.Monitoring}
}

// Plus adds the parts of two prices.
func (p PriceParts) Plus(o PriceParts) PriceParts {
	return PriceParts{Instance: p.Instance + o.Instance, Volumes: p.Volumes + o.Volumes, PublicIPv4: p.PublicIPv4 + o.PublicIPv4,
		Monitoring: p.Monitoring + o.Monitoring, DaemonSets: p.DaemonSets + o.DaemonSets}
}
