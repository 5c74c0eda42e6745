package interruption

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Received is one message taken from the queue.
type Received struct {
	// Body is the message body.
	Body string
	// Handle deletes the message.
	Handle string
	// SentAt is when the queue received the message; zero when unknown.
	SentAt time.Time
}

// Queue is where interruption messages are read from.
type Queue interface {
	// Receive waits up to the queue's long-poll time for messages and returns them, hidden
	// from other readers until deleted or their visibility timeout ends. It returns no
	// messages and no error when none arrived.
	Receive(ctx context.Context) ([]Received, error)
	// Delete removes handled messages. Deleting a message already gone is not an error.
	Delete(ctx context.Context, messages []Received) error
}

// SQSAPI is the part of the SQS client the queue calls.
type SQSAPI interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, opts ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// Long poll settings, as Karpenter reads its interruption queue.
const (
	// DefaultWaitTime is the ReceiveMessage long poll; 20 s is SQS's maximum.
	DefaultWaitTime = 20 * time.Second
	// visibilityTimeout hides a message being handled; one that fails is retried after it.
	visibilityTimeout = 20 * time.Second
	// maxMessages per receive is SQS's maximum.
	maxMessages = 10
)

// SQSQueue reads an SQS queue named by name or URL.
type SQSQueue struct {
	api       SQSAPI
	nameOrURL string
	waitTime  time.Duration

	mu  sync.Mutex
	url string
}

var _ Queue = (*SQSQueue)(nil)

// NewSQSQueue returns the queue with this name or URL (https://sqs.<region>.amazonaws.com/
// <account>/<name>). A name is resolved with GetQueueUrl on first use. waitTime is the long
// poll, at most 20 s; zero means DefaultWaitTime.
func NewSQSQueue(api SQSAPI, nameOrURL string, waitTime time.Duration) (*SQSQueue, error) {
	if nameOrURL == "" {
		return nil, fmt.Errorf("the interruption queue name or URL is empty")
	}
	if waitTime == 0 {
		waitTime = DefaultWaitTime
	}
	if waitTime < time.Second || waitTime > 20*time.Second {
		return nil, fmt.Errorf("the interruption queue wait time %s must be between 1s and 20s", waitTime)
	}
	q := &SQSQueue{api: api, nameOrURL: nameOrURL, waitTime: waitTime}
	if strings.HasPrefix(nameOrURL, "https://") || strings.HasPrefix(nameOrURL, "http://") {
		q.url = nameOrURL
	}
	return q, nil
}

// queueURL returns the queue's URL, resolving its name once.
func (q *SQSQueue) queueURL(ctx context.Context) (string, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.url != "" {
		return q.url, nil
	}
	out, err := q.api.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q.nameOrURL)})
	if err != nil {
		return "", fmt.Errorf("resolving queue %q: %w", q.nameOrURL, err)
	}
	q.url = aws.ToString(out.QueueUrl)
	return q.url, nil
}

// Receive long-polls the queue.
func (q *SQSQueue) Receive(ctx context.Context) ([]Received, error) {
	url, err := q.queueURL(ctx)
	if err != nil {
		return nil, err
	}
	out, err := q.api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(url),
		MaxNumberOfMessages:         maxMessages,
		VisibilityTimeout:           int32(visibilityTimeout / time.Second),
		WaitTimeSeconds:             int32(q.waitTime / time.Second),
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameSentTimestamp},
	})
	if err != nil {
		return nil, fmt.Errorf("receiving from %s: %w", url, err)
	}
	msgs := make([]Received, 0, len(out.Messages))
	for _, m := range out.Messages {
		r := Received{Body: aws.ToString(m.Body), Handle: aws.ToString(m.ReceiptHandle)}
		if ms, err := strconv.ParseInt(m.Attributes[string(sqstypes.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
			r.SentAt = time.UnixMilli(ms)
		}
		msgs = append(msgs, r)
	}
	return msgs, nil
}

// Delete removes messages, ten per request.
func (q *SQSQueue) Delete(ctx context.Context, messages []Received) error {
	url, err := q.queueURL(ctx)
	if err != nil {
		return err
	}
	for start := 0; start < len(messages); start += maxMessages {
		batch := messages[start:min(start+maxMessages, len(messages))]
		entries := make([]sqstypes.DeleteMessageBatchRequestEntry, 0, len(batch))
		for i, m := range batch {
			entries = append(entries, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(m.Handle)})
		}
		out, err := q.api.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			return fmt.Errorf("deleting messages from %s: %w", url, err)
		}
		if len(out.Failed) > 0 {
			f := out.Failed[0]
			return fmt.Errorf("deleting %d messages from %s: %s: %s", len(out.Failed), url, aws.ToString(f.Code), aws.ToString(f.Message))
		}
	}
	return nil
}
