package localaws

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// patchFaults changes faults through the admin API and returns what it answers.
func patchFaults(t *testing.T, h *harness, body string) Faults {
	t.Helper()
	status, out := adminRequest(t, h, http.MethodPatch, "/_admin/faults", body)
	require.Equal(t, http.StatusOK, status, out)
	var f Faults
	require.NoError(t, json.Unmarshal([]byte(out), &f))
	return f
}

// requestCounts reads the request counts through the admin API.
func requestCounts(t *testing.T, h *harness) map[string]int {
	t.Helper()
	status, out := adminRequest(t, h, http.MethodGet, "/_admin/requests", "")
	require.Equal(t, http.StatusOK, status, out)
	counts := map[string]int{}
	require.NoError(t, json.Unmarshal([]byte(out), &counts))
	return counts
}

func TestAdminFaultsPatchChangesOnlyTheFieldsSent(t *testing.T) {
	h := newHarness(t, Options{})
	patchFaults(t, h, `{"throttleRate":0.25,"throttleActions":["CreateFleet"]}`)
	got := patchFaults(t, h, `{"launchLatency":"1.5s","bootDelay":"30s","neverRegisterNext":2}`)
	want := Faults{
		ThrottleRate: 0.25, ThrottleActions: []string{"CreateFleet"},
		LaunchLatency: Duration{1500 * time.Millisecond}, BootDelay: &Duration{30 * time.Second}, NeverRegisterNext: 2,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("faults (-want +got):\n%s", diff)
	}
	for _, bad := range []string{`{"throttleRate":2}`, `{"launchLatency":"soon"}`, `{"fleetMaxInstances":-1}`} {
		status, _ := adminRequest(t, h, http.MethodPatch, "/_admin/faults", bad)
		require.Equal(t, http.StatusBadRequest, status, bad)
	}
}

func TestThrottlingAnswersEachProtocolsThrottlingError(t *testing.T) {
	tests := []struct {
		name     string
		call     func(h *harness, retry bool) error
		wantCode string
	}{
		{
			name: "EC2 query",
			call: func(h *harness, retry bool) error {
				var opts []func(*ec2.Options)
				if !retry {
					opts = append(opts, func(o *ec2.Options) { o.Retryer = aws.NopRetryer{} })
				}
				_, err := h.ec2.DescribeAvailabilityZones(h.ctx, &ec2.DescribeAvailabilityZonesInput{}, opts...)
				return err
			},
			wantCode: "RequestLimitExceeded",
		},
		{
			name: "SSM JSON",
			call: func(h *harness, retry bool) error {
				var opts []func(*ssm.Options)
				if !retry {
					opts = append(opts, func(o *ssm.Options) { o.Retryer = aws.NopRetryer{} })
				}
				_, err := h.ssm.GetParameter(h.ctx, &ssm.GetParameterInput{Name: aws.String(al2023X86Parameter)}, opts...)
				return err
			},
			wantCode: "ThrottlingException",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			patchFaults(t, h, `{"throttleRate":1}`)
			require.Equal(t, tt.wantCode, errorCode(t, tt.call(h, false)))

			// Half the requests throttled: every second one, which the SDK's retryer absorbs.
			patchFaults(t, h, `{"throttleRate":0.5}`)
			for range 4 {
				require.NoError(t, tt.call(h, true))
			}
		})
	}
}

func TestRequestCountsCountEveryRequestPerAction(t *testing.T) {
	h := newHarness(t, Options{})
	patchFaults(t, h, `{"throttleRate":0.5,"throttleActions":["DescribeAvailabilityZones"]}`)
	for range 3 {
		_, err := h.ec2.DescribeAvailabilityZones(h.ctx, &ec2.DescribeAvailabilityZonesInput{})
		require.NoError(t, err)
	}
	_, err := h.ec2.DescribeSubnets(h.ctx, &ec2.DescribeSubnetsInput{})
	require.NoError(t, err)
	// Every second request is throttled and retried: ok; throttled, ok; throttled, ok.
	if diff := cmp.Diff(map[string]int{"DescribeAvailabilityZones": 5, "DescribeSubnets": 1}, requestCounts(t, h)); diff != "" {
		t.Errorf("request counts (-want +got):\n%s", diff)
	}
	status, _ := adminRequest(t, h, http.MethodDelete, "/_admin/requests", "")
	require.Equal(t, http.StatusOK, status)
	require.Empty(t, requestCounts(t, h))
}

