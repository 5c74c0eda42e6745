package aws

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/pricing"
	"github.com/tailor-autoscaler/tailor/test/localaws"
)

// windowsClass is an EC2NodeClass named "windows" with the AMI selector terms given.
func windowsClass(family *string, terms ...awsv1.AMISelectorTerm) *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "windows", UID: "windows-class-uid"},
		Spec: awsv1.EC2NodeClassSpec{
			Role:                       "NodeRole",
			AMIFamily:                  family,
			AMISelectorTerms:           terms,
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}},
		},
	}
}

func windowsNodePool() *karpv1.NodePool {
	np := nodePool()
	np.Name = "windows"
	np.Spec.Template.Spec.NodeClassRef.Name = "windows"
	return np
}

func TestWindowsAMIsResolveThroughSSM(t *testing.T) {
	h := newHarness(t)
	amd64Windows := func(name string) []awsv1.AMI {
		return []awsv1.AMI{{Name: name, Requirements: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
			{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"windows"}},
		}}}
	}
	raid0 := windowsClass(nil, awsv1.AMISelectorTerm{Alias: "windows2022@latest"})
	raid0.Spec.InstanceStorePolicy = ptr.To(awsv1.InstanceStorePolicyRAID0)
	tests := []struct {
		name    string
		class   *awsv1.EC2NodeClass
		want    []awsv1.AMI
		wantErr string
	}{
		{
			name:  "windows2022@latest is the latest Windows Server 2022 Core EKS image, amd64 only",
			class: windowsClass(nil, awsv1.AMISelectorTerm{Alias: "windows2022@latest"}),
			want:  amd64Windows("Windows_Server-2022-English-Core-EKS_Optimized-" + localaws.DefaultKubernetesVersion + "-2026.11.12"),
		},
		{
			name:  "windows2019@latest",
			class: windowsClass(nil, awsv1.AMISelectorTerm{Alias: "windows2019@latest"}),
			want:  amd64Windows("Windows_Server-2019-English-Core-EKS_Optimized-" + localaws.DefaultKubernetesVersion + "-2026.11.12"),
		},
		{
			name:  "amiFamily Windows2022 with a name term picks the newest match",
			class: windowsClass(ptr.To("Windows2022"), awsv1.AMISelectorTerm{Name: "Windows_Server-2022-English-Core-EKS_Optimized-" + localaws.DefaultKubernetesVersion + "-*"}),
			want:  amd64Windows("Windows_Server-2022-English-Core-EKS_Optimized-" + localaws.DefaultKubernetesVersion + "-2026.11.12"),
		},
		{
			name:    "a pinned Windows alias names the fix",
			class:   windowsClass(nil, awsv1.AMISelectorTerm{Alias: "windows2022@2026.10.15"}),
			wantErr: `resolving amiSelectorTerms: alias "windows2022@2026.10.15": Windows AMIs are published only as the latest release: write windows2022@latest, or select a pinned image by id or name`,
		},
		{
			name:    "a Windows family with only arm64 images is refused",
			class:   windowsClass(ptr.To("Windows2022"), awsv1.AMISelectorTerm{Name: "amazon-eks-node-al2023-arm64-standard-" + localaws.DefaultKubernetesVersion + "-*"}),
			wantErr: `resolving amiSelectorTerms: a Windows node class needs an amd64 image, and the terms select only arm64 ones: select an x86_64 Windows Server AMI`,
		},
		{
			name:    "RAID0 instance storage has no Windows bootstrap setting",
			class:   raid0,
			wantErr: `spec.instanceStorePolicy RAID0 has no Windows bootstrap setting: remove it, or use a Linux amiFamily`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, err := h.provider.ResolveNodeClass(context.Background(), tt.class)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ResolveNodeClass() resolved %v, want error %q", status.AMIs, tt.wantErr)
				}
				if diff := cmp.Diff(tt.wantErr, err.Error()); diff != "" {
					t.Errorf("error (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range status.AMIs {
				status.AMIs[i].ID = ""
			}
			if diff := cmp.Diff(tt.want, status.AMIs); diff != "" {
				t.Errorf("AMIs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWindowsInstanceTypes(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if err := h.kube.Create(ctx, windowsClass(nil, awsv1.AMISelectorTerm{Alias: "windows2022@latest"})); err != nil {
		t.Fatal(err)
	}
	if _, err := h.provider.InstanceTypes(ctx, nodePool()); err != nil {
		t.Fatal(err)
	}
	// Windows prices are read only once a Windows class plans, then cached.
	h.endpoint.ResetRequestCounts()
	its, err := h.provider.InstanceTypes(ctx, windowsNodePool())
	if err != nil {
		t.Fatal(err)
	}
	counts := h.endpoint.RequestCounts()
	if counts["GetProducts"] == 0 || counts["DescribeSpotPriceHistory"] == 0 {
		t.Errorf("requests for the first Windows class %v, want GetProducts and DescribeSpotPriceHistory", counts)
	}
	h.endpoint.ResetRequestCounts()
	if _, err := h.provider.InstanceTypes(ctx, windowsNodePool()); err != nil {
		t.Fatal(err)
	}
	if counts := h.endpoint.RequestCounts(); counts["GetProducts"]+counts["DescribeSpotPriceHistory"] != 0 {
		t.Errorf("requests once Windows prices are cached %v, want none for prices", counts)
	}

	var m5 *cloudprovider.InstanceType
	for _, it := range its {
		if it.Labels[corev1.LabelArchStable] != "amd64" || it.Labels[corev1.LabelOSStable] != "windows" {
			t.Fatalf("%s has arch %q, os %q; want amd64 and windows for every Windows instance type", it.Name, it.Labels[corev1.LabelArchStable], it.Labels[corev1.LabelOSStable])
		}
		if it.Name == "m5.large" {
			m5 = it
		}
	}
	if m5 == nil {
		t.Fatal("m5.large missing")
	}
	if got := m5.Labels[corev1.LabelWindowsBuild]; got != "10.0.20348" {
		t.Errorf("windows-build label %q, want 10.0.20348", got)
	}
	quantities := func(l corev1.ResourceList) map[string]string {
		out := map[string]string{}
		for k, v := range l {
			out[string(k)] = v.String()
		}
		return out
	}
	// The primary interface's 10 addresses less its own: 9 pods. The 50Gi Windows root volume.
	if diff := cmp.Diff(map[string]string{"cpu": "2", "memory": "7577Mi", "pods": "9", "ephemeral-storage": "50Gi"}, quantities(m5.Capacity)); diff != "" {
		t.Errorf("capacity (-want +got):\n%s", diff)
	}
	// kube-reserved 255Mi + 11Mi x 9 pods, 100Mi hard eviction and 2Gi system-reserved for
	// Windows; 1Gi kube-reserved and 10% of 50Gi storage.
	if diff := cmp.Diff(map[string]string{"cpu": "70m", "memory": "2502Mi", "ephemeral-storage": "6Gi"}, quantities(m5.Overhead)); diff != "" {
		t.Errorf("overhead (-want +got):\n%s", diff)
	}
	prices := map[string]float64{}
	for _, o := range m5.Offerings {
		prices[o.CapacityType+"/"+o.Zone] = o.Price
	}
	// The local endpoint's Windows prices: Linux plus $0.046 per vCPU-hour.
	want := map[string]float64{
		"on-demand/us-east-1a": 0.188, "on-demand/us-east-1b": 0.188, "on-demand/us-east-1c": 0.188, "on-demand/us-east-1d": 0.188,
		"spot/us-east-1a": 0.14701, "spot/us-east-1b": 0.15829, "spot/us-east-1c": 0.15234, "spot/us-east-1d": 0.12023,
	}
	if diff := cmp.Diff(want, prices); diff != "" {
		t.Errorf("m5.large Windows prices (-want +got):\n%s", diff)
	}
}

func TestWindowsPricesInAnIsolatedVPCAreLinuxPricesPlusTheLicense(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if err := h.kube.Create(ctx, windowsClass(nil, awsv1.AMISelectorTerm{Alias: "windows2019@latest"})); err != nil {
		t.Fatal(err)
	}
	p, err := New(Options{
		Cluster:           ClusterInfo{Name: testCluster, Endpoint: "https://127.0.0.1:6443", CABundle: "Y2E=", ServiceCIDR: "10.100.0.0/16"},
		Region:            "us-east-1",
		KubernetesVersion: localaws.DefaultKubernetesVersion,
		IsolatedVPC:       true,
	}, NewClients(h.cfg), h.kube, h.kube, nil)
	if err != nil {
		t.Fatal(err)
	}
	its, err := p.InstanceTypes(ctx, windowsNodePool())
	if err != nil {
		t.Fatal(err)
	}
	if got := h.endpoint.RequestCounts()["GetProducts"]; got != 0 {
		t.Errorf("%d GetProducts requests in an isolated VPC, want none", got)
	}
	for _, it := range its {
		if it.Name != "c5.xlarge" {
			continue
		}
		if got := it.Labels[corev1.LabelWindowsBuild]; got != "10.0.17763" {
			t.Errorf("windows-build label %q, want 10.0.17763", got)
		}
		for _, o := range it.Offerings {
			// The embedded catalog's $0.17 plus 4 vCPUs x $0.046.
			if o.CapacityType == karpv1.CapacityTypeOnDemand && o.Price != 0.354 {
				t.Errorf("on-demand price of Windows c5.xlarge in %s = %v, want 0.354", o.Zone, o.Price)
			}
		}
		return
	}
	t.Error("c5.xlarge missing")
}

func TestCatalogInstanceTypesOfAWindowsClass(t *testing.T) {
	m5 := catalog.InstanceType{
		Name: "m5.large", Arch: catalog.ArchAMD64, VCPU: 2, MemoryMiB: 8192, MaxENIs: 3, IPv4PerENI: 10, OnDemandPricePerHour: 0.096,
		Offerings: []catalog.Offering{
			{Zone: "zone-a", CapacityType: catalog.CapacityTypeSpot, PricePerHour: 0.04},
			{Zone: "zone-a", CapacityType: catalog.CapacityTypeOnDemand, PricePerHour: 0.096},
		},
	}
	m6g := catalog.InstanceType{
		Name: "m6g.large", Arch: catalog.ArchARM64, VCPU: 2, MemoryMiB: 8192, MaxENIs: 3, IPv4PerENI: 10, OnDemandPricePerHour: 0.077,
		Offerings: []catalog.Offering{{Zone: "zone-a", CapacityType: catalog.CapacityTypeOnDemand, PricePerHour: 0.077}},
	}
	cat := &catalog.Catalog{Region: "test", Zones: []string{"zone-a"}, InstanceTypes: []catalog.InstanceType{m5, m6g}}
	its, err := CatalogInstanceTypes(cat, windowsClass(nil, awsv1.AMISelectorTerm{Alias: "windows2022@latest"}), OfflineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type summary struct {
		Name, OS, Pods string
		Prices         map[string]float64
	}
	var got []summary
	for _, it := range its {
		s := summary{Name: it.Name, OS: it.Labels[corev1.LabelOSStable], Pods: ptr.To(it.Capacity[corev1.ResourcePods]).String(), Prices: map[string]float64{}}
		for _, o := range it.Offerings {
			s.Prices[o.CapacityType] = o.Price
		}
		got = append(got, s)
	}
	// No arm64 type; prices are the catalog's plus 2 vCPUs x $0.046.
	want := []summary{{Name: "m5.large", OS: "windows", Pods: "9", Prices: map[string]float64{"on-demand": 0.188, "spot": 0.132}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CatalogInstanceTypes() of a Windows class (-want +got):\n%s", diff)
	}
}

// When AWS gives no prices, Windows instance types are still priced: the embedded Linux
// prices plus the license, not left without offerings.
func TestWindowsPricesWhenAWSRefusesAreDerived(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if err := h.kube.Create(ctx, windowsClass(nil, awsv1.AMISelectorTerm{Alias: "windows2022@latest"})); err != nil {
		t.Fatal(err)
	}
	h.patchFaults(t, `{"throttleRate":1,"throttleActions":["GetProducts","DescribeSpotPriceHistory"]}`)
	its, err := h.provider.InstanceTypes(ctx, windowsNodePool())
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range its {
		if it.Name != "m5.large" {
			continue
		}
		prices := map[string]float64{}
		for _, o := range it.Offerings {
			prices[o.CapacityType+"/"+o.Zone] = o.Price
		}
		// The embedded catalog's $0.096 on demand and $0.05501 spot in us-east-1a, plus 2 vCPUs x $0.046.
		if prices["on-demand/us-east-1a"] != 0.188 || prices["spot/us-east-1a"] != 0.14701 {
			t.Errorf("m5.large Windows prices %v, want on-demand 0.188 and spot 0.14701 in us-east-1a", prices)
		}
		return
	}
	t.Error("m5.large missing")
}

// A Pricing API that keeps failing is asked again only after the failure's wait, however
// often Windows classes plan meanwhile.
func TestWindowsPriceReadsWaitAfterAFailure(t *testing.T) {
	h := newHarnessWithClock(t, true)
	ctx := context.Background()
	if err := h.kube.Create(ctx, windowsClass(nil, awsv1.AMISelectorTerm{Alias: "windows2022@latest"})); err != nil {
		t.Fatal(err)
	}
	if _, err := h.provider.InstanceTypes(ctx, nodePool()); err != nil {
		t.Fatal(err)
	}
	h.patchFaults(t, `{"throttleRate":1,"throttleActions":["GetProducts"]}`)
	h.endpoint.ResetRequestCounts()
	for range 5 {
		if _, err := h.provider.InstanceTypes(ctx, windowsNodePool()); err != nil {
			t.Fatal(err)
		}
	}
	// The first read makes one attempt; the derived prices stand in until the wait passes.
	if got := h.endpoint.RequestCounts()["GetProducts"]; got != 1 {
		t.Errorf("%d GetProducts requests for five plans after a failure, want the first read's 1", got)
	}
	h.endpoint.ResetRequestCounts()
	h.clock.Step(h.provider.failures.Wait(pricing.FailureWindowsOnDemand, ""))
	if _, err := h.provider.InstanceTypes(ctx, windowsNodePool()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for h.endpoint.RequestCounts()["GetProducts"] < pricing.BackgroundAttempts && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := h.endpoint.RequestCounts()["GetProducts"]; got != pricing.BackgroundAttempts {
		t.Errorf("%d GetProducts requests once the wait passed, want one background read of %d attempts", got, pricing.BackgroundAttempts)
	}
}
