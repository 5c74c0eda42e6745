package fake

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// catalog has an amd64 and an arm64 type; the cheapest offerings are a spot one out of
// capacity, then a reservation, then on-demand ones where the dearer instance is the cheaper
// node (the other pays for a public IPv4 address).
func catalog() []*cloudprovider.InstanceType {
	return []*cloudprovider.InstanceType{
		{
			Name:     "m.large",
			Labels:   map[string]string{corev1.LabelArchStable: "amd64", karpv1.InstanceCPULabelKey: "2"},
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("29")},
			Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("500Mi")},
			Offerings: []cloudprovider.Offering{
				{Zone: "us-east-1a", ZoneID: "use1-az1", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.096, NodeCosts: cloudprovider.NodeCosts{PublicIPv4: 0.005}, Available: true},
				{Zone: "us-east-1a", ZoneID: "use1-az1", CapacityType: karpv1.CapacityTypeSpot, Price: 0.04, Available: true},
				{Zone: "us-east-1b", ZoneID: "use1-az2", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.098, Available: true},
				{Zone: "us-east-1b", ZoneID: "use1-az2", CapacityType: karpv1.CapacityTypeSpot, Price: 0.03, Available: false},
			},
		},
		{
			Name:     "c.xlarge",
			Labels:   map[string]string{corev1.LabelArchStable: "arm64", karpv1.InstanceCPULabelKey: "4"},
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("58")},
			Offerings: []cloudprovider.Offering{
				{Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeReserved, ReservationID: "cr-1", ReservationType: "default", Price: 0.01, Available: true},
				{Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.12, Available: true},
			},
		},
	}
}

func newProvider() *CloudProvider {
	p := New(clocktesting.NewFakeClock(now))
	p.SetInstanceTypes(catalog()...)
	return p
}

func claim(name string, reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: reqs,
		},
	}
}

func req(key string, op corev1.NodeSelectorOperator, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}

// outcome names an error by the type callers branch on.
func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case cloudprovider.IsInsufficientCapacityError(err):
		return "insufficient capacity"
	case cloudprovider.IsNodeClaimNotFoundError(err):
		return "not found"
	case cloudprovider.IsNodeClassNotReadyError(err):
		return "node class not ready"
	}
	return err.Error()
}

// launch is what a Create chose, or why it failed.
type launch struct {
	Type, Zone, CapacityType, Reservation, Outcome string
}

func launchOf(nc *karpv1.NodeClaim, err error) launch {
	if err != nil {
		return launch{Outcome: outcome(err)}
	}
	return launch{
		Type: nc.Labels[corev1.LabelInstanceTypeStable], Zone: nc.Labels[corev1.LabelTopologyZone],
		CapacityType: nc.Labels[karpv1.CapacityTypeLabelKey], Reservation: nc.Labels[karpv1.CapacityReservationIDLabelKey], Outcome: "ok",
	}
}

