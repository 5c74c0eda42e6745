package scenario

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/tags"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/test/localaws"
)

func TestParseKeepRule(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    KeepRule
		wantErr bool
	}{
		{in: "1/4", want: KeepRule{Kept: 1, Every: 4}},
		{in: "7/10", want: KeepRule{Kept: 7, Every: 10}},
		{in: "0/3", want: KeepRule{Kept: 0, Every: 3}},
		{in: "4", wantErr: true},
		{in: "5/4", wantErr: true},
		{in: "1/0", wantErr: true},
		{in: "a/b", wantErr: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseKeepRule(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseKeepRule(%q) error %v, want error %t", tc.in, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseKeepRule(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func workloadPod(name string, labels map[string]string, cpu, memory string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
			}},
		}}},
	}
}

// group is what a test expects of one Deployment.
type group struct {
	Name     string
	From, To int
	Kept     []int
}

func TestGroupDeploymentsGroupsIdenticalPods(t *testing.T) {
	web := map[string]string{"app": "web-3"}
	c1 := map[string]string{"class": "c1"}
	armOnly := workloadPod("x-1", map[string]string{"app": "x"}, "100m", "128Mi")
	armOnly.Spec.NodeSelector = map[string]string{corev1.LabelArchStable: "arm64"}
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		keep KeepRule
		want []group
	}{
		{
			name: "replicas of one app are one Deployment named after it",
			pods: []*corev1.Pod{
				workloadPod("web-3-0", web, "250m", "256Mi"), workloadPod("web-3-1", web, "250m", "256Mi"),
				workloadPod("web-3-2", web, "250m", "256Mi"), workloadPod("web-3-3", web, "250m", "256Mi"),
			},
			keep: KeepRule{Kept: 1, Every: 4},
			want: []group{{Name: "web-3", From: 4, To: 1, Kept: []int{0}}},
		},
		{
			name: "pods of one class with other requests are other Deployments, named after their requests",
			pods: []*corev1.Pod{
				workloadPod("d-0", c1, "500m", "1Gi"), workloadPod("d-1", c1, "250m", "1Gi"), workloadPod("d-2", c1, "500m", "1Gi"),
			},
			keep: KeepRule{Kept: 7, Every: 10},
			want: []group{{Name: "c1-500m-1gi", From: 2, To: 2, Kept: []int{0, 2}}, {Name: "c1-250m-1gi", From: 1, To: 1, Kept: []int{1}}},
		},
		{
			name: "pods that differ in nothing a name shows get numbered names",
			pods: []*corev1.Pod{workloadPod("x-0", map[string]string{"app": "x"}, "100m", "128Mi"), armOnly},
			keep: KeepRule{Kept: 1, Every: 2},
			want: []group{{Name: "x-100m-128mi", From: 1, To: 1, Kept: []int{0}}, {Name: "x-100m-128mi-2", From: 1, To: 0}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds, err := groupDeployments(tc.pods, tc.keep.Keeps)
			if err != nil {
				t.Fatal(err)
			}
			var got []group
			for _, d := range ds {
				got = append(got, group{Name: d.name, From: d.from, To: d.to, Kept: d.kept})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Deployments (-want +got):\n%s", diff)
			}
		})
	}
}

// podEvent is one informer event of a pod of Deployment "app".
type podEvent struct {
	uid     types.UID
	created time.Time
	evicted bool
	deleted bool
}

func (e podEvent) object() any {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: string(e.uid), UID: e.uid, CreationTimestamp: metav1.NewTime(e.created), Labels: map[string]string{DeploymentLabel: "app"},
	}}
	if e.evicted {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: evictedReason}}
	}
	if e.deleted {
		// A deletion the informer saw only by relisting.
		return toolscache.DeletedFinalStateUnknown{Key: "default/" + p.Name, Obj: p}
	}
	return p
}

// counts are the figures of a result a watch test checks.
type counts struct {
	Evictions, EvictedTwice, OtherDeletions int
}

