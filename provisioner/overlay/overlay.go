// Package overlay applies NodeOverlays (karpenter.sh/v1alpha1) to the instance types a cloud
// provider returns: the price of the offerings they select and the extended resources of the
// instance types. Everything that plans or prices capacity reads instance types through
// Provider, so planning, consolidation, simulate and the live view see the same figures.
package overlay

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1alpha1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/requirements"
)

// FieldPrice names the price in a Conflict; capacity conflicts name their resource.
const FieldPrice = "price"

// Result is what Apply made of a NodePool's instance types.
type Result struct {
	// InstanceTypes are the instance types with the overlays applied. A type no overlay
	// changed is the caller's own; a changed one is a copy, so a provider's cache is never
	// altered.
	InstanceTypes []*cloudprovider.InstanceType
	// Conflicts are pairs of overlays of the same weight that set different values for one
	// offering, sorted.
	Conflicts []Conflict
	// Clamped are the offerings whose adjusted price fell below 0 and was raised to 0, sorted.
	Clamped []Clamp
}

// Conflict is two overlays of the same weight that disagree on one offering. Overlay sorts
// before Other by name and wins.
type Conflict struct {
	Overlay, Other string
	// Field is FieldPrice or the resource name they set differently.
	Field string
	// InstanceType, Zone and CapacityType are the first offering they disagree on.
	InstanceType, Zone, CapacityType string
}

// Clamp is an offering whose price an overlay would have made negative.
type Clamp struct {
	Overlay                          string
	InstanceType, Zone, CapacityType string
}

// rule is a NodeOverlay parsed for application.
type rule struct {
	name     string
	weight   int32
	reqs     []karpv1.NodeSelectorRequirementWithMinValues
	price    *priceRule
	capacity corev1.ResourceList
}

// priceRule is spec.price or spec.priceAdjustment.
type priceRule struct {
	absolute bool
	percent  bool
	amount   float64
}

// apply returns the price the rule makes of price.
func (r priceRule) apply(price float64) float64 {
	switch {
	case r.absolute:
		return r.amount
	case r.percent:
		return price * (1 + r.amount/100)
	default:
		return price + r.amount
	}
}

// wellKnownResources come from the instance type; an overlay cannot set them.
var wellKnownResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage}

// Validate returns what is wrong with an overlay's spec, each problem naming its field and
// the fix; nil when it can be applied. The CRD schema refuses most of these already; this
// catches the rest and objects that never went through an API server (simulate's files).
func Validate(o *v1alpha1.NodeOverlay) error {
	_, err := parse(o)
	return err
}

func parse(o *v1alpha1.NodeOverlay) (rule, error) {
	r := rule{name: o.Name, weight: o.WeightOrZero(), capacity: o.Spec.Capacity}
	var problems []string
	if o.Spec.Price != nil && o.Spec.PriceAdjustment != nil {
		problems = append(problems, "spec.price and spec.priceAdjustment are both set: keep one")
	}
	if o.Spec.Price != nil {
		v, err := strconv.ParseFloat(*o.Spec.Price, 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			problems = append(problems, fmt.Sprintf("spec.price %q is not a price: write USD an hour such as \"0.0415\"", *o.Spec.Price))
		} else {
			r.price = &priceRule{absolute: true, amount: v}
		}
	}
	if o.Spec.PriceAdjustment != nil {
		p, err := parseAdjustment(*o.Spec.PriceAdjustment)
		if err != nil {
			problems = append(problems, err.Error())
		} else {
			r.price = &p
		}
	}
	for _, name := range wellKnownResources {
		if _, ok := o.Spec.Capacity[name]; ok {
			problems = append(problems, fmt.Sprintf("spec.capacity sets %s, which comes from the instance type: set only extended resources such as example.com/device", name))
		}
	}
	for name, q := range o.Spec.Capacity {
		if q.Sign() < 0 {
			problems = append(problems, fmt.Sprintf("spec.capacity %s is negative (%s): write an amount of 0 or more", name, q.String()))
		}
	}
	for i, req := range o.Spec.Requirements {
		field := fmt.Sprintf("spec.requirements[%d]", i)
		switch req.Operator {
		case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
			if len(req.Values) == 0 {
				problems = append(problems, fmt.Sprintf("%s (%s %s) has no values: add values or use Exists", field, req.Key, req.Operator))
			}
		case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
			if len(req.Values) != 1 {
				problems = append(problems, fmt.Sprintf("%s (%s %s) needs exactly one integer value", field, req.Key, req.Operator))
			} else if _, err := strconv.ParseInt(req.Values[0], 10, 64); err != nil {
				problems = append(problems, fmt.Sprintf("%s (%s %s) value %q is not an integer", field, req.Key, req.Operator, req.Values[0]))
			}
		case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		default:
			problems = append(problems, fmt.Sprintf("%s operator %q is not In, NotIn, Exists, DoesNotExist, Gt or Lt", field, req.Operator))
		}
		r.reqs = append(r.reqs, karpv1.NodeSelectorRequirementWithMinValues{Key: req.Key, Operator: req.Operator, Values: req.Values})
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return rule{}, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return r, nil
}

// parseAdjustment reads "+0.1", "-0.05", "+10%" or "-20%".
func parseAdjustment(s string) (priceRule, error) {
	bad := fmt.Errorf("spec.priceAdjustment %q is not an adjustment: write a signed amount in USD an hour (\"+0.1\", \"-0.05\") or a signed percentage (\"+10%%\", \"-20%%\")", s)
	if len(s) < 2 || (s[0] != '+' && s[0] != '-') {
		return priceRule{}, bad
	}
	num, percent := strings.CutSuffix(s, "%")
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return priceRule{}, bad
	}
	if percent && v < -100 {
		return priceRule{}, fmt.Errorf("spec.priceAdjustment %q lowers the price by more than 100%%: write at most \"-100%%\"", s)
	}
	return priceRule{percent: percent, amount: v}, nil
}