func TestFailActionsAnswerEveryRequestOfTheActionWithItsError(t *testing.T) {
	h := newHarness(t, Options{})
	patchFaults(t, h, `{"failActions":{"DescribeInstances":{"code":"UnauthorizedOperation","message":"You are not authorized to perform this operation."},"GetProducts":{"code":"InternalErrorException","status":500}}}`)
	noRetry := func(o *ec2.Options) { o.Retryer = aws.NopRetryer{} }
	var messages []string
	for range 2 {
		_, err := h.ec2.DescribeInstances(h.ctx, &ec2.DescribeInstancesInput{}, noRetry)
		var apiErr smithy.APIError
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, "UnauthorizedOperation", apiErr.ErrorCode())
		require.Contains(t, apiErr.ErrorMessage(), "You are not authorized to perform this operation. Encoded authorization failure message: ")
		messages = append(messages, apiErr.ErrorMessage())
	}
	require.NotEqual(t, messages[0], messages[1], "the encoded authorization failure message differs per request")

	_, err := h.pricing.GetProducts(h.ctx, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2")}, func(o *pricing.Options) { o.Retryer = aws.NopRetryer{} })
	require.Equal(t, "InternalErrorException", errorCode(t, err))
	var respErr *smithyhttp.ResponseError
	require.ErrorAs(t, err, &respErr)
	require.Equal(t, http.StatusInternalServerError, respErr.HTTPStatusCode())

	// Other actions answer as usual.
	_, err = h.ec2.DescribeSubnets(h.ctx, &ec2.DescribeSubnetsInput{})
	require.NoError(t, err)
	if diff := cmp.Diff(map[string]int{"DescribeInstances": 2, "GetProducts": 1, "DescribeSubnets": 1}, requestCounts(t, h)); diff != "" {
		t.Errorf("request counts (-want +got):\n%s", diff)
	}
	for _, bad := range []string{`{"failActions":{"CreateFleet":{}}}`, `{"failActions":{"CreateFleet":{"code":"X","status":200}}}`} {
		status, _ := adminRequest(t, h, http.MethodPatch, "/_admin/faults", bad)
		require.Equal(t, http.StatusBadRequest, status, bad)
	}
}

func TestPartialFleetFulfilment(t *testing.T) {
	tests := []struct {
		name       string
		faults     string
		want       int
		wantErrors []string
	}{
		{name: "no limit", faults: `{}`, want: 3},
		{name: "one of three", faults: `{"fleetMaxInstances":1}`, want: 1, wantErrors: []string{"InsufficientInstanceCapacity"}},
		{name: "none, with the error code asked for", faults: `{"fleetMaxInstances":0,"fleetErrorCode":"UnfulfillableCapacity"}`, want: 0, wantErrors: []string{"UnfulfillableCapacity"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			patchFaults(t, h, tt.faults)
			h.launchTemplate(t, "nodes", h.imageID(t, al2023X86Parameter), "")
			out := h.fleet(t, "nodes", ec2types.DefaultTargetCapacityTypeOnDemand, 3, override("m5.large", h.subnets(t)["us-east-1a"]))
			require.Len(t, launchedIDs(out), tt.want)
			var codes []string
			for _, e := range out.Errors {
				codes = append(codes, aws.ToString(e.ErrorCode))
			}
			if diff := cmp.Diff(tt.wantErrors, codes); diff != "" {
				t.Errorf("fleet errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLaunchLatencyDelaysCreateFleet(t *testing.T) {
	h := newHarness(t, Options{})
	h.launchTemplate(t, "nodes", h.imageID(t, al2023X86Parameter), "")
	subnet := h.subnets(t)["us-east-1a"]
	patchFaults(t, h, `{"launchLatency":"5s"}`)
	done := make(chan *ec2.CreateFleetOutput)
	go func() {
		done <- h.fleet(t, "nodes", ec2types.DefaultTargetCapacityTypeOnDemand, 1, override("m5.large", subnet))
	}()
	require.Eventually(t, h.clock.HasWaiters, 5*time.Second, time.Millisecond, "CreateFleet waits on the clock")
	h.clock.Step(4 * time.Second)
	select {
	case <-done:
		t.Fatal("CreateFleet answered before the launch latency")
	case <-time.After(20 * time.Millisecond):
	}
	h.clock.Step(time.Second)
	require.Len(t, launchedIDs(<-done), 1)
}

func TestBootDelayAndInstancesThatNeverRegister(t *testing.T) {
	h := newHarness(t, Options{BootDelay: time.Second})
	nodes := newFakeNodes()
	h.server.nodes = nodes
	h.launchTemplate(t, "nodes", h.imageID(t, al2023X86Parameter), "")
	subnet := h.subnets(t)["us-east-1a"]
	patchFaults(t, h, `{"launchDelay":"2s","bootDelay":"10s","neverRegisterNext":1}`)
	lost := launchedIDs(h.fleet(t, "nodes", ec2types.DefaultTargetCapacityTypeOnDemand, 1, override("m5.large", subnet)))[0]
	slow := launchedIDs(h.fleet(t, "nodes", ec2types.DefaultTargetCapacityTypeOnDemand, 1, override("m5.large", subnet)))[0]

	registered := func() map[string]bool {
		out := map[string]bool{}
		for _, i := range h.server.Instances() {
			out[i.ID] = i.NodeRegistered
		}
		return out
	}
	steps := []struct {
		advance   time.Duration
		wantState string
		want      map[string]bool
	}{
		{advance: time.Second, wantState: "pending", want: map[string]bool{lost: false, slow: false}},
		{advance: 2 * time.Second, wantState: "running", want: map[string]bool{lost: false, slow: false}},
		{advance: 9 * time.Second, wantState: "running", want: map[string]bool{lost: false, slow: true}},
		{advance: time.Hour, wantState: "running", want: map[string]bool{lost: false, slow: true}},
	}
	for _, step := range steps {
		h.clock.Step(step.advance)
		h.server.sync(h.ctx)
		if diff := cmp.Diff(step.want, registered()); diff != "" {
			t.Errorf("after %s: registered (-want +got):\n%s", step.advance, diff)
		}
		require.Equal(t, step.wantState, h.server.Instances()[1].State)
	}
	require.True(t, h.server.Instances()[0].NeverRegisters)
	require.Equal(t, 0, h.server.Faults().NeverRegisterNext, "the countdown is used up")
}
