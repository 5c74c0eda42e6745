package interruption

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParse reads SQS bodies: either an UnknownMessageError, or a message of a known kind
// about at least one instance id, each taken from the body, with the deadline its kind sets.
func FuzzParse(f *testing.F) {
	for _, body := range []string{
		spotInterruptionBody, rebalanceBody, stateChangeBody, scheduledChangeBody,
		"", "null", "[]", `{"source":"aws.ec2"}`,
		`{"source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","detail":null}`,
		`{"source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","detail":{"instance-id":"i-1"}}`,
		`{"source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","time":"0001-01-01T00:00:00Z","detail":{"instance-id":"i-"}}`,
		`{"source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","time":"9999-12-31T23:59:59Z","detail":{"instance-id":"i-1"}}`,
		`{"source":"aws.health","detail-type":"AWS Health Event","detail":{"service":"EC2","eventTypeCategory":"scheduledChange","startTime":"yesterday","affectedEntities":[{"entityValue":"i-1"}]}}`,
		`{"source":"aws.health","detail-type":"AWS Health Event","detail":{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"vol-1"},null]}}`,
		`{"source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","detail":"i-1"}`,
	} {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		m, err := Parse(body)
		if err != nil {
			require.True(t, IsUnknownMessageError(err), "error %v is not an UnknownMessageError", err)
			require.Zero(t, m)
			return
		}
		require.Contains(t, []Kind{KindSpotInterruption, KindRebalanceRecommendation, KindScheduledChange, KindStateChange}, m.Kind)
		require.NotEmpty(t, m.InstanceIDs)
		for _, id := range m.InstanceIDs {
			require.True(t, strings.HasPrefix(id, "i-"), "instance id %q", id)
		}
		switch m.Kind {
		case KindSpotInterruption:
			require.Equal(t, m.Time.Add(spotReclaimWarning), m.Deadline)
		case KindRebalanceRecommendation:
			require.True(t, m.Deadline.IsZero())
		case KindStateChange:
			require.NotEmpty(t, m.State)
			require.Equal(t, m.Time, m.Deadline)
		}
	})
}
