// Package apierror reads the error codes AWS answers with and counts them by service,
// operation and code.
package apierror

import (
	"context"
	"errors"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	"github.com/prometheus/client_golang/prometheus"
)

// errorsMetric counts the errors AWS answers, by service, operation and error code, and
// the errors of CreateFleet's response, which come back in a successful call.
var errorsMetric = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "tailor_cloudprovider_errors_total",
	Help: "Errors AWS answered, by service, operation and error code (throttling and capacity errors included; CreateFleet's per-pool errors too), each attempt counted.",
}, []string{"service", "operation", "code"})

// Collectors are the metrics of the package.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{errorsMetric}
}

// Code is the error code AWS answered with, "" when err is no AWS API error.
func Code(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}

// Is reports whether err is an AWS API error with the code.
func Is(err error, code string) bool {
	return err != nil && Code(err) == code
}

// Count counts an error AWS reported outside an error response, as CreateFleet reports the
// errors of its pools.
func Count(service, operation, code string) {
	errorsMetric.WithLabelValues(service, operation, code).Inc()
}

// CountErrors is an SDK middleware that counts every error response by its code.
func CountErrors(stack *middleware.Stack) error {
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("TailorCountAPIErrors",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleDeserialize(ctx, in)
			var apiErr smithy.APIError
			if errors.As(err, &apiErr) {
				errorsMetric.WithLabelValues(awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx), apiErr.ErrorCode()).Inc()
			}
			return out, md, err
		}), middleware.Before)
}
