package aws

import (
	"context"
	"errors"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// apiErrorsMetric counts the errors AWS answers, by service, operation and error code, and
// the errors of CreateFleet's response, which come back in a successful call.
var apiErrorsMetric = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "tailor_cloudprovider_errors_total",
	Help: "Errors AWS answered, by service, operation and error code (throttling and capacity errors included; CreateFleet's per-pool errors too), each attempt counted.",
}, []string{"service", "operation", "code"})

func init() {
	metrics.Registry.MustRegister(Collectors()...)
}

// Collectors are the metrics the AWS provider registers: what init registers, and what the
// metrics reference lists.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{apiErrorsMetric, unavailableOfferingsMetric, priceSourceMetric, refreshedMetric}
}

// countAPIErrors is an SDK middleware that counts every error response by its code.
func countAPIErrors(stack *middleware.Stack) error {
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("TailorCountAPIErrors",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleDeserialize(ctx, in)
			var apiErr smithy.APIError
			if errors.As(err, &apiErr) {
				apiErrorsMetric.WithLabelValues(awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx), apiErr.ErrorCode()).Inc()
			}
			return out, md, err
		}), middleware.Before)
}
