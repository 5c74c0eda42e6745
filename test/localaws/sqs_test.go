package localaws

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// sqsClient is the real SDK client pointed at the harness.
func (h *harness) sqsClient() *sqs.Client {
	return sqs.New(sqs.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(h.url),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDLOCAL", "local-secret", ""),
	})
}

func TestSQSQueueLifecycleThroughTheSDK(t *testing.T) {
	h := newHarness(t, Options{})
	client := h.sqsClient()

	_, err := client.GetQueueUrl(h.ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("interruptions")})
	var missing *sqstypes.QueueDoesNotExist
	require.ErrorAs(t, err, &missing, "a queue that was never created")

	created, err := client.CreateQueue(h.ctx, &sqs.CreateQueueInput{QueueName: aws.String("interruptions")})
	require.NoError(t, err)
	require.Equal(t, h.url+"/123456789012/interruptions", aws.ToString(created.QueueUrl))
	got, err := client.GetQueueUrl(h.ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("interruptions")})
	require.NoError(t, err)
	url := got.QueueUrl
	require.Equal(t, created.QueueUrl, url)

	for _, body := range []string{"one", "two", "three"} {
		sent, err := client.SendMessage(h.ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String(body)})
		require.NoError(t, err, "the SDK checks the body's MD5")
		require.NotEmpty(t, aws.ToString(sent.MessageId))
	}

	recv, err := client.ReceiveMessage(h.ctx, &sqs.ReceiveMessageInput{
		QueueUrl: url, MaxNumberOfMessages: 2, VisibilityTimeout: 60,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameApproximateReceiveCount},
	})
	require.NoError(t, err, "the SDK checks every body's MD5")
	var bodies []string
	for _, m := range recv.Messages {
		bodies = append(bodies, aws.ToString(m.Body))
		require.Equal(t, "1", m.Attributes["ApproximateReceiveCount"])
	}
	if diff := cmp.Diff([]string{"one", "two"}, bodies); diff != "" {
		t.Errorf("first receive, oldest first, at most MaxNumberOfMessages (-want +got):\n%s", diff)
	}
	require.Equal(t, map[string]string{"ApproximateNumberOfMessages": "1", "ApproximateNumberOfMessagesNotVisible": "2"}, h.queueCounts(t, client, url))

	// "one" is deleted alone, "two" in a batch with a malformed handle that fails on its own.
	_, err = client.DeleteMessage(h.ctx, &sqs.DeleteMessageInput{QueueUrl: url, ReceiptHandle: recv.Messages[0].ReceiptHandle})
	require.NoError(t, err)
	batch, err := client.DeleteMessageBatch(h.ctx, &sqs.DeleteMessageBatchInput{QueueUrl: url, Entries: []sqstypes.DeleteMessageBatchRequestEntry{
		{Id: aws.String("a"), ReceiptHandle: recv.Messages[1].ReceiptHandle},
		{Id: aws.String("b"), ReceiptHandle: aws.String("garbage")},
	}})
	require.NoError(t, err)
	require.Len(t, batch.Successful, 1)
	require.Equal(t, "a", aws.ToString(batch.Successful[0].Id))
	require.Len(t, batch.Failed, 1)
	require.Equal(t, "ReceiptHandleIsInvalid", aws.ToString(batch.Failed[0].Code))

	// The received-but-kept visibility ends on the server's clock.
	recv, err = client.ReceiveMessage(h.ctx, &sqs.ReceiveMessageInput{QueueUrl: url, MaxNumberOfMessages: 10, VisibilityTimeout: 30})
	require.NoError(t, err)
	require.Len(t, recv.Messages, 1)
	require.Equal(t, "three", aws.ToString(recv.Messages[0].Body))
	recv, err = client.ReceiveMessage(h.ctx, &sqs.ReceiveMessageInput{QueueUrl: url})
	require.NoError(t, err)
	require.Empty(t, recv.Messages, "three is in flight")
	h.clock.Step(31 * time.Second)
	recv, err = client.ReceiveMessage(h.ctx, &sqs.ReceiveMessageInput{QueueUrl: url})
	require.NoError(t, err)
	require.Len(t, recv.Messages, 1, "three is visible again once its visibility timeout ran out")
	_, err = client.DeleteMessage(h.ctx, &sqs.DeleteMessageInput{QueueUrl: url, ReceiptHandle: recv.Messages[0].ReceiptHandle})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0"}, h.queueCounts(t, client, url))

	_, err = client.ReceiveMessage(h.ctx, &sqs.ReceiveMessageInput{QueueUrl: url, MaxNumberOfMessages: 11})
	require.Equal(t, "InvalidParameterValue", errorCode(t, err))
}

