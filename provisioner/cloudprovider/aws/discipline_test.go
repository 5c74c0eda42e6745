package aws

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
)

// deleteTemplates deletes every launch template outside the provider, as a person or a
// script would.
func (h *harness) deleteTemplates(t *testing.T) {
	t.Helper()
	for _, name := range templateNames(t, h) {
		if _, err := h.ec2.DeleteLaunchTemplate(context.Background(), &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(name)}); err != nil {
			t.Fatal(err)
		}
	}
}

// counts returns the endpoint's request counts of the actions, absent ones as 0.
func (h *harness) counts(actions ...string) map[string]int {
	all := h.endpoint.RequestCounts()
	out := map[string]int{}
	for _, a := range actions {
		out[a] = all[a]
	}
	return out
}

var launchActions = []string{"CreateFleet", "DescribeLaunchTemplates", "CreateLaunchTemplate", "GetInstanceProfile", "CreateInstanceProfile"}

func TestCreateRecreatesALaunchTemplateDeletedOutsideTailor(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	first, err := h.provider.Create(ctx, nodeClaim("a", []string{"m5.large"}, "on-demand"))
	if err != nil {
		t.Fatal(err)
	}
	template := first.Annotations[awsv1.LaunchTemplateAnnotationKey]
	if diff := cmp.Diff([]string{template}, templateNames(t, h)); diff != "" {
		t.Fatalf("the NodeClaim names its launch template (-want +got):\n%s", diff)
	}
	h.deleteTemplates(t)
	h.endpoint.ResetRequestCounts()
	// The provider still believes the template exists: CreateFleet says otherwise, per override.
	second, err := h.provider.Create(ctx, nodeClaim("b", []string{"m5.large"}, "on-demand"))
	if err != nil {
		t.Fatalf("Create() after the template was deleted: %v", err)
	}
	want := map[string]int{"CreateFleet": 2, "DescribeLaunchTemplates": 1, "CreateLaunchTemplate": 1, "GetInstanceProfile": 1, "CreateInstanceProfile": 0}
	if diff := cmp.Diff(want, h.counts(launchActions...)); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{template}, templateNames(t, h)); diff != "" {
		t.Errorf("templates after the relaunch (-want +got):\n%s", diff)
	}
	if got := second.Annotations[awsv1.LaunchTemplateAnnotationKey]; got != template {
		t.Errorf("relaunched NodeClaim names template %q, want %q", got, template)
	}
}

func TestCreateRecreatesTheTemplatesOnceWhenCreateFleetKeepsNotFindingThem(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.provider.Create(ctx, nodeClaim("a", []string{"m5.large"}, "on-demand")); err != nil {
		t.Fatal(err)
	}
	h.deleteTemplates(t)
	h.patchFaults(t, `{"failActions":{"CreateFleet":{"code":"InvalidLaunchTemplateName.NotFoundException","message":"The specified launch template does not exist."}}}`)
	h.endpoint.ResetRequestCounts()
	_, err := h.provider.Create(ctx, nodeClaim("b", []string{"m5.large"}, "on-demand"))
	if err == nil || cloudprovider.IsInsufficientCapacityError(err) {
		t.Fatalf("Create() = %v, want the CreateFleet error", err)
	}
	// The request error made the provider forget the template: created again, then one
	// more CreateFleet, and no more.
	want := map[string]int{"CreateFleet": 2, "DescribeLaunchTemplates": 1, "CreateLaunchTemplate": 1, "GetInstanceProfile": 1, "CreateInstanceProfile": 0}
	if diff := cmp.Diff(want, h.counts(launchActions...)); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestLaunchesAskIAMOnlyWhenTheyCreateATemplate(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for _, name := range []string{"a", "b", "c"} {
		if _, err := h.provider.Create(ctx, nodeClaim(name, []string{"m5.large"}, "on-demand")); err != nil {
			t.Fatal(err)
		}
	}
	// After a restart the template is looked up once, and IAM not asked at all.
	restarted := h.newProvider(t, h.clock)
	if _, err := restarted.Create(ctx, nodeClaim("d", []string{"m5.large"}, "on-demand")); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"CreateFleet": 4, "DescribeLaunchTemplates": 2, "CreateLaunchTemplate": 1, "GetInstanceProfile": 1, "CreateInstanceProfile": 1}
	if diff := cmp.Diff(want, h.counts(launchActions...)); diff != "" {
		t.Errorf("requests of four launches (-want +got):\n%s", diff)
	}
}