func TestWatchTellsEvictionsFromDeletions(t *testing.T) {
	long := time.Now().Add(-time.Hour)
	later := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name string
		// before happen before the scale-down, after after it.
		before, after []podEvent
		want          counts
	}{
		{
			name:  "a pod deleted after the Eviction API marked it is an eviction",
			after: []podEvent{{uid: "a", created: long, evicted: true}, {uid: "a", created: long, evicted: true, deleted: true}},
			want:  counts{Evictions: 1},
		},
		{
			name:  "an eviction seen only in the final state counts too",
			after: []podEvent{{uid: "a", created: long, evicted: true, deleted: true}},
			want:  counts{Evictions: 1},
		},
		{
			name:  "a pod created after the scale-down and evicted replaced an evicted pod",
			after: []podEvent{{uid: "a", created: long, evicted: true}, {uid: "b", created: later, evicted: true}},
			want:  counts{Evictions: 2, EvictedTwice: 1},
		},
		{
			name:   "an eviction before the scale-down is not one of its evictions",
			before: []podEvent{{uid: "a", created: long, evicted: true}},
			want:   counts{},
		},
		{
			name: "deletions without eviction up to the replicas scaled down are the scale-down's",
			after: []podEvent{
				{uid: "a", created: long, deleted: true}, {uid: "b", created: long, deleted: true},
			},
			want: counts{},
		},
		{
			name: "deletions without eviction beyond the replicas scaled down are counted",
			after: []podEvent{
				{uid: "a", created: long, deleted: true}, {uid: "b", created: long, deleted: true}, {uid: "c", created: long, deleted: true},
			},
			want: counts{OtherDeletions: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newScaleDownWatch([]*deployment{{name: "app", from: 4, to: 2}})
			for _, e := range tc.before {
				w.pod(e.object(), e.deleted)
			}
			w.startScaleDown()
			for _, e := range tc.after {
				w.pod(e.object(), e.deleted)
			}
			r := &ScaleDownResult{}
			w.record(r)
			got := counts{Evictions: r.Evictions, EvictedTwice: r.EvictedTwice, OtherDeletions: r.OtherDeletions}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("counts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWatchCountsBudgetViolationsOnceTheBudgetWasMet(t *testing.T) {
	// status is a budget's status as the PodDisruptionBudget controller writes it.
	type status struct {
		generation, observed int64
		healthy, desired     int32
	}
	for _, tc := range []struct {
		name string
		// ran says whether the Deployment's pods all ran before the statuses came.
		ran      bool
		statuses []status
		want     int
	}{
		{name: "fewer healthy pods than desired after the budget was met is a violation", ran: true,
			statuses: []status{{1, 1, 3, 3}, {1, 1, 2, 3}}, want: 1},
		{name: "each such status counts", ran: true,
			statuses: []status{{1, 1, 3, 3}, {1, 1, 2, 3}, {1, 1, 1, 3}, {1, 1, 3, 3}}, want: 2},
		{name: "a budget not met yet is no violation, though the pods ran: its status lags them", ran: true,
			statuses: []status{{1, 1, 1, 2}, {1, 1, 2, 2}}},
		{name: "before the Deployment's pods all ran nothing counts",
			statuses: []status{{1, 1, 3, 3}, {1, 1, 2, 3}}},
		{name: "a status of an older generation is none", ran: true,
			statuses: []status{{1, 1, 3, 3}, {2, 1, 0, 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newScaleDownWatch([]*deployment{{name: "app", from: 4, to: 2}})
			w.ran["app"] = tc.ran
			for _, st := range tc.statuses {
				w.pdb(&policyv1.PodDisruptionBudget{
					ObjectMeta: metav1.ObjectMeta{Name: "app", Generation: st.generation},
					Status:     policyv1.PodDisruptionBudgetStatus{ObservedGeneration: st.observed, CurrentHealthy: st.healthy, DesiredHealthy: st.desired},
				})
			}
			r := &ScaleDownResult{}
			w.record(r)
			if r.PDBViolations != tc.want {
				t.Errorf("%d violations, want %d (%v)", r.PDBViolations, tc.want, r.Violations)
			}
		})
	}
}

func TestWholeNodePricesAreTheNodeClaimsPricesAsLaunched(t *testing.T) {
	live := []localaws.InstanceSummary{
		{ID: "i-1", PricePerHour: 0.5},
		{ID: "i-2", PricePerHour: 0.25},
		// Launched, its provider ID not written yet: its tag names its NodeClaim.
		{ID: "i-3", PricePerHour: 0.75, Tags: map[string]string{tags.NodeClaim: "launching"}},
		// Its NodeClaim is gone.
		{ID: "i-4", PricePerHour: 1, Tags: map[string]string{tags.NodeClaim: "deleted"}},
	}
	planned, err := json.Marshal(cloudprovider.PriceParts{Instance: 0.75, Volumes: 0.003})
	if err != nil {
		t.Fatal(err)
	}
	claims := []karpv1.NodeClaim{
		{Status: karpv1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/i-1",
			Price: &karpv1.Price{PerHour: "0.5122", Instance: "0.5", Volumes: "0.0022", PublicIPv4: "0.01"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "launching", Annotations: map[string]string{cloudprovider.PlannedPriceAnnotationKey: string(planned)}}},
	}
	prices, unpriced := WholeNodePrices(live, claims)
	if diff := cmp.Diff(map[string]float64{"i-1": 0.5122, "i-2": 0.25, "i-3": 0.753, "i-4": 1}, prices, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("prices (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"i-2", "i-4"}, unpriced); diff != "" {
		t.Errorf("unpriced (-want +got):\n%s", diff)
	}
}

func TestByZoneSetsTheEndBesideTheFreshPlan(t *testing.T) {
	live := []localaws.InstanceSummary{
		{ID: "i-1", Zone: "us-east-1a", PricePerHour: 0.5},
		{ID: "i-2", Zone: "us-east-1a", PricePerHour: 0.25},
		{ID: "i-3", Zone: "us-east-1c", PricePerHour: 1},
	}
	pods := map[string]int{"us-east-1a": 7, "us-east-1c": 2}
	onePod := []*corev1.Pod{workloadPod("p", nil, "1", "1Gi")}
	fresh := []packing.NewNodeClaim{
		{Pods: onePod, Cheapest: packing.Choice{Zone: "us-east-1a", Price: 0.5}},
		{Pods: append(onePod, onePod...), Cheapest: packing.Choice{Zone: "us-east-1b", Price: 0.75}},
	}
	// The nodes priced whole: each its instance and a cent for its volume.
	prices := map[string]float64{"i-1": 0.51, "i-2": 0.26, "i-3": 1.01}
	want := []ZoneCost{
		{Zone: "us-east-1a", Cost: 0.77, Nodes: 2, Pods: 7, Fresh: 0.5, FreshNodes: 1, FreshPods: 1},
		{Zone: "us-east-1b", Fresh: 0.75, FreshNodes: 1, FreshPods: 2},
		{Zone: "us-east-1c", Cost: 1.01, Nodes: 1, Pods: 2},
	}
	if diff := cmp.Diff(want, byZone(live, prices, pods, fresh), cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("byZone (-want +got):\n%s", diff)
	}
}