// Apply applies the overlays to the instance types of the NodePool named nodePool. Overlays
// that do not validate are left out (the status controller reports them). For each offering
// the overlay of the highest weight that selects it and sets a price wins, then the first by
// name; capacity is merged per resource the same way. A price below 0 becomes 0.
func Apply(overlays []v1alpha1.NodeOverlay, nodePool string, types []*cloudprovider.InstanceType) Result {
	rules := rules(overlays)
	if len(rules) == 0 {
		return Result{InstanceTypes: types}
	}
	conflicts := map[[3]string]Conflict{}
	clamped := map[[2]string]Clamp{}
	out := make([]*cloudprovider.InstanceType, 0, len(types))
	for _, it := range types {
		out = append(out, applyType(rules, nodePool, it, conflicts, clamped))
	}
	return Result{InstanceTypes: out, Conflicts: sortedValues(conflicts, compareConflicts), Clamped: sortedValues(clamped, compareClamps)}
}

// rules parses the valid overlays, highest weight first, then by name.
func rules(overlays []v1alpha1.NodeOverlay) []rule {
	var out []rule
	for i := range overlays {
		if r, err := parse(&overlays[i]); err == nil {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b rule) int {
		if a.weight != b.weight {
			return int(b.weight) - int(a.weight)
		}
		return strings.Compare(a.name, b.name)
	})
	return out
}

func applyType(rules []rule, nodePool string, it *cloudprovider.InstanceType, conflicts map[[3]string]Conflict, clamped map[[2]string]Clamp) *cloudprovider.InstanceType {
	labelsOf := func(o cloudprovider.Offering) func(string) (string, bool) {
		return func(key string) (string, bool) {
			if key == karpv1.NodePoolLabelKey {
				return nodePool, true
			}
			return it.Label(o, key)
		}
	}
	var offerings []cloudprovider.Offering
	for i, o := range it.Offerings {
		var by *rule
		price := o.Price
		for _, r := range rules {
			if r.price == nil || !requirements.MatchesFunc(r.reqs, labelsOf(o)) {
				continue
			}
			switch {
			case by == nil:
				by = &r
				price = r.price.apply(o.Price)
			case by.weight == r.weight && r.price.apply(o.Price) != price:
				addConflict(conflicts, by.name, r.name, FieldPrice, it.Name, o)
			}
		}
		if by == nil {
			continue
		}
		if price < 0 {
			price = 0
			key := [2]string{by.name, it.Name + "/" + o.Zone + "/" + o.CapacityType}
			clamped[key] = Clamp{Overlay: by.name, InstanceType: it.Name, Zone: o.Zone, CapacityType: o.CapacityType}
		}
		if offerings == nil {
			offerings = slices.Clone(it.Offerings)
		}
		offerings[i].Price = price
	}
	capacity := applyCapacity(rules, it, labelsOf, conflicts)
	if offerings == nil && capacity == nil {
		return it
	}
	changed := *it
	if offerings != nil {
		changed.Offerings = offerings
	}
	if capacity != nil {
		changed.Capacity = capacity
	}
	return &changed
}

