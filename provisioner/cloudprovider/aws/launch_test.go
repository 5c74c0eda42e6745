package aws

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/instance"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/launch"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/pricing"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/tags"
	"github.com/tailor-autoscaler/tailor/test/localaws"
)

var zones = []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"}

// pools are the capacity pools of the instance type in every zone.
func pools(instanceType, capacityType string) []localaws.CapacityPool {
	var out []localaws.CapacityPool
	for _, z := range zones {
		out = append(out, localaws.CapacityPool{InstanceType: instanceType, Zone: z, CapacityType: capacityType})
	}
	return out
}

// patchFaults changes the endpoint's faults through its admin API.
func (h *harness) patchFaults(t *testing.T, body string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPatch, h.url+"/_admin/faults", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("patching faults %s: %s", body, resp.Status)
	}
}

// availability returns, for the instance type's offerings, "zone/capacity type" → Available.
func availability(t *testing.T, p *Provider, instanceType string) map[string]bool {
	t.Helper()
	its, err := p.InstanceTypes(context.Background(), nodePool())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, it := range its {
		if it.Name == instanceType {
			for _, o := range it.Offerings {
				out[o.Zone+"/"+o.CapacityType] = o.Available
			}
		}
	}
	return out
}

// allAvailable is the availability of a type sold spot and on-demand in every zone, with
// the capacity types and zones listed unavailable.
func allAvailable(unavailable ...string) map[string]bool {
	out := map[string]bool{}
	for _, z := range zones {
		for _, ct := range []string{karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand} {
			out[z+"/"+ct] = true
		}
	}
	for _, u := range unavailable {
		out[u] = false
	}
	return out
}

func spotIn(zs ...string) []string {
	var out []string
	for _, z := range zs {
		out = append(out, z+"/spot")
	}
	return out
}

