package overlay

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1alpha1"
)

func TestSetConditions(t *testing.T) {
	conflict := Conflict{Overlay: "a", Other: "b", Field: FieldPrice, InstanceType: "c5.large", Zone: zoneB, CapacityType: "on-demand"}
	tests := []struct {
		name    string
		overlay string
		spec    v1alpha1.NodeOverlaySpec
		found   Findings
		want    []metav1.Condition
	}{
		{
			name:    "an overlay without conflict is ready",
			overlay: "a",
			spec:    v1alpha1.NodeOverlaySpec{Price: ptr.To("0.1")},
			found:   Findings{Conflicts: []Conflict{{Overlay: "c", Other: "d", Field: FieldPrice}}},
			want: []metav1.Condition{
				{Type: v1alpha1.ConditionTypeValidationSucceeded, Status: metav1.ConditionTrue, Reason: v1alpha1.ConditionTypeValidationSucceeded},
				{Type: v1alpha1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ConditionTypeReady},
			},
		},
		{
			name:    "the overlay that wins a conflict names the other",
			overlay: "a",
			spec:    v1alpha1.NodeOverlaySpec{Price: ptr.To("0.1")},
			found:   Findings{Conflicts: []Conflict{conflict}},
			want: []metav1.Condition{
				{Type: v1alpha1.ConditionTypeValidationSucceeded, Status: metav1.ConditionTrue, Reason: v1alpha1.ConditionTypeValidationSucceeded},
				{Type: v1alpha1.ConditionTypeReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonConflict,
					Message: `NodeOverlay "b" has the same weight and sets another price for c5.large in us-east-1b (on-demand); "a" wins by name order: give one a higher weight`},
			},
		},
		{
			name:    "the overlay that loses a conflict names the other",
			overlay: "b",
			spec:    v1alpha1.NodeOverlaySpec{Price: ptr.To("0.2")},
			found:   Findings{Conflicts: []Conflict{conflict}},
			want: []metav1.Condition{
				{Type: v1alpha1.ConditionTypeValidationSucceeded, Status: metav1.ConditionTrue, Reason: v1alpha1.ConditionTypeValidationSucceeded},
				{Type: v1alpha1.ConditionTypeReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonConflict,
					Message: `NodeOverlay "a" has the same weight and sets another price for c5.large in us-east-1b (on-demand); "a" wins by name order: give one a higher weight`},
			},
		},
		{
			name:    "clamped prices are reported on a ready overlay",
			overlay: "cheap",
			spec:    v1alpha1.NodeOverlaySpec{PriceAdjustment: ptr.To("-1")},
			found:   Findings{Clamped: []Clamp{{Overlay: "cheap", InstanceType: "m5.large", Zone: zoneA, CapacityType: "spot"}, {Overlay: "cheap", InstanceType: "m5.large", Zone: zoneB, CapacityType: "spot"}}},
			want: []metav1.Condition{
				{Type: v1alpha1.ConditionTypeValidationSucceeded, Status: metav1.ConditionTrue, Reason: v1alpha1.ConditionTypeValidationSucceeded},
				{Type: v1alpha1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ConditionTypeReady,
					Message: "the price of 2 offerings would fall below 0 and is 0 (m5.large in us-east-1a, spot first)"},
			},
		},
		{
			name:    "an invalid overlay is not ready",
			overlay: "a",
			spec:    v1alpha1.NodeOverlaySpec{PriceAdjustment: ptr.To("-150%")},
			want: []metav1.Condition{
				{Type: v1alpha1.ConditionTypeValidationSucceeded, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonValidationFailed,
					Message: `spec.priceAdjustment "-150%" lowers the price by more than 100%: write at most "-100%"`},
				{Type: v1alpha1.ConditionTypeReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonValidationFailed,
					Message: `spec.priceAdjustment "-150%" lowers the price by more than 100%: write at most "-100%"`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := overlay(tt.overlay, 0, tt.spec)
			SetConditions(&o, tt.found)
			if diff := cmp.Diff(tt.want, o.Status.Conditions, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}
