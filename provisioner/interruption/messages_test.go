package interruption

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The messages are EventBridge's, as the EC2 and AWS Health user guides show them.
const (
	spotInterruptionBody = `{
  "version": "0",
  "id": "12345678-1234-1234-1234-123456789012",
  "detail-type": "EC2 Spot Instance Interruption Warning",
  "source": "aws.ec2",
  "account": "123456789012",
  "time": "2026-11-20T10:00:00Z",
  "region": "us-east-2",
  "resources": ["arn:aws:ec2:us-east-2a:instance/i-1234567890abcdef0"],
  "detail": {"instance-id": "i-1234567890abcdef0", "instance-action": "terminate"}
}`
	rebalanceBody = `{
  "version": "0",
  "id": "12345678-1234-1234-1234-123456789013",
  "detail-type": "EC2 Instance Rebalance Recommendation",
  "source": "aws.ec2",
  "account": "123456789012",
  "time": "2026-11-20T10:00:00Z",
  "region": "us-east-2",
  "resources": ["arn:aws:ec2:us-east-2:123456789012:instance/i-1234567890abcdef0"],
  "detail": {"instance-id": "i-1234567890abcdef0"}
}`
	stateChangeBody = `{
  "version": "0",
  "id": "7bf73129-1428-4cd3-a780-95db273d1602",
  "detail-type": "EC2 Instance State-change Notification",
  "source": "aws.ec2",
  "account": "123456789012",
  "time": "2026-11-20T10:00:00Z",
  "region": "us-east-1",
  "resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-abcd1111"],
  "detail": {"instance-id": "i-abcd1111", "state": "stopping"}
}`
	scheduledChangeBody = `{
  "version": "0",
  "id": "7fb65329-1628-4cf3-a740-95fg457h1402",
  "detail-type": "AWS Health Event",
  "source": "aws.health",
  "account": "123456789012",
  "time": "2026-11-20T10:00:00Z",
  "region": "us-east-1",
  "resources": ["i-abcd1111", "i-abcd2222"],
  "detail": {
    "eventArn": "arn:aws:health:us-east-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED_ABC123-DEF456",
    "service": "EC2",
    "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
    "eventTypeCategory": "scheduledChange",
    "startTime": "Sat, 21 Nov 2026 15:10:09 GMT",
    "endTime": "Sat, 28 Nov 2026 15:10:09 GMT",
    "eventDescription": [{"language": "en_US", "latestDescription": "A description of the event will be provided here"}],
    "affectedEntities": [{"entityValue": "i-abcd1111"}, {"entityValue": "i-abcd2222"}]
  }
}`
)

func TestParse(t *testing.T) {
	at := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		body        string
		want        Message
		wantUnknown bool
	}{
		{
			name: "spot interruption warning: reclaimed two minutes after the event",
			body: spotInterruptionBody,
			want: Message{ID: "12345678-1234-1234-1234-123456789012", Kind: KindSpotInterruption, InstanceIDs: []string{"i-1234567890abcdef0"},
				Time: at, Deadline: at.Add(2 * time.Minute)},
		},
		{
			name: "rebalance recommendation: no deadline",
			body: rebalanceBody,
			want: Message{ID: "12345678-1234-1234-1234-123456789013", Kind: KindRebalanceRecommendation, InstanceIDs: []string{"i-1234567890abcdef0"}, Time: at},
		},
		{
			name: "state change: deadline is now",
			body: stateChangeBody,
			want: Message{ID: "7bf73129-1428-4cd3-a780-95db273d1602", Kind: KindStateChange, InstanceIDs: []string{"i-abcd1111"}, State: "stopping", Time: at, Deadline: at},
		},
		{
			name: "health scheduled change: every affected instance, deadline is the start",
			body: scheduledChangeBody,
			want: Message{ID: "7fb65329-1628-4cf3-a740-95fg457h1402", Kind: KindScheduledChange, InstanceIDs: []string{"i-abcd1111", "i-abcd2222"},
				Time: at, Deadline: time.Date(2026, 11, 21, 15, 10, 9, 0, time.UTC)},
		},
		{
			name:        "health event of another service",
			body:        `{"version":"0","id":"x","detail-type":"AWS Health Event","source":"aws.health","time":"2026-11-20T10:00:00Z","detail":{"service":"RDS","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"db-1"}]}}`,
			wantUnknown: true,
		},
		{
			name:        "health issue, not a scheduled change",
			body:        `{"version":"0","id":"x","detail-type":"AWS Health Event","source":"aws.health","time":"2026-11-20T10:00:00Z","detail":{"service":"EC2","eventTypeCategory":"issue","affectedEntities":[{"entityValue":"i-abcd1111"}]}}`,
			wantUnknown: true,
		},
		{
			name:        "spot warning without an instance",
			body:        `{"version":"0","id":"x","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","time":"2026-11-20T10:00:00Z","detail":{}}`,
			wantUnknown: true,
		},
		{
			name:        "state change without a state",
			body:        `{"version":"0","id":"x","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","time":"2026-11-20T10:00:00Z","detail":{"instance-id":"i-1"}}`,
			wantUnknown: true,
		},
		{
			name:        "detail of the wrong type",
			body:        `{"version":"0","id":"x","detail-type":"EC2 Instance Rebalance Recommendation","source":"aws.ec2","time":"2026-11-20T10:00:00Z","detail":"i-1"}`,
			wantUnknown: true,
		},
		{
			name:        "an S3 test event",
			body:        `{"Service":"Amazon S3","Event":"s3:TestEvent","Time":"2026-11-20T10:00:00.000Z","Bucket":"b"}`,
			wantUnknown: true,
		},
		{name: "not JSON", body: "hello", wantUnknown: true},
		{name: "empty", body: "", wantUnknown: true},
		{name: "truncated", body: spotInterruptionBody[:80], wantUnknown: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.body)
			if tt.wantUnknown {
				if !IsUnknownMessageError(err) {
					t.Fatalf("Parse() error = %v, want an UnknownMessageError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse() (-want +got):\n%s", diff)
			}
		})
	}
}
