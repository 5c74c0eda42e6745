package localaws

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// adminRequest sends a request to the admin API and returns the status and body.
func adminRequest(t *testing.T, h *harness, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(h.ctx, method, h.url+path, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(out)
}

func TestAdminInstances(t *testing.T) {
	h := newHarness(t, Options{})
	image := h.imageID(t, al2023X86Parameter)
	h.launchTemplate(t, "nodes", image, "")
	out := h.fleet(t, "nodes", ec2types.DefaultTargetCapacityTypeSpot, 1, override("m5.large", h.subnets(t)["us-east-1d"]))

	status, body := adminRequest(t, h, http.MethodGet, "/_admin/instances", "")
	require.Equal(t, http.StatusOK, status)
	var got []InstanceSummary
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	want := []InstanceSummary{{
		ID:               launchedIDs(out)[0],
		InstanceType:     "m5.large",
		Zone:             "us-east-1d",
		CapacityType:     "spot",
		PricePerHour:     0.02823,
		State:            "running",
		PrivateDNSName:   "ip-10-0-192-4.ec2.internal",
		PrivateIPAddress: "10.0.192.4",
		ImageID:          image,
		Tags:             got[0].Tags,
		LaunchTime:       testStart,
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("instances (-want +got):\n%s", diff)
	}
	require.Equal(t, "general", got[0].Tags["karpenter.sh/nodepool"])
}

func TestAdminEndpoints(t *testing.T) {
	h := newHarness(t, Options{})
	tests := []struct {
		name, method, path, body string
		wantStatus               int
		wantBody                 string
	}{
		{name: "health", method: http.MethodGet, path: "/_admin/healthz", wantStatus: http.StatusOK, wantBody: "ok"},
		{name: "no instances", method: http.MethodGet, path: "/_admin/instances", wantStatus: http.StatusOK, wantBody: "[]"},
		{name: "no pools short of capacity", method: http.MethodGet, path: "/_admin/insufficient-capacity", wantStatus: http.StatusOK, wantBody: "[]"},
		{
			name: "mark a pool short of capacity", method: http.MethodPut, path: "/_admin/insufficient-capacity",
			body:       `[{"instanceType":"m5.large","zone":"us-east-1a","capacityType":"spot"}]`,
			wantStatus: http.StatusOK, wantBody: `[{"instanceType":"m5.large","zone":"us-east-1a","capacityType":"spot"}]`,
		},
		{
			name: "unknown zone", method: http.MethodPut, path: "/_admin/insufficient-capacity",
			body:       `[{"instanceType":"m5.large","zone":"mars-1a","capacityType":"spot"}]`,
			wantStatus: http.StatusBadRequest, wantBody: "unknown zone \"mars-1a\"\n",
		},
		{name: "wrong method", method: http.MethodPost, path: "/_admin/instances", wantStatus: http.StatusMethodNotAllowed, wantBody: "method not allowed\n"},
		{name: "unknown path", method: http.MethodGet, path: "/_admin/nothing", wantStatus: http.StatusNotFound, wantBody: "404 page not found\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := adminRequest(t, h, tt.method, tt.path, tt.body)
			require.Equal(t, tt.wantStatus, status)
			require.Equal(t, tt.wantBody, body)
		})
	}
}

func TestAdminInsufficientCapacityFailsFleets(t *testing.T) {
	h := newHarness(t, Options{})
	h.launchTemplate(t, "nodes", h.imageID(t, al2023X86Parameter), "")
	subnets := h.subnets(t)
	status, _ := adminRequest(t, h, http.MethodPut, "/_admin/insufficient-capacity", `[{"instanceType":"m5.large","zone":"us-east-1d","capacityType":"spot"}]`)
	require.Equal(t, http.StatusOK, status)

	out := h.fleet(t, "nodes", ec2types.DefaultTargetCapacityTypeSpot, 1, override("m5.large", subnets["us-east-1a"]), override("m5.large", subnets["us-east-1d"]))
	want := fleetSummary{
		Launched: []string{"m5.large@us-east-1a spot x1"},
		Errors:   []string{"InsufficientInstanceCapacity m5.large@us-east-1d spot"},
	}
	if diff := cmp.Diff(want, summarizeFleet(out)); diff != "" {
		t.Errorf("fleet (-want +got):\n%s", diff)
	}
	require.Equal(t, "There is no Spot capacity available that matches your request.", aws.ToString(out.Errors[0].ErrorMessage))
}

// TestAdminKillInstanceAndLaunchCount: DELETE /_admin/instances/<id> terminates a running
// instance at once, without any event, and GET /_admin/launched keeps counting it.
func TestAdminKillInstanceAndLaunchCount(t *testing.T) {
	h := newHarness(t, Options{SQS: SQSOptions{Queues: []string{"interruptions"}}})
	image := h.imageID(t, al2023X86Parameter)
	h.launchTemplate(t, "nodes", image, "")
	out := h.fleet(t, "nodes", ec2types.DefaultTargetCapacityTypeSpot, 2, override("m5.large", h.subnets(t)["us-east-1d"]))
	ids := launchedIDs(out)
	require.Len(t, ids, 2)

	status, body := adminRequest(t, h, http.MethodDelete, "/_admin/instances/"+ids[0], "")
	require.Equal(t, http.StatusNoContent, status, body)
	status, _ = adminRequest(t, h, http.MethodDelete, "/_admin/instances/"+ids[0], "")
	require.Equal(t, http.StatusNotFound, status, "killing a terminated instance again")
	status, _ = adminRequest(t, h, http.MethodDelete, "/_admin/instances/i-0000000000000dead", "")
	require.Equal(t, http.StatusNotFound, status, "an unknown instance")

	states := map[string]string{}
	for _, i := range h.server.Instances() {
		states[i.ID] = i.State
	}
	if diff := cmp.Diff(map[string]string{ids[0]: "terminated", ids[1]: "running"}, states); diff != "" {
		t.Errorf("instance states (-want +got):\n%s", diff)
	}
	status, body = adminRequest(t, h, http.MethodGet, "/_admin/launched", "")
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{"instances": 2}`, body)
	require.Equal(t, []QueueSummary{{Name: "interruptions"}}, h.server.Queues(), "the queue created at start")
}

func TestNewRefusesABadQueueName(t *testing.T) {
	_, err := New(Options{SQS: SQSOptions{Queues: []string{"no spaces"}}})
	require.ErrorContains(t, err, `queue name "no spaces"`)
}