func TestCreateLaunchesTheCheapestOfferingTheNodeClaimAllows(t *testing.T) {
	tests := []struct {
		name      string
		reqs      []karpv1.NodeSelectorRequirementWithMinValues
		labels    map[string]string
		available bool
		want      launch
	}{
		{
			name: "anything: the reservation",
			want: launch{Type: "c.xlarge", Zone: "us-east-1a", CapacityType: "reserved", Reservation: "cr-1", Outcome: "ok"},
		},
		{
			name: "spot or on-demand: the spot offering with capacity, not the cheaper one without",
			reqs: []karpv1.NodeSelectorRequirementWithMinValues{req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot", "on-demand")},
			want: launch{Type: "m.large", Zone: "us-east-1a", CapacityType: "spot", Outcome: "ok"},
		},
		{
			name: "on-demand amd64: the zone whose node costs less, not its instance",
			reqs: []karpv1.NodeSelectorRequirementWithMinValues{req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "on-demand"), req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64")},
			want: launch{Type: "m.large", Zone: "us-east-1b", CapacityType: "on-demand", Outcome: "ok"},
		},
		{
			name: "zone us-east-1b: on-demand, its spot offering out of capacity",
			reqs: []karpv1.NodeSelectorRequirementWithMinValues{req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1b")},
			want: launch{Type: "m.large", Zone: "us-east-1b", CapacityType: "on-demand", Outcome: "ok"},
		},
		{
			name: "at least 4 CPUs, not reserved",
			reqs: []karpv1.NodeSelectorRequirementWithMinValues{req(karpv1.InstanceCPULabelKey, karpv1.NodeSelectorOpGte, "4"), req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpNotIn, "reserved")},
			want: launch{Type: "c.xlarge", Zone: "us-east-1a", CapacityType: "on-demand", Outcome: "ok"},
		},
		{
			name:   "a key no offering has is the NodeClaim's label",
			reqs:   []karpv1.NodeSelectorRequirementWithMinValues{req("team", corev1.NodeSelectorOpIn, "web"), req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64")},
			labels: map[string]string{"team": "web"},
			want:   launch{Type: "m.large", Zone: "us-east-1a", CapacityType: "spot", Outcome: "ok"},
		},
		{
			name:   "a key neither an offering nor the NodeClaim has the value of",
			reqs:   []karpv1.NodeSelectorRequirementWithMinValues{req("team", corev1.NodeSelectorOpIn, "web")},
			labels: map[string]string{"team": "batch"},
			want:   launch{Outcome: "insufficient capacity"},
		},
		{
			name: "a zone nothing is sold in",
			reqs: []karpv1.NodeSelectorRequirementWithMinValues{req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1c")},
			want: launch{Outcome: "insufficient capacity"},
		},
		{
			name: "spot in us-east-1b, out of capacity",
			reqs: []karpv1.NodeSelectorRequirementWithMinValues{req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1b"), req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot")},
			want: launch{Outcome: "insufficient capacity"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvider()
			nc := claim("a", tt.reqs...)
			nc.Labels = tt.labels
			got := launchOf(p.Create(context.Background(), nc))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("launch (-want +got):\n%s", diff)
			}
			instances, err := p.List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 1, false: 0}[tt.want.Outcome == "ok"]; len(instances) != want {
				t.Errorf("%d instances live, want %d", len(instances), want)
			}
		})
	}
}

