package aws

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// Retry settings of every client: EC2 throttles per account and action
// (RequestLimitExceeded), so a request is retried with capped exponential backoff, within
// the standard retryer's token bucket that stops retry storms when most requests fail.
const (
	retryMaxAttempts = 8
	retryMaxBackoff  = 20 * time.Second
)

// NewRetryer returns the retryer the provider's clients use: the SDK's standard retryer
// with more attempts than its default of 3, which a throttled burst of launches uses up.
// backoff replaces the exponential jittered backoff when not nil (tests use a zero one).
func NewRetryer(backoff retry.BackoffDelayer) aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = retryMaxAttempts
		o.MaxBackoff = retryMaxBackoff
		if backoff != nil {
			o.Backoff = backoff
		}
	})
}
