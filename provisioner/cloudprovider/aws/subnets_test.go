package aws

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/test/localaws"
)

// subnetsOf returns the ids of the endpoint's subnets in the zone, in seeding order.
func (h *harness) subnetsOf(zone string) []string {
	var out []string
	for _, s := range h.endpoint.Subnets() {
		if s.Zone == zone {
			out = append(out, s.ID)
		}
	}
	return out
}

// resize sets the addresses of the subnets.
func (h *harness) resize(t *testing.T, addresses map[string]int) {
	t.Helper()
	var sizes []localaws.SubnetSize
	for id, n := range addresses {
		sizes = append(sizes, localaws.SubnetSize{ID: id, Addresses: n})
	}
	require.NoError(t, h.endpoint.SetSubnetSizes(sizes))
}

// launchedPerSubnet counts the addresses instances hold in each subnet.
func (h *harness) launchedPerSubnet() map[string]int {
	out := map[string]int{}
	for _, s := range h.endpoint.Subnets() {
		if n := s.Addresses - s.AvailableIPAddressCount; n > 0 {
			out[s.ID] = n
		}
	}
	return out
}

// zonalNodeClaim is an on-demand m5.large NodeClaim in the zone.
func zonalNodeClaim(uid, zone string) *karpv1.NodeClaim {
	nc := nodeClaim(uid, []string{"m5.large"}, karpv1.CapacityTypeOnDemand)
	nc.Spec.Requirements = append(nc.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}})
	return nc
}

func TestCreateChoosesTheSubnetWithTheMostFreeAddresses(t *testing.T) {
	tests := []struct {
		name string
		// addresses of the zone's first and second subnet
		addresses [2]int
		launches  int
		// want is the instances launched in the zone's first and second subnet
		want [2]int
	}{
		{name: "the subnet with more free addresses", addresses: [2]int{10, 20}, launches: 1, want: [2]int{0, 1}},
		{name: "a full subnet is skipped", addresses: [2]int{10, 0}, launches: 1, want: [2]int{1, 0}},
		{name: "a burst spreads over the subnets between refreshes", addresses: [2]int{3, 3}, launches: 4, want: [2]int{2, 2}},
		{name: "a burst fills one subnet then the other", addresses: [2]int{2, 1}, launches: 3, want: [2]int{2, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarnessWithEndpoint(t, false, localaws.Options{SubnetsPerZone: 2})
			ids := h.subnetsOf("us-east-1a")
			h.resize(t, map[string]int{ids[0]: tt.addresses[0], ids[1]: tt.addresses[1]})
			for i := range tt.launches {
				_, err := h.provider.Create(context.Background(), zonalNodeClaim(fmt.Sprint(i), "us-east-1a"))
				require.NoError(t, err)
			}
			want := map[string]int{}
			for i, n := range tt.want {
				if n > 0 {
					want[ids[i]] = n
				}
			}
			if diff := cmp.Diff(want, h.launchedPerSubnet()); diff != "" {
				t.Errorf("instances per subnet (-want +got):\n%s", diff)
			}
			require.Equal(t, 1, h.counts("DescribeSubnets")["DescribeSubnets"], "DescribeSubnets calls: the burst counted its own addresses")
		})
	}
}

func TestCreateFallsBackToAnotherSubnetWhenEC2FindsOneFull(t *testing.T) {
	h := newHarnessWithEndpoint(t, false, localaws.Options{SubnetsPerZone: 2})
	ids := h.subnetsOf("us-east-1a")
	h.resize(t, map[string]int{ids[0]: 20, ids[1]: 10})
	_, err := h.provider.Create(context.Background(), zonalNodeClaim("first", "us-east-1a"))
	require.NoError(t, err)
	// Filled by something else since the provider last described the subnets.
	h.resize(t, map[string]int{ids[0]: 1})
	before := h.counts("CreateFleet")["CreateFleet"]

	_, err = h.provider.Create(context.Background(), zonalNodeClaim("second", "us-east-1a"))
	require.NoError(t, err)
	if diff := cmp.Diff(map[string]int{ids[0]: 1, ids[1]: 1}, h.launchedPerSubnet()); diff != "" {
		t.Errorf("instances per subnet (-want +got):\n%s", diff)
	}
	require.Equal(t, 2, h.counts("CreateFleet")["CreateFleet"]-before, "CreateFleet calls: the full subnet, then the other")
	require.True(t, availability(t, h.provider, "m5.large")["us-east-1a/on-demand"], "the zone's offering stays available while a subnet has addresses")
}

func TestCreateWhenEverySubnetIsFull(t *testing.T) {
	h := newHarness(t)
	full := map[string]int{}
	var named []string
	for _, s := range h.endpoint.Subnets() {
		full[s.ID] = 0
		named = append(named, fmt.Sprintf("%s (%s)", s.ID, s.Zone))
	}
	h.resize(t, full)
	sort.Strings(named)
	const attempts = 5
	for i := range attempts {
		_, err := h.provider.Create(context.Background(), nodeClaim(fmt.Sprint(i), []string{"m5.large"}, "spot", "on-demand"))
		require.True(t, cloudprovider.IsInsufficientCapacityError(err), "Create() error = %v, want an InsufficientCapacityError", err)
		require.ErrorIs(t, err, cloudprovider.ErrSubnetsFull)
		want := `insufficient capacity: EC2NodeClass "default": every subnet is out of free IP addresses: ` + strings.Join(named, ", ")
		require.Equal(t, want, cloudprovider.Message(err))
	}
	// The budget: one resolution of the class, no launch request at all.
	want := map[string]int{"DescribeSubnets": 1, "CreateFleet": 0, "CreateLaunchTemplate": 0}
	if diff := cmp.Diff(want, h.counts("DescribeSubnets", "CreateFleet", "CreateLaunchTemplate")); diff != "" {
		t.Errorf("requests for %d launches (-want +got):\n%s", attempts, diff)
	}
	for offering, available := range availability(t, h.provider, "m5.large") {
		require.False(t, available, "offering %s is planned while every subnet is full", offering)
	}
}
