package provisioning

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// minValuesClaim is what the minValues test compares of a NodeClaim created.
type minValuesClaim struct {
	Relaxed       string
	MinValues     int
	InstanceTypes []string
}

func TestProvisionRecordsMinValuesOnTheNodeClaim(t *testing.T) {
	types := selling(instanceType("m.large", 2, 8, 0.1), instanceType("m.xlarge", 4, 16, 0.15))
	tests := []struct {
		name      string
		minValues int
		policy    packing.MinValuesPolicy
		want      []minValuesClaim
		// wantEvents are the Warning events of the pod.
		wantEvents []string
	}{
		{
			name:      "minValues met: the NodeClaim carries them and says it was not relaxed",
			minValues: 2,
			want:      []minValuesClaim{{Relaxed: "false", MinValues: 2, InstanceTypes: []string{"m.large", "m.xlarge"}}},
		},
		{
			name:       "Strict: no NodeClaim, and the pod's event names the key",
			minValues:  3,
			wantEvents: []string{`Warning FailedProvisioning cannot provision a node for this pod: NodePool "general": minValues 3 for node.kubernetes.io/instance-type: only 2 instance types can take these pods`},
		},
		{
			name:      "BestEffort: the NodeClaim's minValues are lowered and it is annotated relaxed",
			minValues: 3,
			policy:    packing.MinValuesBestEffort,
			want:      []minValuesClaim{{Relaxed: "true", MinValues: 2, InstanceTypes: []string{"m.large", "m.xlarge"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, types, pool("general", func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
					karpv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpExists, MinValues: ptr.To(tt.minValues)})
			}))
			f.prov = New(f.kube, types, f.tracker, noTrigger{}, f.recorder, Options{Clock: clock.RealClock{}, ReplanWindow: DefaultReplanWindow, MinValuesPolicy: tt.policy})
			f.prov.Submit([]Submission{{Pod: f.pod(t, "a", "1500m")}})
			if err := f.prov.Provision(context.Background()); err != nil {
				t.Fatal(err)
			}
			var got []minValuesClaim
			for _, nc := range f.claims(t) {
				c := minValuesClaim{Relaxed: nc.Annotations[karpv1.NodeClaimMinValuesRelaxedAnnotationKey]}
				for _, r := range nc.Spec.Requirements {
					if r.Key != corev1.LabelInstanceTypeStable {
						continue
					}
					if r.MinValues != nil {
						c.MinValues = *r.MinValues
					}
					if r.Operator == corev1.NodeSelectorOpIn {
						c.InstanceTypes = r.Values
					}
				}
				got = append(got, c)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("NodeClaims (-want +got):\n%s", diff)
			}
			var warnings []string
			for _, e := range f.events() {
				if strings.HasPrefix(e, corev1.EventTypeWarning) {
					warnings = append(warnings, e)
				}
			}
			if diff := cmp.Diff(tt.wantEvents, warnings); diff != "" {
				t.Errorf("warning events (-want +got):\n%s", diff)
			}
		})
	}
}
