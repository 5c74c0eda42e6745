package aws

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/test/localaws"
)

const testCluster = "test-cluster"

// harness is the provider against the local AWS endpoint, through the real SDK over HTTP.
type harness struct {
	provider *Provider
	endpoint *localaws.Server
	url      string
	clock    *clocktesting.FakeClock
	cfg      aws.Config
	kube     client.Client
	// ec2 calls the endpoint outside the provider, as a person or a script would.
	ec2 *ec2.Client
	// providerClock is the provider's clock; configure, when set, changes the options of
	// the providers newProvider returns.
	providerClock clock.Clock
	configure     func(*Options)
}

// newHarness starts the endpoint on a fake clock, with a provider on the real clock.
func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessWithClock(t, false)
}

// newHarnessWithClock starts the endpoint on a fake clock, with a provider on the same fake
// clock when fakeProviderClock is set.
func newHarnessWithClock(t *testing.T, fakeProviderClock bool) *harness {
	t.Helper()
	return newHarnessWithEndpoint(t, fakeProviderClock, localaws.Options{})
}

// newHarnessWithEndpoint starts the endpoint with the options on a fake clock, for the test's
// cluster.
func newHarnessWithEndpoint(t *testing.T, fakeProviderClock bool, opts localaws.Options) *harness {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	opts.ClusterName, opts.Clock, opts.ShutdownDelay = testCluster, clk, time.Second
	endpoint, err := localaws.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(endpoint)
	t.Cleanup(srv.Close)
	cfg := aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(srv.URL),
		// The provider's retryer, without the waits.
		Retryer: func() aws.Retryer {
			return NewRetryer(retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil }))
		},
	}
	class := &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "class-uid"},
		Spec: awsv1.EC2NodeClassSpec{
			Role:                       "NodeRole",
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}},
		},
	}
	scheme := runtime.NewScheme()
	if err := awsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := karpv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(class).Build()
	h := &harness{endpoint: endpoint, url: srv.URL, clock: clk, cfg: cfg, kube: kube, ec2: NewClients(cfg).EC2}
	var providerClock clock.Clock = clock.RealClock{}
	if fakeProviderClock {
		providerClock = clk
	}
	h.providerClock = providerClock
	h.provider = h.newProvider(t, providerClock)
	return h
}

// reconfigure replaces the provider with one whose options configure changes, as a sidecar
// started with other flags.
func (h *harness) reconfigure(t *testing.T, configure func(*Options)) {
	t.Helper()
	prev := h.configure
	h.configure = func(o *Options) {
		if prev != nil {
			prev(o)
		}
		configure(o)
	}
	h.provider = h.newProvider(t, h.providerClock)
}

// newProvider returns another provider against the endpoint, as after a restart.
func (h *harness) newProvider(t *testing.T, clk clock.Clock) *Provider {
	t.Helper()
	opts := Options{
		Cluster:           ClusterInfo{Name: testCluster, Endpoint: "https://127.0.0.1:6443", CABundle: "Y2E=", ServiceCIDR: "10.100.0.0/16"},
		Region:            "us-east-1",
		KubernetesVersion: localaws.DefaultKubernetesVersion,
	}
	if h.configure != nil {
		h.configure(&opts)
	}
	p, err := New(opts, NewClients(h.cfg), h.kube, h.kube, clk)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (h *harness) setInsufficientCapacity(t *testing.T, pools []localaws.CapacityPool) {
	t.Helper()
	body, err := json.Marshal(pools)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPut, h.url+"/_admin/insufficient-capacity", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("setting insufficient capacity: %s", resp.Status)
	}
}

func nodePool() *karpv1.NodePool {
	return &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: "general"},
		Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
		}}},
	}
}

func nodeClaim(uid string, types []string, capacityTypes ...string) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "general-" + uid, UID: typesUID(uid), Labels: map[string]string{karpv1.NodePoolLabelKey: "general"}},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
				{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: types},
				{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: capacityTypes},
			},
		},
	}
}

func typesUID(s string) types.UID { return types.UID("uid-" + s) }

