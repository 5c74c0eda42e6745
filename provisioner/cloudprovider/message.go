package cloudprovider

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// encodedAuthorizationMessage is the end of an IAM denial's message in EC2: an encoded
// account of the denial that differs on every request (aws sts decode-authorization-message
// reads it).
var encodedAuthorizationMessage = regexp.MustCompile(`Encoded authorization failure message: [A-Za-z0-9_\-+/=]+`)

// Message renders err for users, in the status conditions and events they read with
// kubectl: err's text without what differs from one response to the next. An AWS SDK error
// reads "EC2 DescribeImages: InvalidAMIID.NotFound: The image id '[ami-1]' does not exist"
// rather than "operation error EC2: DescribeImages, https response error StatusCode: 400,
// RequestID: 8f0c…, api error InvalidAMIID.NotFound: …", and the encoded message of an IAM
// denial is left to the log. A condition then reads the same on every attempt, so a failure
// that persists writes it once instead of once per attempt (each write triggering the next
// attempt). The log keeps the full error, request id included.
func Message(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	for _, op := range operationErrors(err) {
		msg = strings.ReplaceAll(msg, op.Error(), operationMessage(op))
	}
	return encodedAuthorizationMessage.ReplaceAllString(msg, "Encoded authorization failure message in the log")
}

// operationErrors returns the SDK operation errors in err's tree, outermost first.
func operationErrors(err error) []*smithy.OperationError {
	switch e := err.(type) {
	case *smithy.OperationError:
		return []*smithy.OperationError{e}
	case interface{ Unwrap() error }:
		if inner := e.Unwrap(); inner != nil {
			return operationErrors(inner)
		}
	case interface{ Unwrap() []error }:
		var out []*smithy.OperationError
		for _, inner := range e.Unwrap() {
			if inner != nil {
				out = append(out, operationErrors(inner)...)
			}
		}
		return out
	}
	return nil
}

// operationMessage renders an SDK operation error as service, operation and what went wrong.
func operationMessage(op *smithy.OperationError) string {
	return op.ServiceID + " " + op.OperationName + ": " + causeMessage(op.Err)
}

// causeMessage renders why an operation failed: the error AWS answered (code and message),
// else the HTTP status, else why the request could not be sent.
func causeMessage(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		if m := apiErr.ErrorMessage(); m != "" {
			return apiErr.ErrorCode() + ": " + m
		}
		return apiErr.ErrorCode()
	}
	var respErr *smithyhttp.ResponseError
	if errors.As(err, &respErr) {
		return fmt.Sprintf("HTTP status %d: %v", respErr.HTTPStatusCode(), respErr.Err)
	}
	// A network error names the address dialed, which DNS may answer differently each time.
	var netErr *net.OpError
	if errors.As(err, &netErr) && netErr.Err != nil {
		return "sending the request: " + strings.TrimSpace(netErr.Op+" "+netErr.Net) + ": " + netErr.Err.Error()
	}
	return err.Error()
}
