package cloudprovider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/google/go-cmp/cmp"
)

// sdkError is the error the AWS SDK returns for an operation AWS answered with an error:
// its text carries the HTTP status and the request id.
func sdkError(service, operation string, status int, requestID string, apiErr error) error {
	return &smithy.OperationError{ServiceID: service, OperationName: operation, Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: apiErr},
		RequestID:     requestID,
	}}
}

func TestMessage(t *testing.T) {
	missingAMI := &smithy.GenericAPIError{Code: "InvalidAMIID.NotFound", Message: "The image id '[ami-0123]' does not exist"}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{name: "no error", err: nil, want: ""},
		{name: "not an AWS error", err: errors.New("spec.amiFamily AL2 contradicts the alias"), want: "spec.amiFamily AL2 contradicts the alias"},
		{
			name: "an AWS error wrapped by the callers",
			err:  NewNodeClassNotReadyError(fmt.Errorf("EC2NodeClass %q: resolving amiSelectorTerms: describing images: %w", "default", sdkError("EC2", "DescribeImages", 400, "8f0c1d2e-request", missingAMI))),
			want: `node class not ready: EC2NodeClass "default": resolving amiSelectorTerms: describing images: EC2 DescribeImages: InvalidAMIID.NotFound: The image id '[ami-0123]' does not exist`,
		},
		{
			name: "an error code without a message",
			err:  sdkError("SSM", "GetParameter", 400, "r-1", &smithy.GenericAPIError{Code: "ParameterNotFound"}),
			want: "SSM GetParameter: ParameterNotFound",
		},
		{
			name: "the encoded message of an IAM denial",
			err: fmt.Errorf("creating fleet: %w", sdkError("EC2", "CreateFleet", 403, "r-2", &smithy.GenericAPIError{
				Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation. Encoded authorization failure message: AbC-12_x/y+z=",
			})),
			want: "creating fleet: EC2 CreateFleet: UnauthorizedOperation: You are not authorized to perform this operation. Encoded authorization failure message in the log",
		},
		{
			name: "CreateFleet's per-pool denial, outside any SDK error",
			err:  errors.New("CreateFleet launched nothing: UnauthorizedOperation: Not authorized. Encoded authorization failure message: QkFE; m5.large in us-east-1a as spot: InsufficientInstanceCapacity: none"),
			want: "CreateFleet launched nothing: UnauthorizedOperation: Not authorized. Encoded authorization failure message in the log; m5.large in us-east-1a as spot: InsufficientInstanceCapacity: none",
		},
		{
			name: "an HTTP status without an API error",
			err:  sdkError("Pricing", "GetProducts", 502, "r-3", errors.New("failed to decode response body")),
			want: "Pricing GetProducts: HTTP status 502: failed to decode response body",
		},
		{
			name: "a request that could not be sent names no address",
			err: &smithy.OperationError{ServiceID: "EC2", OperationName: "DescribeSubnets", Err: &smithyhttp.RequestSendError{
				Err: &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(52, 94, 1, 2), Port: 443}, Err: errors.New("i/o timeout")},
			}},
			want: "EC2 DescribeSubnets: sending the request: dial tcp: i/o timeout",
		},
		{
			name: "a cancelled request",
			err:  &smithy.OperationError{ServiceID: "EC2", OperationName: "CreateFleet", Err: context.Canceled},
			want: "EC2 CreateFleet: context canceled",
		},
		{
			name: "every AWS error of a joined error",
			err: errors.Join(
				fmt.Errorf("resolving subnetSelectorTerms: %w", sdkError("EC2", "DescribeSubnets", 400, "r-4", &smithy.GenericAPIError{Code: "InvalidSubnetID.NotFound", Message: "no subnet"})),
				fmt.Errorf("reading SSM parameter /x: %w", sdkError("SSM", "GetParameter", 400, "r-5", &smithy.GenericAPIError{Code: "ParameterNotFound", Message: "Parameter /x not found."})),
			),
			want: "resolving subnetSelectorTerms: EC2 DescribeSubnets: InvalidSubnetID.NotFound: no subnet\nreading SSM parameter /x: SSM GetParameter: ParameterNotFound: Parameter /x not found.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Message(tt.err)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Message() (-want +got):\n%s", diff)
			}
			if strings.Contains(got, "RequestID") {
				t.Errorf("Message() kept the request id: %s", got)
			}
		})
	}
}

// TestMessageIsTheSameForEveryResponse renders two failures of one request that differ only
// by their request ids and encoded denials: users see one message.
func TestMessageIsTheSameForEveryResponse(t *testing.T) {
	attempt := func(requestID, encoded string) error {
		return fmt.Errorf("launching: %w", sdkError("EC2", "CreateFleet", 403, requestID, &smithy.GenericAPIError{
			Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation. Encoded authorization failure message: " + encoded,
		}))
	}
	first, second := attempt("5c7e-1", "Zm9v"), attempt("9a1b-2", "YmFy")
	if first.Error() == second.Error() {
		t.Fatal("the two errors read the same; the test needs them to differ")
	}
	if diff := cmp.Diff(Message(first), Message(second)); diff != "" {
		t.Errorf("messages of two attempts differ (-first +second):\n%s", diff)
	}
}