func TestInstanceTypesDescribeCapacityOverheadAndOfferings(t *testing.T) {
	h := newHarness(t)
	its, err := h.provider.InstanceTypes(context.Background(), nodePool())
	if err != nil {
		t.Fatal(err)
	}
	if len(its) < 1000 {
		t.Fatalf("got %d instance types, want the whole catalog", len(its))
	}
	var m5 *cloudprovider.InstanceType
	for _, it := range its {
		if it.Name == "m5.large" {
			m5 = it
		}
	}
	if m5 == nil {
		t.Fatal("m5.large missing")
	}
	wantLabels := map[string]string{
		corev1.LabelInstanceTypeStable:             "m5.large",
		corev1.LabelArchStable:                     "amd64",
		corev1.LabelOSStable:                       "linux",
		karpv1.InstanceCategoryLabelKey:            "m",
		karpv1.InstanceFamilyLabelKey:              "m5",
		karpv1.InstanceGenerationLabelKey:          "5",
		karpv1.InstanceSizeLabelKey:                "large",
		karpv1.InstanceCPULabelKey:                 "2",
		karpv1.InstanceMemoryLabelKey:              "8192",
		karpv1.InstanceHypervisorLabelKey:          "nitro",
		karpv1.InstanceCPUManufacturerLabelKey:     "intel",
		karpv1.InstanceNetworkBandwidthLabelKey:    "750",
		karpv1.InstanceEncryptionInTransitLabelKey: "false",
		karpv1.InstanceEBSBandwidthLabelKey:        "4750",
		karpv1.InstanceCapabilityFlexLabelKey:      "false",
	}
	if diff := cmp.Diff(wantLabels, m5.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	quantities := func(l corev1.ResourceList) map[string]string {
		out := map[string]string{}
		for k, v := range l {
			out[string(k)] = v.String()
		}
		return out
	}
	// 8192Mi less 7.5% VM overhead; 3 ENIs x (10-1) + 2 pods; 9 branch interfaces of the
	// trunking table; the EKS kube-reserved formula.
	if diff := cmp.Diff(map[string]string{"cpu": "2", "memory": "7577Mi", "pods": "29", "ephemeral-storage": "20Gi", "vpc.amazonaws.com/pod-eni": "9"}, quantities(m5.Capacity)); diff != "" {
		t.Errorf("capacity (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"cpu": "70m", "memory": "674Mi", "ephemeral-storage": "3Gi"}, quantities(m5.Overhead)); diff != "" {
		t.Errorf("overhead (-want +got):\n%s", diff)
	}
	zones := map[string]bool{}
	for _, o := range m5.Offerings {
		zones[o.Zone] = true
		if o.Price <= 0 || !o.Available {
			t.Errorf("offering %+v: want a positive price and available", o)
		}
		if o.CapacityType == karpv1.CapacityTypeOnDemand && o.Price != 0.096 {
			t.Errorf("on-demand price of m5.large in %s = %v, want 0.096 from the Pricing API", o.Zone, o.Price)
		}
	}
	if len(zones) == 0 {
		t.Error("no zones offered m5.large")
	}
}

func TestResolveNodeClass(t *testing.T) {
	h := newHarness(t)
	class := &awsv1.EC2NodeClass{}
	if err := h.provider.kube.Get(context.Background(), client.ObjectKey{Name: "default"}, class); err != nil {
		t.Fatal(err)
	}
	status, err := h.provider.ResolveNodeClass(context.Background(), class)
	if err != nil {
		t.Fatal(err)
	}
	if len(status.Subnets) != 4 || len(status.SecurityGroups) == 0 {
		t.Errorf("resolved %d subnets and %d security groups, want 4 and at least 1", len(status.Subnets), len(status.SecurityGroups))
	}
	var archs []string
	for _, a := range status.AMIs {
		archs = append(archs, a.Requirements[0].Values[0])
		if !strings.Contains(a.Name, "al2023") || !strings.Contains(a.Name, localaws.DefaultKubernetesVersion) {
			t.Errorf("AMI %s (%s) is not an AL2023 image for "+localaws.DefaultKubernetesVersion, a.ID, a.Name)
		}
	}
	if diff := cmp.Diff([]string{"amd64", "arm64"}, archs); diff != "" {
		t.Errorf("AMI architectures (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(status.InstanceProfile, "tailor_"+testCluster+"_") {
		t.Errorf("instance profile %q, want one Tailor manages for the role", status.InstanceProfile)
	}
}

func TestCreateLaunchesSpotAndTagsTheInstance(t *testing.T) {
	h := newHarness(t)
	launched, err := h.provider.Create(context.Background(), nodeClaim("a", []string{"m5.large", "m5.xlarge"}, "spot", "on-demand"))
	if err != nil {
		t.Fatal(err)
	}
	if got := launched.Labels[karpv1.CapacityTypeLabelKey]; got != karpv1.CapacityTypeSpot {
		t.Errorf("capacity type %q, want spot", got)
	}
	if !strings.HasPrefix(launched.Status.ProviderID, "aws:///us-east-1") || !strings.HasPrefix(launched.Status.NodeName, "ip-10-0-") {
		t.Errorf("providerID %q node %q: want aws:///<zone>/<id> and a private DNS name", launched.Status.ProviderID, launched.Status.NodeName)
	}
	instances := h.endpoint.Instances()
	if len(instances) != 1 {
		t.Fatalf("%d instances launched, want 1", len(instances))
	}
	tags := instances[0].Tags
	for k, want := range map[string]string{
		"kubernetes.io/cluster/" + testCluster: "owned",
		"karpenter.sh/nodepool":                "general",
		"karpenter.sh/nodeclaim":               "general-a",
		"karpenter.k8s.aws/ec2nodeclass":       "default",
		"eks:eks-cluster-name":                 testCluster,
	} {
		if tags[k] != want {
			t.Errorf("tag %s = %q, want %q", k, tags[k], want)
		}
	}
	if want := resource.MustParse("2"); launched.Status.Capacity.Cpu().Cmp(want) != 0 {
		t.Errorf("capacity cpu %s, want 2", launched.Status.Capacity.Cpu())
	}
	// Where the instance went, for drift: one of the class's subnets and its security groups.
	subnet, groups := launched.Annotations[awsv1.SubnetAnnotationKey], launched.Annotations[awsv1.SecurityGroupsAnnotationKey]
	if !strings.HasPrefix(subnet, "subnet-") || !strings.HasPrefix(groups, "sg-") {
		t.Errorf("recorded subnet %q and security groups %q, want the instance's", subnet, groups)
	}
	// What the class was at launch, for static drift.
	class := &awsv1.EC2NodeClass{}
	if err := h.kube.Get(context.Background(), client.ObjectKey{Name: "default"}, class); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{awsv1.EC2NodeClassHashAnnotationKey: class.Hash(), awsv1.EC2NodeClassHashVersionAnnotationKey: awsv1.EC2NodeClassHashVersion}
	got := map[string]string{}
	for k := range want {
		got[k] = launched.Annotations[k]
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("class hash annotations (-want +got):\n%s", diff)
	}
}

func TestCreateIsIdempotentPerNodeClaim(t *testing.T) {
	h := newHarness(t)
	first, err := h.provider.Create(context.Background(), nodeClaim("b", []string{"m5.large"}, "on-demand"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := h.provider.Create(context.Background(), nodeClaim("b", []string{"m5.large"}, "on-demand"))
	if err != nil {
		t.Fatal(err)
	}
	if first.Status.ProviderID != again.Status.ProviderID || len(h.endpoint.Instances()) != 1 {
		t.Errorf("retrying a launch made %s then %s (%d instances), want the same single instance",
			first.Status.ProviderID, again.Status.ProviderID, len(h.endpoint.Instances()))
	}
}

func TestCreateFallsBackToOnDemandWhenSpotIsExhausted(t *testing.T) {
	h := newHarness(t)
	var pools []localaws.CapacityPool
	for _, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"} {
		pools = append(pools, localaws.CapacityPool{InstanceType: "m5.large", Zone: z, CapacityType: "spot"})
	}
	h.setInsufficientCapacity(t, pools)
	launched, err := h.provider.Create(context.Background(), nodeClaim("c", []string{"m5.large"}, "spot", "on-demand"))
	if err != nil {
		t.Fatal(err)
	}
	if got := launched.Labels[karpv1.CapacityTypeLabelKey]; got != karpv1.CapacityTypeOnDemand {
		t.Errorf("capacity type %q, want on-demand after spot ran out", got)
	}
	// Priced as launched: m5.large on demand and the AL2023 root volume, 20Gi of gp3.
	want := &karpv1.Price{PerHour: "0.098192", Instance: "0.096", Volumes: "0.002192"}
	if diff := cmp.Diff(want, launched.Status.Price); diff != "" {
		t.Errorf("status.price (-want +got):\n%s", diff)
	}
}

func TestCreateReportsInsufficientCapacity(t *testing.T) {
	h := newHarness(t)
	var pools []localaws.CapacityPool
	for _, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"} {
		pools = append(pools, localaws.CapacityPool{InstanceType: "m5.large", Zone: z, CapacityType: "spot"})
	}
	h.setInsufficientCapacity(t, pools)
	_, err := h.provider.Create(context.Background(), nodeClaim("d", []string{"m5.large"}, "spot"))
	if !cloudprovider.IsInsufficientCapacityError(err) {
		t.Fatalf("Create() error = %v, want an InsufficientCapacityError", err)
	}
	if !strings.Contains(err.Error(), "InsufficientInstanceCapacity") {
		t.Errorf("error %q does not carry EC2's error code", err)
	}
}

func TestDeleteTerminatesThenReportsNotFound(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	launched, err := h.provider.Create(ctx, nodeClaim("e", []string{"m5.large"}, "on-demand"))
	if err != nil {
		t.Fatal(err)
	}
	nc := nodeClaim("e", nil)
	nc.Status = launched.Status
	if err := h.provider.Delete(ctx, nc); err != nil {
		t.Fatalf("first Delete() = %v, want nil while terminating", err)
	}
	listed, err := h.provider.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 {
		t.Errorf("List() while shutting down = %d instances, want 1", len(listed))
	}
	h.clock.Step(2 * time.Second)
	if err := h.provider.Delete(ctx, nc); !cloudprovider.IsNodeClaimNotFoundError(err) {
		t.Fatalf("Delete() after termination = %v, want a NodeClaimNotFoundError", err)
	}
	if _, err := h.provider.Get(ctx, nc.Status.ProviderID); !cloudprovider.IsNodeClaimNotFoundError(err) {
		t.Errorf("Get() after termination = %v, want a NodeClaimNotFoundError", err)
	}
	if listed, _ := h.provider.List(ctx); len(listed) != 0 {
		t.Errorf("List() after termination = %d instances, want 0", len(listed))
	}
}

// metricValue is the value of the metric with exactly these labels in the registry the
// provider registers its metrics in, 0 when it has none.
func metricValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if !maps.Equal(got, labels) {
				continue
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// TestDeleteOfANodeClaimWithoutProviderIDTerminatesTheInstanceTaggedForIt deletes NodeClaims
// whose launch recorded no instance (deleted while CreateFleet ran): the instance tagged for
// the NodeClaim is terminated, and one with no instance is not found.
func TestDeleteOfANodeClaimWithoutProviderIDTerminatesTheInstanceTaggedForIt(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	launched, err := h.provider.Create(ctx, nodeClaim("f", []string{"m5.large"}, "on-demand"))
	if err != nil {
		t.Fatal(err)
	}
	unrecorded := nodeClaim("f", nil)
	if err := h.provider.Delete(ctx, unrecorded); err != nil {
		t.Fatalf("Delete() of the NodeClaim whose instance is not recorded = %v, want nil while terminating", err)
	}
	h.clock.Step(2 * time.Second)
	if _, err := h.provider.Get(ctx, launched.Status.ProviderID); !cloudprovider.IsNodeClaimNotFoundError(err) {
		t.Errorf("Get() of the tagged instance after Delete = %v, want a NodeClaimNotFoundError", err)
	}
	if err := h.provider.Delete(ctx, unrecorded); !cloudprovider.IsNodeClaimNotFoundError(err) {
		t.Errorf("Delete() once the instance is terminated = %v, want a NodeClaimNotFoundError", err)
	}
	if err := h.provider.Delete(ctx, nodeClaim("never-launched", nil)); !cloudprovider.IsNodeClaimNotFoundError(err) {
		t.Errorf("Delete() of a NodeClaim never launched = %v, want a NodeClaimNotFoundError", err)
	}
}
