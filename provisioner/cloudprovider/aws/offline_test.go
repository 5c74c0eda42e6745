package aws

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
)

var quantityEqual = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

func byName(its []*cloudprovider.InstanceType) map[string]*cloudprovider.InstanceType {
	out := make(map[string]*cloudprovider.InstanceType, len(its))
	for _, it := range its {
		slices.SortFunc(it.Offerings, func(a, b cloudprovider.Offering) int {
			if c := strings.Compare(a.Zone, b.Zone); c != 0 {
				return c
			}
			return strings.Compare(a.CapacityType, b.CapacityType)
		})
		out[it.Name] = it
	}
	return out
}

func defaultClass() *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec:       awsv1.EC2NodeClassSpec{Role: "NodeRole", AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}}},
	}
}

func TestCatalogInstanceTypesAgreeWithTheProviderThroughTheSDK(t *testing.T) {
	for _, prefixDelegation := range []bool{false, true} {
		t.Run(fmt.Sprintf("prefix delegation %t", prefixDelegation), func(t *testing.T) {
			testCatalogAgreesWithTheProvider(t, prefixDelegation)
		})
	}
}

func testCatalogAgreesWithTheProvider(t *testing.T, prefixDelegation bool) {
	h := newHarness(t)
	h.reconfigure(t, func(o *Options) { o.PrefixDelegation = prefixDelegation })
	online, err := h.provider.InstanceTypes(context.Background(), nodePool())
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	// The class as a cluster exports it: its status lists the subnets the provider resolved,
	// so the offline offerings have the same zones and zone IDs.
	live := &awsv1.EC2NodeClass{}
	if err := h.provider.kube.Get(context.Background(), client.ObjectKey{Name: "default"}, live); err != nil {
		t.Fatal(err)
	}
	status, err := h.provider.ResolveNodeClass(context.Background(), live)
	if err != nil {
		t.Fatal(err)
	}
	exported := defaultClass()
	exported.Status.Subnets = status.Subnets
	offline, err := CatalogInstanceTypes(cat, exported, OfflineOptions{PrefixDelegation: prefixDelegation})
	if err != nil {
		t.Fatal(err)
	}
	want, got := byName(online), byName(offline)
	// The provider applies the option: m5.large has 3 ENIs x (10-1) x 16 + 2 pods capped at 110.
	if pods := ptr.To(want["m5.large"].Capacity[corev1.ResourcePods]).Value(); prefixDelegation && pods != 110 {
		t.Errorf("m5.large pods with prefix delegation = %d, want 110", pods)
	}
	// General purpose, NVIDIA GPU with local NVMe, AMD GPU, arm64, Inferentia 1 and 2,
	// Trainium, bare metal without a hypervisor, Xen, burstable.
	for _, name := range []string{"m5.large", "g5.xlarge", "g4ad.xlarge", "p3dn.24xlarge", "m7g.xlarge", "inf1.xlarge", "inf2.xlarge", "trn1.2xlarge", "m5.metal", "m4.large", "t3.micro"} {
		t.Run(name, func(t *testing.T) {
			if want[name] == nil {
				t.Fatalf("the provider offers no %s", name)
			}
			if diff := cmp.Diff(want[name], got[name], quantityEqual); diff != "" {
				t.Errorf("CatalogInstanceTypes() differs from Provider.InstanceTypes() (-provider +catalog):\n%s", diff)
			}
		})
	}
	t.Run("every instance type", func(t *testing.T) {
		if diff := cmp.Diff(want, got, quantityEqual); diff != "" {
			t.Errorf("CatalogInstanceTypes() differs from Provider.InstanceTypes() (-provider +catalog):\n%s", diff)
		}
	})
}

