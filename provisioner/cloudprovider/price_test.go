package cloudprovider

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

func TestAPIPrice(t *testing.T) {
	tests := []struct {
		name  string
		parts PriceParts
		want  *karpv1.Price
	}{
		{
			name:  "every part",
			parts: PriceParts{Instance: 0.0632, Volumes: 20 * 0.08 / 730, PublicIPv4: 0.005, Monitoring: 0.0029, DaemonSets: 0.0008},
			want:  &karpv1.Price{PerHour: "0.074092", Instance: "0.0632", Volumes: "0.002192", PublicIPv4: "0.005", Monitoring: "0.0029", DaemonSets: "0.0008"},
		},
		{
			name:  "zero parts left out",
			parts: PriceParts{Instance: 0.096},
			want:  &karpv1.Price{PerHour: "0.096", Instance: "0.096"},
		},
		{
			name:  "free",
			parts: PriceParts{},
			want:  &karpv1.Price{PerHour: "0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.parts.APIPrice()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("APIPrice() (-want +got):\n%s", diff)
			}
			back, err := PartsOf(got)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.parts, back, cmpopts.EquateApprox(0, 1e-6)); diff != "" {
				t.Errorf("PartsOf(APIPrice()) (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPartsOfNamesTheBadPart(t *testing.T) {
	_, err := PartsOf(&karpv1.Price{PerHour: "1", Volumes: "a lot"})
	if err == nil || err.Error() != `price.volumes "a lot": strconv.ParseFloat: parsing "a lot": invalid syntax` {
		t.Errorf("PartsOf = %v, want an error naming price.volumes", err)
	}
}

func TestNodeClaimPrice(t *testing.T) {
	planned := `{"instance":0.09,"volumes":0.0022,"publicIPv4":0,"monitoring":0,"daemonSets":0.01}`
	claim := func(annotation string, status *karpv1.Price) *karpv1.NodeClaim {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: karpv1.NodeClaimStatus{Price: status}}
		if annotation != "" {
			nc.Annotations = map[string]string{PlannedPriceAnnotationKey: annotation}
		}
		return nc
	}
	tests := []struct {
		name   string
		nc     *karpv1.NodeClaim
		want   PriceParts
		wantOK bool
	}{
		{name: "planned", nc: claim(planned, nil), want: PriceParts{Instance: 0.09, Volumes: 0.0022, DaemonSets: 0.01}, wantOK: true},
		{name: "launched wins", nc: claim(planned, &karpv1.Price{PerHour: "0.05", Instance: "0.05"}), want: PriceParts{Instance: 0.05}, wantOK: true},
		{name: "neither", nc: claim("", nil)},
		{name: "unreadable plan", nc: claim("{", nil)},
		{name: "unreadable status", nc: claim(planned, &karpv1.Price{PerHour: "1", Instance: "one"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := NodeClaimPrice(tt.nc)
			if ok != tt.wantOK {
				t.Fatalf("NodeClaimPrice ok = %t, want %t", ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("NodeClaimPrice (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWithDaemonSetShare(t *testing.T) {
	// Planned on a type whose DaemonSets took a tenth of the instance, launched as one at 0.2.
	launched := PriceParts{Instance: 0.2, Volumes: 0.0022, PublicIPv4: 0.005}
	got := launched.WithDaemonSetShare(PriceParts{Instance: 0.09, DaemonSets: 0.01, Volumes: 0.0022})
	want := PriceParts{Instance: 0.18, Volumes: 0.0022, PublicIPv4: 0.005, DaemonSets: 0.02}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
		t.Errorf("WithDaemonSetShare (-want +got):\n%s", diff)
	}
	if math.Abs(got.Total()-launched.Total()) > 1e-12 {
		t.Errorf("total %v, want the launched node's %v", got.Total(), launched.Total())
	}
}