func TestCreateUnderInjectedCapacityErrors(t *testing.T) {
	tests := []struct {
		name             string
		insufficient     []localaws.CapacityPool
		faults           string
		capacityTypes    []string
		wantCapacityType string
		wantErr          string
		wantFleets       int
		wantUnavailable  []string
	}{
		{
			name:             "spot exhausted falls back to on-demand at once",
			insufficient:     pools("m5.large", "spot"),
			capacityTypes:    []string{"spot", "on-demand"},
			wantCapacityType: karpv1.CapacityTypeOnDemand,
			wantFleets:       2,
			wantUnavailable:  spotIn(zones...),
		},
		{
			name:             "spot exhausted in some zones launches spot in another",
			insufficient:     pools("m5.large", "spot")[:3],
			capacityTypes:    []string{"spot", "on-demand"},
			wantCapacityType: karpv1.CapacityTypeSpot,
			wantFleets:       1,
			wantUnavailable:  spotIn(zones[:3]...),
		},
		{
			name:            "spot only, nothing left",
			insufficient:    pools("m5.large", "spot"),
			capacityTypes:   []string{"spot"},
			wantErr:         "InsufficientInstanceCapacity",
			wantFleets:      1,
			wantUnavailable: spotIn(zones...),
		},
		{
			name:          "fleets that launch nothing are retried with what remains, then give up",
			faults:        `{"fleetMaxInstances":0,"fleetErrorCode":"UnfulfillableCapacity"}`,
			capacityTypes: []string{"spot", "on-demand"},
			wantErr:       "UnfulfillableCapacity",
			wantFleets:    launch.MaxAttempts,
			// Each fleet names the pool it would have launched in: the cheapest spot
			// offerings go first.
			wantUnavailable: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.setInsufficientCapacity(t, tt.insufficient)
			if tt.faults != "" {
				h.patchFaults(t, tt.faults)
			}
			h.endpoint.ResetRequestCounts()
			start := time.Now()
			launched, err := h.provider.Create(context.Background(), nodeClaim("ice", []string{"m5.large"}, tt.capacityTypes...))
			t.Logf("Create took %s", time.Since(start))
			if tt.wantErr != "" {
				if !cloudprovider.IsInsufficientCapacityError(err) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Create() error = %v, want an InsufficientCapacityError with %s", err, tt.wantErr)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if got := launched.Labels[karpv1.CapacityTypeLabelKey]; got != tt.wantCapacityType {
					t.Errorf("capacity type %q, want %q", got, tt.wantCapacityType)
				}
			}
			if got := h.endpoint.RequestCounts()["CreateFleet"]; got != tt.wantFleets {
				t.Errorf("%d CreateFleet requests, want %d", got, tt.wantFleets)
			}
			if tt.wantUnavailable != nil {
				if diff := cmp.Diff(allAvailable(tt.wantUnavailable...), availability(t, h.provider, "m5.large")); diff != "" {
					t.Errorf("m5.large offerings available to the planner (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestUnavailableOfferingsExpire(t *testing.T) {
	h := newHarnessWithClock(t, true)
	h.setInsufficientCapacity(t, pools("m5.large", "spot"))
	if _, err := h.provider.Create(context.Background(), nodeClaim("f", []string{"m5.large"}, "spot", "on-demand")); err != nil {
		t.Fatal(err)
	}
	if got := metricValue(t, "tailor_cloudprovider_errors_total", map[string]string{"service": "EC2", "operation": "CreateFleet", "code": "InsufficientInstanceCapacity"}); got < float64(len(zones)) {
		t.Errorf("tailor_cloudprovider_errors_total{operation=CreateFleet,code=InsufficientInstanceCapacity} = %v, want one per spot pool at least", got)
	}
	// The pools recover at once; the provider keeps avoiding them for the TTL.
	h.setInsufficientCapacity(t, nil)
	steps := []struct {
		advance time.Duration
		want    map[string]bool
		// wantMetric is the unavailable spot offerings the metric reports.
		wantMetric float64
	}{
		{advance: 0, want: allAvailable(spotIn(zones...)...), wantMetric: float64(len(zones))},
		{advance: DefaultUnavailableOfferingsTTL - time.Second, want: allAvailable(spotIn(zones...)...), wantMetric: float64(len(zones))},
		{advance: time.Second, want: allAvailable(), wantMetric: 0},
	}
	for _, step := range steps {
		h.clock.Step(step.advance)
		if diff := cmp.Diff(step.want, availability(t, h.provider, "m5.large")); diff != "" {
			t.Errorf("after %s more: available (-want +got):\n%s", step.advance, diff)
		}
		if got := metricValue(t, "tailor_cloudprovider_unavailable_offerings", map[string]string{"capacity_type": karpv1.CapacityTypeSpot}); got != step.wantMetric {
			t.Errorf("after %s more: tailor_cloudprovider_unavailable_offerings{capacity_type=spot} = %v, want %v", step.advance, got, step.wantMetric)
		}
	}
	if got := metricValue(t, "tailor_cloudprovider_refreshed_timestamp_seconds", map[string]string{"kind": "instance-types"}); got <= 0 {
		t.Errorf("tailor_cloudprovider_refreshed_timestamp_seconds{kind=instance-types} = %v, want the time of the catalog's read", got)
	}
	launched, err := h.provider.Create(context.Background(), nodeClaim("g", []string{"m5.large"}, "spot", "on-demand"))
	if err != nil {
		t.Fatal(err)
	}
	if got := launched.Labels[karpv1.CapacityTypeLabelKey]; got != karpv1.CapacityTypeSpot {
		t.Errorf("capacity type %q after the TTL, want spot again", got)
	}
}

func TestThrottledRequestsAreRetried(t *testing.T) {
	h := newHarness(t)
	h.patchFaults(t, `{"throttleRate":0.5}`)
	its, err := h.provider.InstanceTypes(context.Background(), nodePool())
	if err != nil || len(its) < 1000 {
		t.Fatalf("InstanceTypes() under throttling = %d types, %v; want the catalog", len(its), err)
	}
	if _, err := h.provider.Create(context.Background(), nodeClaim("h", []string{"m5.large"}, "spot", "on-demand")); err != nil {
		t.Fatalf("Create() under throttling: %v", err)
	}
	counts := h.endpoint.RequestCounts()
	total := 0
	for _, n := range counts {
		total += n
	}
	t.Logf("%d requests under 50%% throttling: %v", total, counts)
	if got := errorsCounted(t, "RequestLimitExceeded"); got == 0 {
		t.Error("tailor_cloudprovider_errors_total counted no RequestLimitExceeded under throttling")
	}
	if got := h.endpoint.Instances(); len(got) != 1 {
		t.Errorf("%d instances, want 1", len(got))
	}
}

func TestGetsAndDeletesAreBatched(t *testing.T) {
	const n = 20
	h := newHarnessWithClock(t, true)
	ctx := context.Background()
	var claims []*karpv1.NodeClaim
	for i := range n {
		nc := nodeClaim(string(rune('a'+i)), []string{"m5.large"}, "on-demand")
		launched, err := h.provider.Create(ctx, nc)
		if err != nil {
			t.Fatal(err)
		}
		nc.Status = launched.Status
		claims = append(claims, nc)
	}
	h.endpoint.ResetRequestCounts()

	// step releases a batch once every caller waits in it.
	step := func(size func() int) {
		deadline := time.Now().Add(10 * time.Second)
		for size() < n && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		h.clock.Step(instance.BatchWindow)
	}
	describes := func() int { d, _ := h.provider.instances.Pending(); return d }
	terminations := func() int { _, t := h.provider.instances.Pending(); return t }
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, nc := range claims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := h.provider.Get(ctx, nc.Status.ProviderID)
			if err == nil && got.Status.ProviderID != nc.Status.ProviderID {
				err = errors.New("wrong instance " + got.Status.ProviderID)
			}
			errs[i] = err
		}()
	}
	step(describes)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for i, nc := range claims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = h.provider.Delete(ctx, nc)
		}()
	}
	step(describes)
	step(terminations)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"DescribeInstances": 2, "TerminateInstances": 1}
	if diff := cmp.Diff(want, h.endpoint.RequestCounts()); diff != "" {
		t.Errorf("requests for %d Gets then %d Deletes (-want +got):\n%s", n, n, diff)
	}
	for _, i := range h.endpoint.Instances() {
		if i.State != "shutting-down" {
			t.Errorf("instance %s is %s, want shutting-down", i.ID, i.State)
		}
	}
}

