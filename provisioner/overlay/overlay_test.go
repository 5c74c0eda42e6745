package overlay

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1alpha1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
)

const (
	zoneA = "us-east-1a"
	zoneB = "us-east-1b"
)

func instanceType(name, family string, prices map[string]float64) *cloudprovider.InstanceType {
	it := &cloudprovider.InstanceType{
		Name:     name,
		Labels:   map[string]string{corev1.LabelInstanceTypeStable: name, "karpenter.k8s.aws/instance-family": family},
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")},
	}
	for _, key := range []string{zoneA + "/" + karpv1.CapacityTypeOnDemand, zoneA + "/" + karpv1.CapacityTypeSpot, zoneB + "/" + karpv1.CapacityTypeOnDemand} {
		if p, ok := prices[key]; ok {
			zone, ct := key[:len(zoneA)], key[len(zoneA)+1:]
			it.Offerings = append(it.Offerings, cloudprovider.Offering{Zone: zone, CapacityType: ct, Price: p, Available: true})
		}
	}
	return it
}

func overlay(name string, weight int32, spec v1alpha1.NodeOverlaySpec) v1alpha1.NodeOverlay {
	if weight != 0 {
		spec.Weight = ptr.To(weight)
	}
	return v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

func req(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

// prices is each offering's price, by type/zone/capacity type.
func prices(types []*cloudprovider.InstanceType) map[string]float64 {
	out := map[string]float64{}
	for _, it := range types {
		for _, o := range it.Offerings {
			out[it.Name+"/"+o.Zone+"/"+o.CapacityType] = o.Price
		}
	}
	return out
}

// extended is each type's amount of the example.com resources.
func extended(types []*cloudprovider.InstanceType) map[string]string {
	out := map[string]string{}
	for _, it := range types {
		for name, q := range it.Capacity {
			if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
				out[it.Name+"/"+string(name)] = q.String()
			}
		}
	}
	return out
}

func catalog() []*cloudprovider.InstanceType {
	return []*cloudprovider.InstanceType{
		instanceType("m5.large", "m5", map[string]float64{zoneA + "/on-demand": 0.096, zoneA + "/spot": 0.04, zoneB + "/on-demand": 0.096}),
		instanceType("c5.large", "c5", map[string]float64{zoneA + "/on-demand": 0.085, zoneB + "/on-demand": 0.085}),
	}
}

func TestApply(t *testing.T) {
	tests := []struct {
		name          string
		overlays      []v1alpha1.NodeOverlay
		nodePool      string
		wantPrices    map[string]float64
		wantExtended  map[string]string
		wantConflicts []Conflict
		wantClamped   []Clamp
	}{
		{
			name: "no overlay leaves every price",
			wantPrices: map[string]float64{
				"m5.large/us-east-1a/on-demand": 0.096, "m5.large/us-east-1a/spot": 0.04, "m5.large/us-east-1b/on-demand": 0.096,
				"c5.large/us-east-1a/on-demand": 0.085, "c5.large/us-east-1b/on-demand": 0.085,
			},
			wantExtended: map[string]string{},
		},
		{
			name: "an absolute price replaces the selected type's prices",
			overlays: []v1alpha1.NodeOverlay{overlay("savings", 0, v1alpha1.NodeOverlaySpec{
				Requirements: []corev1.NodeSelectorRequirement{req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "c5.large")},
				Price:        ptr.To("0.05"),
			})},
			wantPrices: map[string]float64{
				"m5.large/us-east-1a/on-demand": 0.096, "m5.large/us-east-1a/spot": 0.04, "m5.large/us-east-1b/on-demand": 0.096,
				"c5.large/us-east-1a/on-demand": 0.05, "c5.large/us-east-1b/on-demand": 0.05,
			},
			wantExtended: map[string]string{},
		},
		{
			name: "a percentage selects by capacity type and zone",
			overlays: []v1alpha1.NodeOverlay{overlay("spot-a", 0, v1alpha1.NodeOverlaySpec{
				Requirements: []corev1.NodeSelectorRequirement{
					req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot"),
					req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zoneA),
				},
				PriceAdjustment: ptr.To("+50%"),
			})},
			wantPrices: map[string]float64{
				"m5.large/us-east-1a/on-demand": 0.096, "m5.large/us-east-1a/spot": 0.06, "m5.large/us-east-1b/on-demand": 0.096,
				"c5.large/us-east-1a/on-demand": 0.085, "c5.large/us-east-1b/on-demand": 0.085,
			},
			wantExtended: map[string]string{},
		},
		{
			name:     "an overlay for another NodePool changes nothing",
			nodePool: "general",
			overlays: []v1alpha1.NodeOverlay{overlay("batch-only", 0, v1alpha1.NodeOverlaySpec{
				Requirements:    []corev1.NodeSelectorRequirement{req(karpv1.NodePoolLabelKey, corev1.NodeSelectorOpIn, "batch")},
				PriceAdjustment: ptr.To("+1"),
			})},
			wantPrices: map[string]float64{
				"m5.large/us-east-1a/on-demand": 0.096, "m5.large/us-east-1a/spot": 0.04, "m5.large/us-east-1b/on-demand": 0.096,
				"c5.large/us-east-1a/on-demand": 0.085, "c5.large/us-east-1b/on-demand": 0.085,
			},
			wantExtended: map[string]string{},
		},
		{
			name: "the higher weight wins a price, whatever the names",
			overlays: []v1alpha1.NodeOverlay{
				overlay("a-low", 10, v1alpha1.NodeOverlaySpec{PriceAdjustment: ptr.To("+1")}),
				overlay("z-high", 20, v1alpha1.NodeOverlaySpec{
					Requirements: []corev1.NodeSelectorRequirement{req("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpIn, "m5")},
					Price:        ptr.To("0.01"),
				}),
			},
			wantPrices: map[string]float64{
				"m5.large/us-east-1a/on-demand": 0.01, "m5.large/us-east-1a/spot": 0.01, "m5.large/us-east-1b/on-demand": 0.01,
				"c5.large/us-east-1a/on-demand": 1.085, "c5.large/us-east-1b/on-demand": 1.085,
			},
			wantExtended: map[string]string{},
		},
		{
			name: "two overlays of one weight with different prices conflict and the first by name wins",
			overlays: []v1alpha1.NodeOverlay{
				overlay("b", 5, v1alpha1.NodeOverlaySpec{Requirements: []corev1.NodeSelectorRequirement{req("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpIn, "c5")}, Price: ptr.To("0.2")}),
				overlay("a", 5, v1alpha1.NodeOverlaySpec{Requirements: []corev1.NodeSelectorRequirement{req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zoneB)}, Price: ptr.To("0.1")}),
			},
			wantPrices: map[string]float64{
				"m5.large/us-east-1a/on-demand": 0.096, "m5.large/us-east-1a/spot": 0.04, "m5.large/us-east-1b/on-demand": 0.1,
				"c5.large/us-east-1a/on-demand": 0.2, "c5.large/us-east-1b/on-demand": 0.1,
			},
			wantExtended:  map[string]string{},
			wantConflicts: []Conflict{{Overlay: "a", Other: "b", Field: FieldPrice, InstanceType: "c5.large", Zone: zoneB, CapacityType: "on-demand"}},
		},
		{
			name: "two overlays of one weight that agree do not conflict",
			overlays: []v1alpha1.NodeOverlay{
				overlay("a", 5, v1alpha1.NodeOverlaySpec{Price: ptr.To("0.1")}),
				overlay("b", 5, v1alpha1.NodeOverlaySpec{Requirements: []corev1.NodeSelectorRequirement{req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "c5.large")}, Price: ptr.To("0.1")}),
			},
			wantPrices: map[string]float64{
				"m5.large/us-east-1a/on-demand": 0.1, "m5.large/us-east-1a/spot": 0.1, "m5.large/us-east-1b/on-demand": 0.1,
				"c5.large/us-east-1a/on-demand": 0.1, "c5.large/us-east-1b/on-demand": 0.1,
			},
			wantExtended: map[string]string{},
		},
		{
			name: "a price below 0 is clamped to 0 and reported",
			overlays: []v1alpha1.NodeOverlay{overlay("free-spot", 0, v1alpha1.NodeOverlaySpec{
				Requirements:    []corev1.NodeSelectorRequirement{req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot")},
				PriceAdjustment: ptr.To("-0.05"),
			})},
			wantPrices: map[string]float64{
				"m5.large/us-east-1a/on-demand": 0.096, "m5.large/us-east-1a/spot": 0, "m5.large/us-east-1b/on-demand": 0.096,
				"c5.large/us-east-1a/on-demand": 0.085, "c5.large/us-east-1b/on-demand": 0.085,
			},
			wantExtended: map[string]string{},
			wantClamped:  []Clamp{{Overlay: "free-spot", InstanceType: "m5.large", Zone: zoneA, CapacityType: "spot"}},
		},
		{
			name: "capacity merges per resource, the higher weight winning",
			overlays: []v1alpha1.NodeOverlay{
				overlay("slices", 10, v1alpha1.NodeOverlaySpec{Capacity: corev1.ResourceList{"example.com/slice": resource.MustParse("4"), "example.com/fpga": resource.MustParse("1")}}),
				overlay("more-slices", 20, v1alpha1.NodeOverlaySpec{
					Requirements: []corev1.NodeSelectorRequirement{req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large")},
					Capacity:     corev1.ResourceList{"example.com/slice": resource.MustParse("8")},
				}),
			},
			wantPrices: map[string]float64{
				"m5.large/us-east-1a/on-demand": 0.096, "m5.large/us-east-1a/spot": 0.04, "m5.large/us-east-1b/on-demand": 0.096,
				"c5.large/us-east-1a/on-demand": 0.085, "c5.large/us-east-1b/on-demand": 0.085,
			},
			wantExtended: map[string]string{
				"m5.large/example.com/slice": "8", "m5.large/example.com/fpga": "1",
				"c5.large/example.com/slice": "4", "c5.large/example.com/fpga": "1",
			},
		},
		{
			name: "capacity of one weight that disagrees conflicts",
			overlays: []v1alpha1.NodeOverlay{
				overlay("x", 1, v1alpha1.NodeOverlaySpec{Capacity: corev1.ResourceList{"example.com/slice": resource.MustParse("4")}}),
				overlay("y", 1, v1alpha1.NodeOverlaySpec{
					Requirements: []corev1.NodeSelectorRequirement{req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "c5.large")},
					Capacity:     corev1.ResourceList{"example.com/slice": resource.MustParse("2")},
				}),
			},
			wantPrices: map[string]float64{
				"m5.large/us-east-1a/on-demand": 0.096, "m5.large/us-east-1a/spot": 0.04, "m5.large/us-east-1b/on-demand": 0.096,
				"c5.large/us-east-1a/on-demand": 0.085, "c5.large/us-east-1b/on-demand": 0.085,
			},
			wantExtended:  map[string]string{"m5.large/example.com/slice": "4", "c5.large/example.com/slice": "4"},
			wantConflicts: []Conflict{{Overlay: "x", Other: "y", Field: "example.com/slice", InstanceType: "c5.large", Zone: zoneA, CapacityType: "on-demand"}},
		},
		{
			name:     "an invalid overlay is left out",
			overlays: []v1alpha1.NodeOverlay{overlay("both", 0, v1alpha1.NodeOverlaySpec{Price: ptr.To("1"), PriceAdjustment: ptr.To("+1")})},
			wantPrices: map[string]float64{
				"m5.large/us-east-1a/on-demand": 0.096, "m5.large/us-east-1a/spot": 0.04, "m5.large/us-east-1b/on-demand": 0.096,
				"c5.large/us-east-1a/on-demand": 0.085, "c5.large/us-east-1b/on-demand": 0.085,
			},
			wantExtended: map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := catalog()
			before := prices(in)
			got := Apply(tt.overlays, tt.nodePool, in)
			if diff := cmp.Diff(tt.wantPrices, roundAll(prices(got.InstanceTypes))); diff != "" {
				t.Errorf("prices (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantExtended, extended(got.InstanceTypes)); diff != "" {
				t.Errorf("extended resources (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantConflicts, got.Conflicts); diff != "" {
				t.Errorf("conflicts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantClamped, got.Clamped); diff != "" {
				t.Errorf("clamped (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, prices(in)); diff != "" {
				t.Errorf("the provider's instance types changed (-before +after):\n%s", diff)
			}
			if len(extended(in)) != 0 {
				t.Errorf("the provider's capacities changed: %v", extended(in))
			}
		})
	}
}

func roundAll(m map[string]float64) map[string]float64 {
	for k, v := range m {
		m[k] = float64(int64(v*1e6+0.5)) / 1e6
	}
	return m
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		spec    v1alpha1.NodeOverlaySpec
		wantErr string
	}{
		{name: "an absolute price", spec: v1alpha1.NodeOverlaySpec{Price: ptr.To("0.0415")}},
		{name: "a negative amount", spec: v1alpha1.NodeOverlaySpec{PriceAdjustment: ptr.To("-0.05")}},
		{name: "a percentage", spec: v1alpha1.NodeOverlaySpec{PriceAdjustment: ptr.To("+10%")}},
		{name: "an extended resource", spec: v1alpha1.NodeOverlaySpec{Capacity: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}},
		{
			name:    "price and priceAdjustment",
			spec:    v1alpha1.NodeOverlaySpec{Price: ptr.To("1"), PriceAdjustment: ptr.To("+1")},
			wantErr: "spec.price and spec.priceAdjustment are both set: keep one",
		},
		{
			name:    "an adjustment without a sign",
			spec:    v1alpha1.NodeOverlaySpec{PriceAdjustment: ptr.To("10%")},
			wantErr: `spec.priceAdjustment "10%" is not an adjustment: write a signed amount in USD an hour ("+0.1", "-0.05") or a signed percentage ("+10%", "-20%")`,
		},
		{
			name:    "more than 100% off",
			spec:    v1alpha1.NodeOverlaySpec{PriceAdjustment: ptr.To("-120%")},
			wantErr: `spec.priceAdjustment "-120%" lowers the price by more than 100%: write at most "-100%"`,
		},
		{
			name:    "a negative price",
			spec:    v1alpha1.NodeOverlaySpec{Price: ptr.To("-1")},
			wantErr: `spec.price "-1" is not a price: write USD an hour such as "0.0415"`,
		},
		{
			name:    "memory capacity",
			spec:    v1alpha1.NodeOverlaySpec{Capacity: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
			wantErr: "spec.capacity sets memory, which comes from the instance type: set only extended resources such as example.com/device",
		},
		{
			name:    "Gt with a word",
			spec:    v1alpha1.NodeOverlaySpec{Requirements: []corev1.NodeSelectorRequirement{req("karpenter.k8s.aws/instance-cpu", corev1.NodeSelectorOpGt, "four")}},
			wantErr: `spec.requirements[0] (karpenter.k8s.aws/instance-cpu Gt) value "four" is not an integer`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := overlay("o", 0, tt.spec)
			err := Validate(&o)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tt.wantErr, got); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}