func TestCatalogInstanceTypesApplyOptionsAndTheNodeClass(t *testing.T) {
	m5 := catalog.InstanceType{
		Name: "m5.large", Arch: catalog.ArchAMD64, Hypervisor: "nitro", VCPU: 2, MemoryMiB: 8192, MaxENIs: 3, IPv4PerENI: 10, OnDemandPricePerHour: 0.096,
		Offerings: []catalog.Offering{
			{Zone: "zone-b", CapacityType: catalog.CapacityTypeSpot, PricePerHour: 0.04},
			{Zone: "zone-a", CapacityType: catalog.CapacityTypeOnDemand, PricePerHour: 0.096},
		},
	}
	unoffered := catalog.InstanceType{Name: "c5.large", Arch: catalog.ArchAMD64, VCPU: 2, MemoryMiB: 4096, MaxENIs: 3, IPv4PerENI: 10, OnDemandPricePerHour: 0.085}
	onDemandFromOffering := m5
	onDemandFromOffering.OnDemandPricePerHour = 0
	cat := func(types ...catalog.InstanceType) *catalog.Catalog {
		return &catalog.Catalog{Region: "test", Zones: []string{"zone-a", "zone-b"}, InstanceTypes: types}
	}
	withKubelet := defaultClass()
	withKubelet.Spec.Kubelet = &awsv1.KubeletConfiguration{MaxPods: ptr.To[int32](110)}
	contradicting := defaultClass()
	contradicting.Spec.AMIFamily = ptr.To("AL2")
	exported := defaultClass()
	exported.Status.Subnets = []awsv1.Subnet{{ID: "subnet-1", Zone: "zone-b", ZoneID: "zb-az2"}}

	// On-demand in every zone with an offering, spot where the catalog sells it; each node
	// pays for AL2023's 20Gi gp3 root volume.
	rootVolume := cloudprovider.NodeCosts{Volumes: 20 * 0.08 / 730}
	m5Offerings := []cloudprovider.Offering{
		{Zone: "zone-a", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.096, NodeCosts: rootVolume, Available: true},
		{Zone: "zone-b", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.096, NodeCosts: rootVolume, Available: true},
		{Zone: "zone-b", CapacityType: karpv1.CapacityTypeSpot, Price: 0.04, NodeCosts: rootVolume, Available: true},
	}
	public := rootVolume
	public.PublicIPv4 = 0.005
	m5PublicOfferings := []cloudprovider.Offering{
		{Zone: "zone-a", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.096, NodeCosts: public, Available: true},
		{Zone: "zone-b", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.096, NodeCosts: public, Available: true},
		{Zone: "zone-b", CapacityType: karpv1.CapacityTypeSpot, Price: 0.04, NodeCosts: public, Available: true},
	}
	type summary struct {
		Name      string
		Capacity  map[string]string
		Offerings []cloudprovider.Offering
	}
	tests := []struct {
		name    string
		catalog *catalog.Catalog
		class   *awsv1.EC2NodeClass
		opts    OfflineOptions
		want    []summary
		wantErr string
	}{
		{
			name: "defaults, with on-demand in every zone the type is offered",
			// 8192Mi less 7.5%; 3 ENIs x (10-1) + 2 pods.
			catalog: cat(m5, unoffered), class: defaultClass(),
			want: []summary{{
				Name:      "m5.large",
				Capacity:  map[string]string{"cpu": "2", "memory": "7577Mi", "pods": "29", "ephemeral-storage": "20Gi", "vpc.amazonaws.com/pod-eni": "9"},
				Offerings: m5Offerings,
			}},
		},
		{
			name: "memory overhead and reserved ENIs",
			// 8192Mi less 10%, floored; 2 ENIs x (10-1) + 2 pods.
			catalog: cat(m5), class: defaultClass(), opts: OfflineOptions{VMMemoryOverheadPercent: 0.1, ReservedENIs: 1},
			want: []summary{{
				Name:      "m5.large",
				Capacity:  map[string]string{"cpu": "2", "memory": "7372Mi", "pods": "20", "ephemeral-storage": "20Gi", "vpc.amazonaws.com/pod-eni": "9"},
				Offerings: m5Offerings,
			}},
		},
		{
			name: "prefix delegation",
			// 3 ENIs x (10-1) x 16 + 2 = 434, capped at 110 below 30 vCPUs.
			catalog: cat(m5), class: defaultClass(), opts: OfflineOptions{PrefixDelegation: true},
			want: []summary{{
				Name:      "m5.large",
				Capacity:  map[string]string{"cpu": "2", "memory": "7577Mi", "pods": "110", "ephemeral-storage": "20Gi", "vpc.amazonaws.com/pod-eni": "9"},
				Offerings: m5Offerings,
			}},
		},
		{
			name:    "kubelet maxPods of the node class",
			catalog: cat(m5), class: withKubelet,
			want: []summary{{
				Name:      "m5.large",
				Capacity:  map[string]string{"cpu": "2", "memory": "7577Mi", "pods": "110", "ephemeral-storage": "20Gi", "vpc.amazonaws.com/pod-eni": "9"},
				Offerings: m5Offerings,
			}},
		},
		{
			name:    "on-demand price from the offering when the type has none",
			catalog: cat(onDemandFromOffering), class: defaultClass(),
			want: []summary{{
				Name:      "m5.large",
				Capacity:  map[string]string{"cpu": "2", "memory": "7577Mi", "pods": "29", "ephemeral-storage": "20Gi", "vpc.amazonaws.com/pod-eni": "9"},
				Offerings: m5Offerings,
			}},
		},
		{
			name:    "subnets that map public addresses",
			catalog: cat(m5), class: defaultClass(), opts: OfflineOptions{PublicSubnets: true},
			want: []summary{{
				Name:      "m5.large",
				Capacity:  map[string]string{"cpu": "2", "memory": "7577Mi", "pods": "29", "ephemeral-storage": "20Gi", "vpc.amazonaws.com/pod-eni": "9"},
				Offerings: m5PublicOfferings,
			}},
		},
		{
			name:    "memory overhead out of range",
			catalog: cat(m5), class: defaultClass(), opts: OfflineOptions{VMMemoryOverheadPercent: 1.5},
			wantErr: "configuring offline instance types: vm memory overhead percent 1.5 must be in [0, 1)",
		},
		{
			name:    "a class exported with its status: the zones of its subnets, with their IDs",
			catalog: cat(m5), class: exported,
			want: []summary{{
				Name:     "m5.large",
				Capacity: map[string]string{"cpu": "2", "memory": "7577Mi", "pods": "29", "ephemeral-storage": "20Gi", "vpc.amazonaws.com/pod-eni": "9"},
				Offerings: []cloudprovider.Offering{
					{Zone: "zone-b", ZoneID: "zb-az2", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.096, NodeCosts: rootVolume, Available: true},
					{Zone: "zone-b", ZoneID: "zb-az2", CapacityType: karpv1.CapacityTypeSpot, Price: 0.04, NodeCosts: rootVolume, Available: true},
				},
			}},
		},
		{
			name:    "negative reserved ENIs",
			catalog: cat(m5), class: defaultClass(), opts: OfflineOptions{ReservedENIs: -1},
			wantErr: "configuring offline instance types: reserved ENIs -1 must not be negative",
		},
		{
			name:    "amiFamily contradicting the alias",
			catalog: cat(m5), class: contradicting,
			wantErr: `EC2NodeClass "default": spec.amiFamily AL2 contradicts the alias of amiSelectorTerms (AL2023): remove amiFamily or set it to AL2023 or Custom`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			its, err := CatalogInstanceTypes(tt.catalog, tt.class, tt.opts)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("CatalogInstanceTypes() error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []summary
			for _, it := range its {
				capacity := map[string]string{}
				for k, v := range it.Capacity {
					capacity[string(k)] = v.String()
				}
				got = append(got, summary{Name: it.Name, Capacity: capacity, Offerings: it.Offerings})
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateApprox(0, 1e-15)); diff != "" {
				t.Errorf("CatalogInstanceTypes() (-want +got):\n%s", diff)
			}
		})
	}
}