func TestLaunchTemplatesReferencedByNodeClaimsAreKept(t *testing.T) {
	h := newHarnessWithClock(t, true)
	ctx := context.Background()
	// launched: a NodeClaim was launched from it; launching: a NodeClaim of another pool,
	// not launched yet, uses it (on the other replica, say); unused: neither.
	launched, err := h.provider.Create(ctx, nodeClaim("a", []string{"m5.large"}, "on-demand"))
	if err != nil {
		t.Fatal(err)
	}
	launching := nodeClaim("b", []string{"m5.large"}, "on-demand")
	launching.Labels[karpv1.NodePoolLabelKey] = "batch"
	if _, err := h.provider.Create(ctx, launching); err != nil {
		t.Fatal(err)
	}
	unused, err := h.provider.Create(ctx, nodeClaim("c", []string{"m5.large"}, "spot"))
	if err != nil {
		t.Fatal(err)
	}
	for _, nc := range []*karpv1.NodeClaim{launched, launching} {
		nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"}
		if nc == launching {
			nc.Annotations = nil
		}
		nc.ObjectMeta = metav1.ObjectMeta{Name: nc.Name, Labels: nc.Labels, Annotations: nc.Annotations}
		if err := h.kube.Create(ctx, nc); err != nil {
			t.Fatal(err)
		}
	}
	// A restarted provider remembers no launch; the templates are older than the TTL.
	h.provider = h.newProvider(t, h.clock)
	h.clock.Step(time.Hour)
	deleted, err := h.provider.GarbageCollectLaunchTemplates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{unused.Annotations[awsv1.LaunchTemplateAnnotationKey]}, deleted); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
	// Once the launching NodeClaim is gone, so is its pool's template.
	if err := h.kube.Delete(ctx, launching); err != nil {
		t.Fatal(err)
	}
	if _, err := h.provider.GarbageCollectLaunchTemplates(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{launched.Annotations[awsv1.LaunchTemplateAnnotationKey]}, templateNames(t, h)); diff != "" {
		t.Errorf("templates left (-want +got):\n%s", diff)
	}
}

func TestABrokenClassIsResolvedAgainOnlyAfterItsWait(t *testing.T) {
	h := newHarnessWithClock(t, true)
	ctx := context.Background()
	class := &awsv1.EC2NodeClass{}
	if err := h.kube.Get(ctx, client.ObjectKey{Name: "default"}, class); err != nil {
		t.Fatal(err)
	}
	class.Spec.AMIFamily = aws.String("AL2023")
	class.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{ID: "ami-0000000000000dead"}}
	if err := h.kube.Update(ctx, class); err != nil {
		t.Fatal(err)
	}
	resolutions := func() int { return h.endpoint.RequestCounts()["DescribeImages"] }
	steps := []struct {
		advance time.Duration
		calls   int
		want    int
	}{
		{calls: 10, want: 1},
		{advance: 4 * time.Second, calls: 10, want: 1},
		{advance: time.Second, calls: 10, want: 2},
		{advance: 9 * time.Second, calls: 10, want: 2},
		{advance: time.Second, calls: 10, want: 3},
	}
	for i, step := range steps {
		h.clock.Step(step.advance)
		for range step.calls {
			_, err := h.provider.InstanceTypes(ctx, nodePool())
			if !cloudprovider.IsNodeClassNotReadyError(err) || !strings.Contains(err.Error(), "InvalidAMIID.NotFound") {
				t.Fatalf("step %d: InstanceTypes() = %v, want the class's error", i, err)
			}
		}
		if got := resolutions(); got != step.want {
			t.Errorf("step %d: %d resolutions, want %d", i, got, step.want)
		}
	}
	// A changed spec is resolved at once.
	class.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}}
	class.Spec.AMIFamily = nil
	class.Generation++
	if err := h.kube.Update(ctx, class); err != nil {
		t.Fatal(err)
	}
	if _, err := h.provider.InstanceTypes(ctx, nodePool()); err != nil {
		t.Fatalf("InstanceTypes() after the fix: %v", err)
	}
}