func TestSQSLongPollWaitsForAMessageAndIsCapped(t *testing.T) {
	h := newHarness(t, Options{SQS: SQSOptions{MaxWait: 300 * time.Millisecond}})
	client := h.sqsClient()
	created, err := client.CreateQueue(h.ctx, &sqs.CreateQueueInput{QueueName: aws.String("q")})
	require.NoError(t, err)

	start := time.Now()
	recv, err := client.ReceiveMessage(h.ctx, &sqs.ReceiveMessageInput{QueueUrl: created.QueueUrl, WaitTimeSeconds: 20})
	require.NoError(t, err)
	require.Empty(t, recv.Messages)
	waited := time.Since(start)
	require.GreaterOrEqual(t, waited, 300*time.Millisecond, "the poll waits")
	require.Less(t, waited, 5*time.Second, "the poll is capped at MaxWait")

	go func() {
		time.Sleep(100 * time.Millisecond)
		_, _ = client.SendMessage(h.ctx, &sqs.SendMessageInput{QueueUrl: created.QueueUrl, MessageBody: aws.String("hello")})
	}()
	start = time.Now()
	recv, err = client.ReceiveMessage(h.ctx, &sqs.ReceiveMessageInput{QueueUrl: created.QueueUrl, WaitTimeSeconds: 10})
	require.NoError(t, err)
	require.Len(t, recv.Messages, 1, "a message sent during the poll ends it")
	require.Less(t, time.Since(start), 300*time.Millisecond, "at once, before the cap")
}

// queueCounts returns the visible and in-flight counts through GetQueueAttributes.
func (h *harness) queueCounts(t *testing.T, client *sqs.Client, url *string) map[string]string {
	t.Helper()
	out, err := client.GetQueueAttributes(h.ctx, &sqs.GetQueueAttributesInput{QueueUrl: url, AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	}})
	require.NoError(t, err)
	return out.Attributes
}

// launchOne launches one instance of the capacity type and returns its id.
func (h *harness) launchOne(t *testing.T, capacityType ec2types.DefaultTargetCapacityType) string {
	t.Helper()
	image := h.imageID(t, al2023X86Parameter)
	lt, err := h.ec2.CreateLaunchTemplate(h.ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("sqs-" + string(capacityType)),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(image)},
	})
	require.NoError(t, err)
	var subnet string
	for _, id := range h.subnets(t) {
		subnet = id
		break
	}
	out, err := h.ec2.CreateFleet(h.ctx, &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: lt.LaunchTemplate.LaunchTemplateId, Version: aws.String("$Latest")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: ec2types.InstanceTypeM5Large, SubnetId: aws.String(subnet)}},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: capacityType},
	})
	require.NoError(t, err)
	require.Len(t, out.Instances, 1, "fleet errors: %v", out.Errors)
	return out.Instances[0].InstanceIds[0]
}