// applyCapacity returns the type's capacity with the capacity of the overlays that select
// any of its offerings (capacity belongs to the type, not to an offering), or nil when no
// overlay changes it. Per resource, the highest weight wins, then the first by name.
func applyCapacity(rules []rule, it *cloudprovider.InstanceType, labelsOf func(cloudprovider.Offering) func(string) (string, bool), conflicts map[[3]string]Conflict) corev1.ResourceList {
	var capacity corev1.ResourceList
	setBy := map[corev1.ResourceName]rule{}
	for _, r := range rules {
		if len(r.capacity) == 0 {
			continue
		}
		i := slices.IndexFunc(it.Offerings, func(o cloudprovider.Offering) bool { return requirements.MatchesFunc(r.reqs, labelsOf(o)) })
		if i < 0 {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(r.capacity)) {
			q := r.capacity[name]
			by, ok := setBy[name]
			switch {
			case !ok:
				setBy[name] = r
				if capacity == nil {
					capacity = maps.Clone(it.Capacity)
					if capacity == nil {
						capacity = corev1.ResourceList{}
					}
				}
				capacity[name] = q.DeepCopy()
			case by.weight == r.weight && !quantityEqual(capacity[name], q):
				addConflict(conflicts, by.name, r.name, string(name), it.Name, it.Offerings[i])
			}
		}
	}
	return capacity
}

func quantityEqual(a, b resource.Quantity) bool { return a.Cmp(b) == 0 }

// addConflict records that overlays a and b disagree on field, the first time.
func addConflict(conflicts map[[3]string]Conflict, a, b, field, instanceType string, o cloudprovider.Offering) {
	if b < a {
		a, b = b, a
	}
	key := [3]string{a, b, field}
	if _, ok := conflicts[key]; !ok {
		conflicts[key] = Conflict{Overlay: a, Other: b, Field: field, InstanceType: instanceType, Zone: o.Zone, CapacityType: o.CapacityType}
	}
}

func compareConflicts(a, b Conflict) int {
	return strings.Compare(a.Overlay+"\x00"+a.Other+"\x00"+a.Field, b.Overlay+"\x00"+b.Other+"\x00"+b.Field)
}

func compareClamps(a, b Clamp) int {
	return strings.Compare(a.Overlay+"\x00"+a.InstanceType+"\x00"+a.Zone+"\x00"+a.CapacityType, b.Overlay+"\x00"+b.InstanceType+"\x00"+b.Zone+"\x00"+b.CapacityType)
}

func sortedValues[K comparable, V any](m map[K]V, cmp func(a, b V) int) []V {
	if len(m) == 0 {
		return nil
	}
	out := slices.Collect(maps.Values(m))
	slices.SortFunc(out, cmp)
	return out
}

// Message says what a conflict is, from the side of the overlay named self.
func (c Conflict) Message(self string) string {
	other := c.Other
	if self == c.Other {
		other = c.Overlay
	}
	return fmt.Sprintf("NodeOverlay %q has the same weight and sets another %s for %s in %s (%s); %q wins by name order: give one a higher weight", other, c.Field, c.InstanceType, c.Zone, c.CapacityType, c.Overlay)
}

// Rules are NodeOverlays parsed once for pricing many nodes: the valid ones, highest weight
// first, then by name.
type Rules []rule

// Compile parses the overlays for NodePrice and Selecting; those that do not validate are
// left out.
func Compile(overlays []v1alpha1.NodeOverlay) Rules { return rules(overlays) }

// NodePrice returns the hourly price the overlays make of price for a node with these
// labels: its instance type's, zone, capacity type and NodePool, as Tailor's nodes carry
// them. The highest weight wins, then the first by name; the price never falls below 0.
func (rs Rules) NodePrice(labels map[string]string, price float64) float64 {
	for _, r := range rs {
		if r.price == nil || !requirements.Matches(r.reqs, labels) {
			continue
		}
		return max(r.price.apply(price), 0)
	}
	return price
}

// Selecting returns the names of the valid overlays that select a node with these labels,
// highest weight first, then by name.
func (rs Rules) Selecting(labels map[string]string) []string {
	var out []string
	for _, r := range rs {
		if requirements.Matches(r.reqs, labels) {
			out = append(out, r.name)
		}
	}
	return out
}