// waitForRefresh waits for the background refresh of the catalog and prices to end.
func (h *harness) waitForRefresh(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		refreshing := h.provider.catalog.Refreshing()
		if !refreshing {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the background refresh did not end")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPricingOutageFallsBackAtOnceAndRetriesWithBackoff(t *testing.T) {
	h := newHarnessWithClock(t, true)
	ctx := context.Background()
	h.patchFaults(t, `{"failActions":{"GetProducts":{"code":"InternalErrorException","status":500}}}`)
	if err := h.provider.CatalogReady(nil); err == nil {
		t.Error("CatalogReady() before the catalog was read = nil, want an error")
	}
	start := time.Now()
	if err := h.provider.LoadCatalog(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the first catalog took %s, want it at once", took)
	}
	if err := h.provider.CatalogReady(nil); err != nil {
		t.Errorf("CatalogReady() = %v, want nil once the catalog is usable", err)
	}
	if got := h.provider.PriceSources().OnDemand; got != PriceSourceEmbedded {
		t.Errorf("on-demand prices from %q, want %q", got, PriceSourceEmbedded)
	}
	if got := availability(t, h.provider, "m5.large"); len(got) != 8 {
		t.Errorf("m5.large has %d offerings, want 8 priced ones", len(got))
	}
	// Housekeeping every minute for 20 minutes: each attempt after the first makes
	// pricing.BackgroundAttempts requests, 1, 2, 4 and then 5 minutes apart.
	counts := map[int]int{0: h.endpoint.RequestCounts()["GetProducts"]}
	for minute := 1; minute <= 20; minute++ {
		h.clock.Step(time.Minute)
		if _, _, err := h.provider.catalog.Get(ctx); err != nil {
			t.Fatal(err)
		}
		h.waitForRefresh(t)
		counts[minute] = h.endpoint.RequestCounts()["GetProducts"]
	}
	var attempts []int
	for minute := 1; minute <= 20; minute++ {
		if counts[minute] > counts[minute-1] {
			attempts = append(attempts, minute)
		}
	}
	if diff := cmp.Diff([]int{1, 3, 7, 12, 17}, attempts); diff != "" {
		t.Errorf("minutes with a GetProducts attempt (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[int]int{0: 1, 10: 10, 20: 16}, map[int]int{0: counts[0], 10: counts[10], 20: counts[20]}); diff != "" {
		t.Errorf("GetProducts requests by minute (-want +got):\n%s", diff)
	}
	if got := h.provider.PriceSources().OnDemand; got != PriceSourceEmbedded {
		t.Errorf("on-demand prices from %q during the outage, want %q", got, PriceSourceEmbedded)
	}
	// Once the API answers again, the next attempt reads its prices.
	h.patchFaults(t, `{"failActions":null}`)
	h.clock.Step(2 * time.Minute)
	if _, _, err := h.provider.catalog.Get(ctx); err != nil {
		t.Fatal(err)
	}
	h.waitForRefresh(t)
	if got := h.provider.PriceSources().OnDemand; got != PriceSourceAPI {
		t.Errorf("on-demand prices from %q after the outage, want %q", got, PriceSourceAPI)
	}
}
