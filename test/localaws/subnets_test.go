package localaws

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// availableAddresses is DescribeSubnets' AvailableIpAddressCount of the subnet.
func (h *harness) availableAddresses(t *testing.T, subnetID string) int32 {
	t.Helper()
	out, err := h.ec2.DescribeSubnets(h.ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{subnetID}})
	require.NoError(t, err)
	require.Len(t, out.Subnets, 1)
	return aws.ToInt32(out.Subnets[0].AvailableIpAddressCount)
}

// resizeSubnet sets the subnet's size through the admin API.
func (h *harness) resizeSubnet(t *testing.T, subnetID string, addresses int) {
	t.Helper()
	status, body := adminRequest(t, h, http.MethodPatch, "/_admin/subnets", fmt.Sprintf(`[{"id":%q,"addresses":%d}]`, subnetID, addresses))
	require.Equal(t, http.StatusOK, status, body)
}

func TestAvailableAddressesFollowLaunchesAndTerminations(t *testing.T) {
	h := newHarness(t, Options{})
	h.launchTemplate(t, "nodes", h.imageID(t, al2023X86Parameter), "")
	subnet := h.subnets(t)["us-east-1a"]
	require.Equal(t, int32(16379), h.availableAddresses(t, subnet), "a /18 less AWS's five addresses")

	h.resizeSubnet(t, subnet, 3)
	out := h.fleet(t, "nodes", ec2types.DefaultTargetCapacityTypeOnDemand, 2, override("m5.large", subnet))
	ids := launchedIDs(out)
	require.Len(t, ids, 2)
	require.Equal(t, int32(1), h.availableAddresses(t, subnet), "after two launches")

	_, err := h.ec2.TerminateInstances(h.ctx, &ec2.TerminateInstancesInput{InstanceIds: ids[:1]})
	require.NoError(t, err)
	require.Equal(t, int32(2), h.availableAddresses(t, subnet), "after one termination")

	status, body := adminRequest(t, h, http.MethodGet, "/_admin/subnets", "")
	require.Equal(t, http.StatusOK, status)
	var got []SubnetSummary
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	want := SubnetSummary{ID: subnet, Zone: "us-east-1a", CIDR: "10.0.0.0/18", Addresses: 3, AvailableIPAddressCount: 2}
	if diff := cmp.Diff(want, got[0]); diff != "" {
		t.Errorf("admin subnet (-want +got):\n%s", diff)
	}
}

func TestLaunchIntoAFullSubnet(t *testing.T) {
	tests := []struct {
		name      string
		addresses map[string]int
		count     int32
		want      fleetSummary
	}{
		{
			name:      "every override's subnet full reports each",
			addresses: map[string]int{"us-east-1a": 0, "us-east-1b": 0},
			count:     1,
			want: fleetSummary{Errors: []string{
				"InsufficientFreeAddressesInSubnet m5.large@us-east-1a on-demand",
				"InsufficientFreeAddressesInSubnet m5.large@us-east-1b on-demand",
			}},
		},
		{
			name:      "a full subnet's override is skipped for another",
			addresses: map[string]int{"us-east-1a": 0},
			count:     1,
			want: fleetSummary{
				Launched: []string{"m5.large@us-east-1b on-demand x1"},
				Errors:   []string{"InsufficientFreeAddressesInSubnet m5.large@us-east-1a on-demand"},
			},
		},
		{
			name:      "a subnet filling up during the fleet launches what fits",
			addresses: map[string]int{"us-east-1a": 1, "us-east-1b": 1},
			count:     2,
			want: fleetSummary{
				Launched: []string{"m5.large@us-east-1a on-demand x1"},
				Errors:   []string{"InsufficientFreeAddressesInSubnet m5.large@us-east-1a on-demand"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.launchTemplate(t, "nodes", h.imageID(t, al2023X86Parameter), "")
			subnets := h.subnets(t)
			for z, n := range tt.addresses {
				h.resizeSubnet(t, subnets[z], n)
			}
			out := h.fleet(t, "nodes", ec2types.DefaultTargetCapacityTypeOnDemand, tt.count, override("m5.large", subnets["us-east-1a"]), override("m5.large", subnets["us-east-1b"]))
			if diff := cmp.Diff(tt.want, summarizeFleet(out)); diff != "" {
				t.Errorf("fleet (-want +got):\n%s", diff)
			}
			for _, e := range out.Errors {
				want := fmt.Sprintf("There are not enough free addresses in subnet '%s' to satisfy the requested number of instances.", aws.ToString(e.LaunchTemplateAndOverrides.Overrides.SubnetId))
				require.Equal(t, want, aws.ToString(e.ErrorMessage))
			}
		})
	}
}

func TestResizingASubnetBeyondItsPrefixIsRefused(t *testing.T) {
	h := newHarness(t, Options{})
	status, body := adminRequest(t, h, http.MethodPatch, "/_admin/subnets", fmt.Sprintf(`[{"id":%q,"addresses":20000}]`, h.subnets(t)["us-east-1a"]))
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, body, "holds 0 to 16379 addresses, not 20000")
}

// TestAnAddressIsHandedOutAgainOnlyOnceTheFreshOnesAreGone: the node of an instance just
// terminated may still be going away, and a new instance with its address would register a
// node of the same name.
func TestAnAddressIsHandedOutAgainOnlyOnceTheFreshOnesAreGone(t *testing.T) {
	prefix := netip.MustParsePrefix("10.0.0.0/29")
	sn := &subnet{prefix: prefix, nextHost: reservedHosts}
	sn.addresses = sn.capacity()
	take := func() string {
		t.Helper()
		addr, ok := sn.takeAddress()
		if !ok {
			t.Fatal("no free address")
		}
		return addr.String()
	}
	first := take()
	sn.releaseAddress(first)
	second := take()
	if second == first {
		t.Fatalf("the address %s released a moment ago was handed out again while fresh ones were left", first)
	}
	// A /29 holds three instances: the third address is the last fresh one.
	if third := take(); third == first {
		t.Fatalf("the address %s released a moment ago was handed out again while a fresh one was left", first)
	}
	if fourth := take(); fourth != first {
		t.Errorf("once the fresh addresses are gone, got %s, want the one released, %s", fourth, first)
	}
	if addr, ok := sn.takeAddress(); ok {
		t.Errorf("address %s was handed out from a full subnet", addr)
	}
}