func TestBatchedDescribeReportsUnknownInstancesOneByOne(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	launched, err := h.provider.Create(ctx, nodeClaim("i", []string{"m5.large"}, "on-demand"))
	if err != nil {
		t.Fatal(err)
	}
	got := h.provider.instances.DescribeIDs(ctx, []string{"i-0123456789abcdef0", providerInstanceID(t, launched)})
	if !cloudprovider.IsNodeClaimNotFoundError(got["i-0123456789abcdef0"].Err) || got[providerInstanceID(t, launched)].Err != nil {
		t.Errorf("describe = %+v, want not found for the unknown id and the instance for the other", got)
	}
	terminated := h.provider.instances.TerminateIDs(ctx, []string{"i-0123456789abcdef0", providerInstanceID(t, launched)})
	if !cloudprovider.IsNodeClaimNotFoundError(terminated["i-0123456789abcdef0"].Err) || terminated[providerInstanceID(t, launched)].Err != nil {
		t.Errorf("terminate = %+v, want not found for the unknown id only", terminated)
	}
}

func providerInstanceID(t *testing.T, nc *karpv1.NodeClaim) string {
	t.Helper()
	id, err := InstanceIDOf(nc.Status.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestCrashAfterCreateFleetAdoptsTheInstanceOnRestart(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	var crashedWith string
	h.provider.afterCreateFleet = func(_ context.Context, instanceID string) error {
		crashedWith = instanceID
		cancel()
		return context.Canceled
	}
	if _, err := h.provider.Create(ctx, nodeClaim("j", []string{"m5.large", "m5.xlarge"}, "spot", "on-demand")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Create() = %v, want the crash", err)
	}

	restarted := h.newProvider(t, h.clock)
	launched, err := restarted.Create(context.Background(), nodeClaim("j", []string{"m5.large", "m5.xlarge"}, "spot", "on-demand"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, i := range h.endpoint.Instances() {
		ids = append(ids, i.ID)
	}
	if diff := cmp.Diff([]string{crashedWith}, ids); diff != "" {
		t.Errorf("instances (-want +got):\n%s", diff)
	}
	if got := providerInstanceID(t, launched); got != crashedWith {
		t.Errorf("Create() after restart returned %s, want the adopted %s", got, crashedWith)
	}
	if launched.Status.Capacity.Cpu().IsZero() || launched.Labels[karpv1.CapacityTypeLabelKey] != karpv1.CapacityTypeSpot {
		t.Errorf("adopted NodeClaim %+v lacks capacity or offering labels", launched)
	}
	if p := launched.Status.Price; p == nil || p.Instance == "" || p.Volumes != "0.002192" {
		t.Errorf("adopted NodeClaim's status.price %+v, want its spot instance and root volume", p)
	}
	if got := h.endpoint.RequestCounts()["CreateFleet"]; got != 1 {
		t.Errorf("%d CreateFleet requests, want 1", got)
	}
}

func TestRetriedCreateFleetReturnsTheSameInstance(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	lc, err := h.provider.launchContext(ctx, nodePool().Spec.Template.Spec.NodeClassRef)
	if err != nil {
		t.Fatal(err)
	}
	nc := nodeClaim("k", []string{"m5.large"}, "on-demand")
	candidates := launch.AllowedOfferings(nc, lc.types)
	var ids []string
	// As after a crash before the instance was tagged visibly: the same request again.
	for range 2 {
		fleet, err := h.newProvider(t, h.clock).launcher.CreateFleet(ctx, nc, lc.Context, candidates, false)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, fleet.InstanceID)
	}
	if ids[0] == "" || ids[0] != ids[1] || len(h.endpoint.Instances()) != 1 {
		t.Errorf("two CreateFleet calls for one NodeClaim launched %v (%d instances), want one instance twice", ids, len(h.endpoint.Instances()))
	}
}

func TestGarbageCollectLaunchTemplates(t *testing.T) {
	h := newHarnessWithClock(t, true)
	ctx := context.Background()
	if _, err := h.provider.Create(ctx, nodeClaim("l", []string{"m5.large"}, "on-demand")); err != nil {
		t.Fatal(err)
	}
	current := templateNames(t, h)
	if len(current) != 1 {
		t.Fatalf("launch templates %v, want the one of the launch", current)
	}
	// A template of an older AMI, and one that is not this cluster's.
	for name, tagged := range map[string]map[string]string{
		"tailor/" + testCluster + "/old": {tags.ClusterKey(testCluster): "owned"},
		"someone-else":                   {"team": "web"},
	} {
		_, err := h.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
			LaunchTemplateName: aws.String(name),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String("ami-0123456789abcdef0")},
			TagSpecifications:  []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: tags.EC2(tagged)}},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name        string
		advance     time.Duration
		launch      bool
		wantDeleted []string
	}{
		{name: "all recent", advance: 5 * time.Minute},
		{name: "the current one is used again", advance: time.Minute, launch: true},
		{name: "the old one is unused for the TTL", advance: 5 * time.Minute, wantDeleted: []string{"tailor/" + testCluster + "/old"}},
		{name: "the current one too, once unused", advance: 10 * time.Minute, wantDeleted: current},
	}
	for i, step := range steps {
		h.clock.Step(step.advance)
		if step.launch {
			if _, err := h.provider.Create(ctx, nodeClaim("m", []string{"m5.large"}, "on-demand")); err != nil {
				t.Fatal(err)
			}
		}
		deleted, err := h.provider.GarbageCollectLaunchTemplates(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(step.wantDeleted, deleted); diff != "" {
			t.Errorf("step %d (%s): deleted (-want +got):\n%s", i, step.name, diff)
		}
	}
	if diff := cmp.Diff([]string{"someone-else"}, templateNames(t, h)); diff != "" {
		t.Errorf("templates left (-want +got):\n%s", diff)
	}
	// A launch after collection recreates the template it needs.
	if _, err := h.provider.Create(ctx, nodeClaim("n", []string{"m5.large"}, "on-demand")); err != nil {
		t.Fatalf("Create() after the template was collected: %v", err)
	}
}

func templateNames(t *testing.T, h *harness) []string {
	t.Helper()
	out, err := h.ec2.DescribeLaunchTemplates(context.Background(), &ec2.DescribeLaunchTemplatesInput{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, lt := range out.LaunchTemplates {
		names = append(names, aws.ToString(lt.LaunchTemplateName))
	}
	sort.Strings(names)
	return names
}

func TestPriceSources(t *testing.T) {
	tests := []struct {
		name   string
		faults string
		want   PriceSources
	}{
		{name: "from AWS", faults: `{}`, want: PriceSources{OnDemand: PriceSourceAPI, Spot: PriceSourceAPI}},
		{
			name:   "embedded when AWS refuses",
			faults: `{"throttleRate":1,"throttleActions":["GetProducts","DescribeSpotPriceHistory"]}`,
			want:   PriceSources{OnDemand: PriceSourceEmbedded, Spot: PriceSourceEmbedded},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.patchFaults(t, tt.faults)
			if got := availability(t, h.provider, "m5.large"); len(got) != 8 {
				t.Errorf("m5.large has %d offerings, want 8 priced ones", len(got))
			}
			if diff := cmp.Diff(tt.want, h.provider.PriceSources()); diff != "" {
				t.Errorf("price sources (-want +got):\n%s", diff)
			}
			if got := metricValue(t, "tailor_cloudprovider_price_source", map[string]string{"kind": pricing.KindOnDemand, "source": tt.want.OnDemand}); got != 1 {
				t.Errorf("tailor_cloudprovider_price_source{kind=on-demand,source=%s} = %v, want 1", tt.want.OnDemand, got)
			}
		})
	}
}

func TestStalePricesRefreshInTheBackground(t *testing.T) {
	h := newHarnessWithClock(t, true)
	ctx := context.Background()
	if _, err := h.provider.InstanceTypes(ctx, nodePool()); err != nil {
		t.Fatal(err)
	}
	h.clock.Step(h.provider.opts.SpotPriceTTL)
	h.endpoint.ResetRequestCounts()
	// Every price read now fails slowly; planning must not wait for it.
	h.patchFaults(t, `{"throttleRate":1,"throttleActions":["DescribeSpotPriceHistory"]}`)
	if _, err := h.provider.InstanceTypes(ctx, nodePool()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for h.endpoint.RequestCounts()["DescribeSpotPriceHistory"] < pricing.BackgroundAttempts && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := h.endpoint.RequestCounts()["DescribeSpotPriceHistory"]; got != pricing.BackgroundAttempts {
		t.Errorf("%d DescribeSpotPriceHistory requests in the background, want %d attempts", got, pricing.BackgroundAttempts)
	}
	if got := h.provider.PriceSources().Spot; got != PriceSourceAPI {
		t.Errorf("spot price source %q after a failed refresh, want the cached %q", got, PriceSourceAPI)
	}
}

// errorsCounted sums tailor_cloudprovider_errors_total over services and operations for code.
func errorsCounted(t *testing.T, code string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "tailor_cloudprovider_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" && l.GetValue() == code {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

func TestLaunchPricesChooseTheOnDemandTypeLaunched(t *testing.T) {
	raiseM5Large := func(_ context.Context, _ string, types []*cloudprovider.InstanceType) ([]*cloudprovider.InstanceType, error) {
		out := make([]*cloudprovider.InstanceType, len(types))
		for i, it := range types {
			out[i] = it
			if it.Name == "m5.large" {
				changed := *it
				changed.Offerings = append([]cloudprovider.Offering(nil), it.Offerings...)
				for j := range changed.Offerings {
					changed.Offerings[j].Price++
				}
				out[i] = &changed
			}
		}
		return out, nil
	}
	tests := []struct {
		name         string
		launchPrices func(context.Context, string, []*cloudprovider.InstanceType) ([]*cloudprovider.InstanceType, error)
		want         string
	}{
		{name: "by EC2's lowest price", want: "m5.large"},
		{name: "in the order of the launch prices, prioritized", launchPrices: raiseM5Large, want: "m5.xlarge"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			p := h.newProvider(t, h.clock)
			p.opts.LaunchPrices = tt.launchPrices
			launched, err := p.Create(context.Background(), nodeClaim("l", []string{"m5.large", "m5.xlarge"}, "on-demand"))
			if err != nil {
				t.Fatal(err)
			}
			if got := launched.Labels["node.kubernetes.io/instance-type"]; got != tt.want {
				t.Errorf("launched %s, want %s", got, tt.want)
			}
		})
	}
}

// With prefix delegation the AMIs' bootstrap would count one address per pod, so each
// instance type's max pods go into the user data, one launch template per value.
func TestPrefixDelegationPutsMaxPodsInTheUserData(t *testing.T) {
	type launch struct {
		// MaxPods per instance type in the user data, "" when the bootstrap computes it.
		MaxPods   map[string]string
		Templates int
	}
	tests := []struct {
		prefixDelegation bool
		want             launch
	}{
		{prefixDelegation: false, want: launch{MaxPods: map[string]string{"m5.large": "", "t3.nano": "", "m4.large": ""}, Templates: 1}},
		// 3 x 9 x 16 + 2 capped at 110; 2 x 1 x 16 + 2; Xen takes no prefixes: 2 x 9 + 2.
		{prefixDelegation: true, want: launch{MaxPods: map[string]string{"m5.large": "110", "t3.nano": "34", "m4.large": "20"}, Templates: 3}},
	}
	maxPods := regexp.MustCompile(`maxPods: (\d+)`)
	for _, tt := range tests {
		t.Run(fmt.Sprintf("prefix delegation %t", tt.prefixDelegation), func(t *testing.T) {
			h := newHarness(t)
			h.reconfigure(t, func(o *Options) { o.PrefixDelegation = tt.prefixDelegation })
			lc, err := h.provider.launchContext(context.Background(), nodePool().Spec.Template.Spec.NodeClassRef)
			if err != nil {
				t.Fatal(err)
			}
			got := launch{MaxPods: map[string]string{}}
			templates := map[string]bool{}
			for _, it := range lc.types {
				if _, ok := tt.want.MaxPods[it.Name]; !ok {
					continue
				}
				name, spec, err := h.provider.launcher.Template(nodeClaim("pd", []string{it.Name}, "on-demand"), lc.Context, it, cloudprovider.Offering{CapacityType: karpv1.CapacityTypeOnDemand})
				if err != nil {
					t.Fatal(err)
				}
				userData, err := base64.StdEncoding.DecodeString(spec.UserData)
				if err != nil {
					t.Fatal(err)
				}
				got.MaxPods[it.Name] = ""
				if m := maxPods.FindSubmatch(userData); m != nil {
					got.MaxPods[it.Name] = string(m[1])
				}
				templates[name] = true
			}
			got.Templates = len(templates)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("max pods in the user data (-want +got):\n%s", diff)
			}
		})
	}
}
