// Package calls makes known AWS calls, for the test of the search that finds them.
package calls

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// queue is an interface owned by its consumer, mirroring the SQS client.
type queue interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// Launch calls the EC2 client directly and through a paginator.
func Launch(ctx context.Context, client *ec2.Client) error {
	pages := ec2.NewDescribeSubnetsPaginator(client, &ec2.DescribeSubnetsInput{})
	if _, err := pages.NextPage(ctx); err != nil {
		return err
	}
	_, err := client.CreateFleet(ctx, &ec2.CreateFleetInput{})
	return err
}

// Drain calls SQS through the interface.
func Drain(ctx context.Context, q queue) error {
	if _, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{}); err != nil {
		return err
	}
	_, err := q.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{})
	return err
}