func TestCreateFillsTheNodeClaimAsTheAWSProviderDoes(t *testing.T) {
	p := newProvider()
	nc := claim("web-1", req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "on-demand"), req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a"), req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"))
	nc.Labels = map[string]string{karpv1.NodePoolLabelKey: "general", "team": "web"}
	got, err := p.Create(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	want := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-1",
			Labels: map[string]string{
				corev1.LabelInstanceTypeStable: "m.large", corev1.LabelArchStable: "amd64", karpv1.InstanceCPULabelKey: "2",
				corev1.LabelTopologyZone: "us-east-1a", karpv1.ZoneIDLabelKey: "use1-az1", karpv1.CapacityTypeLabelKey: "on-demand",
				karpv1.NodePoolLabelKey: "general",
			},
			CreationTimestamp: metav1.NewTime(now),
		},
		Status: karpv1.NodeClaimStatus{
			ProviderID: "fake:///us-east-1a/i-1",
			NodeName:   "i-1",
			ImageID:    ImageID,
			Capacity:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("29")},
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("1900m"), corev1.ResourceMemory: resource.MustParse("7692Mi"), corev1.ResourcePods: resource.MustParse("29"),
			},
			Price: &karpv1.Price{PerHour: "0.101", Instance: "0.096", PublicIPv4: "0.005"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("launched NodeClaim (-want +got):\n%s", diff)
	}
	for name, view := range map[string]func() (*karpv1.NodeClaim, error){
		"Get":   func() (*karpv1.NodeClaim, error) { return p.Get(context.Background(), want.Status.ProviderID) },
		"Adopt": func() (*karpv1.NodeClaim, error) { return p.Adopt(context.Background(), nc) },
		"List": func() (*karpv1.NodeClaim, error) {
			l, err := p.List(context.Background())
			if err != nil || len(l) != 1 {
				return nil, fmt.Errorf("listed %d instances: %v", len(l), err)
			}
			return l[0], nil
		},
	} {
		got, err := view()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

// TestTheInstanceGoesOnce: Delete, Get, List and Terminate agree on when an instance is gone.
func TestTheInstanceGoesOnce(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		// end ends the instance of nc.
		end  func(p *CloudProvider, nc *karpv1.NodeClaim) string
		want []string
	}{
		{
			name: "deleted",
			end:  func(p *CloudProvider, nc *karpv1.NodeClaim) string { return outcome(p.Delete(ctx, nc)) },
			want: []string{"ok", "get: not found", "listed: 0", "delete again: not found", "terminate: false"},
		},
		{
			name: "terminated out of band",
			end: func(p *CloudProvider, nc *karpv1.NodeClaim) string {
				return fmt.Sprint(p.Terminate(nc.Status.ProviderID))
			},
			want: []string{"true", "get: not found", "listed: 0", "delete again: not found", "terminate: false"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvider()
			nc, err := p.Create(ctx, claim("a"))
			if err != nil {
				t.Fatal(err)
			}
			got := []string{tt.end(p, nc)}
			_, err = p.Get(ctx, nc.Status.ProviderID)
			got = append(got, "get: "+outcome(err))
			listed, _ := p.List(ctx)
			got = append(got, fmt.Sprintf("listed: %d", len(listed)))
			got = append(got, "delete again: "+outcome(p.Delete(ctx, nc)))
			got = append(got, fmt.Sprintf("terminate: %t", p.Terminate(nc.Status.ProviderID)))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("after the instance ended (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWhatHasNoInstanceIsNotFound(t *testing.T) {
	p := newProvider()
	ctx := context.Background()
	_, getErr := p.Get(ctx, "fake:///us-east-1a/i-404")
	adopted, adoptErr := p.Adopt(ctx, claim("never-launched"))
	got := []string{
		"get: " + outcome(getErr),
		"delete unlaunched: " + outcome(p.Delete(ctx, claim("unlaunched"))),
		"delete unknown: " + outcome(p.Delete(ctx, &karpv1.NodeClaim{Status: karpv1.NodeClaimStatus{ProviderID: "fake:///us-east-1a/i-404"}})),
		fmt.Sprintf("adopt: %v, %s", adopted, outcome(adoptErr)),
	}
	want := []string{"get: not found", "delete unlaunched: not found", "delete unknown: not found", "adopt: <nil>, ok"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("calls about instances that do not exist (-want +got):\n%s", diff)
	}
}

func TestAdoptAndCreateAgainLaunchNothing(t *testing.T) {
	p := newProvider()
	ctx := context.Background()
	first, err := p.Create(ctx, claim("a"))
	if err != nil {
		t.Fatal(err)
	}
	adopted, err := p.Adopt(ctx, claim("a"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := p.Create(ctx, claim("a"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := p.Create(ctx, claim("b"))
	if err != nil {
		t.Fatal(err)
	}
	listed, err := p.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, inst := range listed {
		names = append(names, inst.Name+" "+inst.Status.ProviderID)
	}
	got := map[string]any{
		"adopted":        adopted.Status.ProviderID,
		"created again":  again.Status.ProviderID,
		"another claim":  other.Status.ProviderID,
		"live instances": names,
		"calls":          p.Calls(),
	}
	want := map[string]any{
		"adopted":        first.Status.ProviderID,
		"created again":  first.Status.ProviderID,
		"another claim":  "fake:///us-east-1a/i-2",
		"live instances": []string{"a fake:///us-east-1a/i-1", "b fake:///us-east-1a/i-2"},
		"calls":          Calls{Create: []string{"a", "a", "b"}, Adopt: []string{"a"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestInjectedFailures(t *testing.T) {
	ctx := context.Background()
	denied := errors.New("UnauthorizedOperation")
	tests := []struct {
		name   string
		inject func(p *CloudProvider)
		// create calls Create four times, else Delete four times on a launched NodeClaim.
		create bool
		want   []string
		live   int
	}{
		{
			name:   "the next two Creates, with insufficient capacity",
			inject: func(p *CloudProvider) { p.FailCreates(2, nil) },
			create: true,
			want:   []string{"insufficient capacity", "insufficient capacity", "ok", "ok"},
			live:   1,
		},
		{
			name:   "every Create, with the test's error",
			inject: func(p *CloudProvider) { p.FailCreates(Always, denied) },
			create: true,
			want:   []string{"UnauthorizedOperation", "UnauthorizedOperation", "UnauthorizedOperation", "UnauthorizedOperation"},
		},
		{
			name:   "Creates failed, then not",
			inject: func(p *CloudProvider) { p.FailCreates(Always, denied); p.FailCreates(0, denied) },
			create: true,
			want:   []string{"ok", "ok", "ok", "ok"},
			live:   1,
		},
		{
			name:   "the next Delete",
			inject: func(p *CloudProvider) { p.FailDeletes(1, denied) },
			want:   []string{"UnauthorizedOperation", "ok", "not found", "not found"},
		},
		{
			name:   "every Delete",
			inject: func(p *CloudProvider) { p.FailDeletes(Always, nil) },
			want: []string{
				"terminating instance: failure injected by the test", "terminating instance: failure injected by the test",
				"terminating instance: failure injected by the test", "terminating instance: failure injected by the test",
			},
			live: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvider()
			nc := claim("a")
			if !tt.create {
				var err error
				if nc, err = p.Create(ctx, nc); err != nil {
					t.Fatal(err)
				}
			}
			tt.inject(p)
			var got []string
			for range 4 {
				var err error
				if tt.create {
					_, err = p.Create(ctx, nc)
				} else {
					err = p.Delete(ctx, nc)
				}
				got = append(got, outcome(err))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("outcomes of four calls (-want +got):\n%s", diff)
			}
			if listed, _ := p.List(ctx); len(listed) != tt.live {
				t.Errorf("%d instances live, want %d", len(listed), tt.live)
			}
			calls := p.Calls()
			if n := len(calls.Create) + len(calls.Delete); n != 4+map[bool]int{true: 0, false: 1}[tt.create] {
				t.Errorf("calls recorded %+v, want every call, failed ones included", calls)
			}
		})
	}
}

func TestANodeClassNotReady(t *testing.T) {
	ctx := context.Background()
	p := newProvider()
	pool := func(class string) *karpv1.NodePool {
		return &karpv1.NodePool{Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: class},
		}}}}
	}
	instanceTypes := func(class string) string {
		types, err := p.InstanceTypes(ctx, pool(class))
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("%d types", len(types))
	}
	create := func(class string) string {
		nc := claim("on-" + class)
		nc.Spec.NodeClassRef.Name = class
		_, err := p.Create(ctx, nc)
		return outcome(err)
	}
	p.SetNodeClassNotReady("missing", errors.New(`EC2NodeClass "missing" not found`))
	got := []string{instanceTypes("missing"), instanceTypes("default"), create("missing"), create("default")}
	p.SetNodeClassNotReady("missing", nil)
	got = append(got, instanceTypes("missing"), create("missing"))
	want := []string{`node class not ready: EC2NodeClass "missing" not found`, "2 types", "node class not ready", "ok", "2 types", "ok"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("InstanceTypes and Create while the node class is not ready, then ready (-want +got):\n%s", diff)
	}
}

// TestConcurrentCallsLaunchOneInstanceEach runs Creates, Gets, Lists and Deletes at once
// (under -race): every NodeClaim gets its own instance and every call is recorded.
func TestConcurrentCallsLaunchOneInstanceEach(t *testing.T) {
	ctx := context.Background()
	p := newProvider()
	const n = 50
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			nc, err := p.Create(ctx, claim(fmt.Sprintf("nc-%d", i)))
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = nc.Status.ProviderID
			if _, err := p.Get(ctx, nc.Status.ProviderID); err != nil {
				t.Error(err)
			}
			if _, err := p.List(ctx); err != nil {
				t.Error(err)
			}
			if i%2 == 0 {
				if err := p.Delete(ctx, nc); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	distinct := map[string]bool{}
	for _, id := range ids {
		distinct[id] = true
	}
	listed, err := p.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	calls := p.Calls()
	got := []int{len(distinct), len(listed), len(calls.Create), len(calls.Delete)}
	if diff := cmp.Diff([]int{n, n / 2, n, n / 2}, got); diff != "" {
		t.Errorf("distinct provider IDs, live instances, Creates and Deletes recorded (-want +got):\n%s", diff)
	}
}