// inject posts an interruption to the admin API.
func (h *harness) inject(t *testing.T, in Interruption) (int, InjectedEvent) {
	t.Helper()
	body, err := json.Marshal(in)
	require.NoError(t, err)
	resp, err := http.Post(h.url+"/_admin/interruptions", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	var out InjectedEvent
	if resp.StatusCode == http.StatusOK {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	}
	return resp.StatusCode, out
}

func (h *harness) instanceState(t *testing.T, id string) ec2types.InstanceStateName {
	t.Helper()
	out, err := h.ec2.DescribeInstances(h.ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	require.NoError(t, err)
	return out.Reservations[0].Instances[0].State.Name
}

func TestInjectedInterruptionsArriveInEventBridgeShapes(t *testing.T) {
	h := newHarness(t, Options{SQS: SQSOptions{SpotReclaimDelay: 90 * time.Second}})
	client := h.sqsClient()
	created, err := client.CreateQueue(h.ctx, &sqs.CreateQueueInput{QueueName: aws.String("interruptions")})
	require.NoError(t, err)
	spot := h.launchOne(t, ec2types.DefaultTargetCapacityTypeSpot)
	onDemand := h.launchOne(t, ec2types.DefaultTargetCapacityTypeOnDemand)

	type event struct {
		Source     string         `json:"source"`
		DetailType string         `json:"detail-type"`
		Resources  []string       `json:"resources"`
		Detail     map[string]any `json:"detail"`
	}
	cases := []struct {
		in   Interruption
		want event
	}{
		{
			in: Interruption{Kind: InterruptionSpot, InstanceID: spot},
			want: event{Source: "aws.ec2", DetailType: "EC2 Spot Instance Interruption Warning",
				Detail: map[string]any{"instance-id": spot, "instance-action": "terminate"}},
		},
		{
			in: Interruption{Kind: InterruptionRebalance, InstanceID: onDemand},
			want: event{Source: "aws.ec2", DetailType: "EC2 Instance Rebalance Recommendation",
				Resources: []string{"arn:aws:ec2:us-east-1:123456789012:instance/" + onDemand}, Detail: map[string]any{"instance-id": onDemand}},
		},
		{
			in: Interruption{Kind: InterruptionStateChange, InstanceID: onDemand, State: "stopping"},
			want: event{Source: "aws.ec2", DetailType: "EC2 Instance State-change Notification",
				Resources: []string{"arn:aws:ec2:us-east-1:123456789012:instance/" + onDemand}, Detail: map[string]any{"instance-id": onDemand, "state": "stopping"}},
		},
		{
			in:   Interruption{Kind: InterruptionScheduled, InstanceID: onDemand, StartIn: "1h"},
			want: event{Source: "aws.health", DetailType: "AWS Health Event", Resources: []string{onDemand}},
		},
	}
	for _, c := range cases {
		c.in.Queue = "interruptions"
		status, sent := h.inject(t, c.in)
		require.Equal(t, http.StatusOK, status, c.in.Kind)
		recv, err := client.ReceiveMessage(h.ctx, &sqs.ReceiveMessageInput{QueueUrl: created.QueueUrl})
		require.NoError(t, err)
		require.Len(t, recv.Messages, 1, c.in.Kind)
		require.Equal(t, sent.Body, aws.ToString(recv.Messages[0].Body))
		var got event
		require.NoError(t, json.Unmarshal([]byte(sent.Body), &got))
		if c.in.Kind == InterruptionScheduled {
			require.Equal(t, "EC2", got.Detail["service"])
			require.Equal(t, "scheduledChange", got.Detail["eventTypeCategory"])
			require.Equal(t, "AWS_EC2_INSTANCE_STOP_SCHEDULED", got.Detail["eventTypeCode"])
			require.Equal(t, testStart.Add(time.Hour).Format(http.TimeFormat), got.Detail["startTime"])
			require.Equal(t, []any{map[string]any{"entityValue": onDemand}}, got.Detail["affectedEntities"])
			got.Detail = nil
		}
		if c.in.Kind == InterruptionSpot {
			require.Len(t, got.Resources, 1)
			require.Regexp(t, `^arn:aws:ec2:us-east-1[a-z]:instance/`+spot+`$`, got.Resources[0])
			got.Resources = nil
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s event (-want +got):\n%s", c.in.Kind, diff)
		}
		_, err = client.DeleteMessage(h.ctx, &sqs.DeleteMessageInput{QueueUrl: created.QueueUrl, ReceiptHandle: recv.Messages[0].ReceiptHandle})
		require.NoError(t, err)
	}

	// The spot instance is reclaimed on the server's clock, the configured delay after its warning.
	h.clock.Step(89 * time.Second)
	require.Equal(t, ec2types.InstanceStateNameRunning, h.instanceState(t, spot))
	h.clock.Step(time.Second)
	require.Eventually(t, func() bool { return h.instanceState(t, spot) != ec2types.InstanceStateNameRunning }, 5*time.Second, 10*time.Millisecond)

	status, _ := h.inject(t, Interruption{Queue: "interruptions", Kind: InterruptionSpot, InstanceID: onDemand})
	require.Equal(t, http.StatusBadRequest, status, "an on-demand instance gets no spot warning")
	status, _ = h.inject(t, Interruption{Queue: "nope", Kind: InterruptionRebalance, InstanceID: onDemand})
	require.Equal(t, http.StatusBadRequest, status, "unknown queue")
	status, _ = h.inject(t, Interruption{Queue: "interruptions", Kind: InterruptionStateChange, InstanceID: onDemand, State: "terminated"})
	require.Equal(t, http.StatusOK, status)
	require.NotEqual(t, ec2types.InstanceStateNameRunning, h.instanceState(t, onDemand), "a terminated notice terminates the instance")
}
