package localaws

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// SQS limits, as the real service enforces them.
const (
	// DefaultSQSMaxWait caps a ReceiveMessage long poll; 20 s is SQS's own maximum.
	DefaultSQSMaxWait = 20 * time.Second
	// DefaultSpotReclaimDelay is how long after its interruption warning a spot instance is
	// terminated, as EC2 does.
	DefaultSpotReclaimDelay = 2 * time.Minute

	sqsContentType              = "application/x-amz-json-1.0"
	sqsDefaultVisibilityTimeout = 30 * time.Second
	sqsMaxVisibilityTimeout     = 12 * time.Hour
	sqsMaxMessages              = 10
	sqsMaxBodyBytes             = 256 << 10
	// sqsRecheck is how often a waiting long poll looks again for messages whose visibility
	// timeout ran out on the server's (possibly fake) clock.
	sqsRecheck = 50 * time.Millisecond
)

// SQS error codes: the shape name the JSON protocol sends in __type and the legacy Query code
// the SDK reports for query-compatible services.
var (
	sqsQueueDoesNotExist = sqsErrorCode{shape: "QueueDoesNotExist", query: "AWS.SimpleQueueService.NonExistentQueue"}
	sqsInvalidParameter  = sqsErrorCode{shape: "InvalidParameterValue", query: "InvalidParameterValue"}
	sqsInvalidAttribute  = sqsErrorCode{shape: "InvalidAttributeName", query: "InvalidAttributeName"}
	sqsReceiptInvalid    = sqsErrorCode{shape: "ReceiptHandleIsInvalid", query: "ReceiptHandleIsInvalid"}
	sqsEmptyBatch        = sqsErrorCode{shape: "EmptyBatchRequest", query: "AWS.SimpleQueueService.EmptyBatchRequest"}
	sqsTooManyEntries    = sqsErrorCode{shape: "TooManyEntriesInBatchRequest", query: "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"}
	sqsDuplicateEntryID  = sqsErrorCode{shape: "BatchEntryIdsNotDistinct", query: "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"}
	sqsMissingParameter  = sqsErrorCode{shape: "MissingRequiredParameterException", query: "MissingParameter"}
	sqsUnknownOperation  = sqsErrorCode{shape: "UnsupportedOperation", query: "AWS.SimpleQueueService.UnsupportedOperation"}
	sqsQueueNameExists   = sqsErrorCode{shape: "QueueNameExists", query: "QueueAlreadyExists"}
)

// queueNamePattern is SQS's rule for standard queue names.
var queueNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

// SQSOptions configures the local SQS service.
type SQSOptions struct {
	// MaxWait caps how long a ReceiveMessage long poll waits, in real time. Zero means
	// DefaultSQSMaxWait.
	MaxWait time.Duration
	// SpotReclaimDelay is how long after an injected spot interruption warning the instance
	// is terminated, on the server's clock. Zero means DefaultSpotReclaimDelay.
	SpotReclaimDelay time.Duration
	// Queues are created empty when the server starts, as an interruption queue is before
	// the controller that reads it.
	Queues []string
}

type sqsErrorCode struct{ shape, query string }

// sqsError is an SQS failure, written as an AWS JSON 1.0 error.
type sqsError struct {
	code    sqsErrorCode
	message string
}

func (e *sqsError) Error() string { return e.code.shape + ": " + e.message }

func newSQSError(code sqsErrorCode, message string) *sqsError {
	return &sqsError{code: code, message: message}
}

// sqsService holds the queues. Its own lock keeps long polls off the EC2 state's lock.
type sqsService struct {
	clock            clock.Clock
	logger           logr.Logger
	maxWait          time.Duration
	spotReclaimDelay time.Duration

	mu     sync.Mutex
	seq    uint64
	queues map[string]*sqsQueue
	// arrived is closed and replaced whenever a message is sent, to wake long polls.
	arrived chan struct{}
}

type sqsQueue struct {
	name              string
	createdAt         time.Time
	attributes        map[string]string
	visibilityTimeout time.Duration
	messages          []*sqsMessage
}

type sqsMessage struct {
	id           string
	body         string
	md5          string
	sentAt       time.Time
	visibleAt    time.Time
	firstReceive time.Time
	receives     int
	receipt      string
}

func newSQSService(opts SQSOptions, clk clock.Clock, logger logr.Logger) *sqsService {
	if opts.MaxWait <= 0 {
		opts.MaxWait = DefaultSQSMaxWait
	}
	if opts.SpotReclaimDelay <= 0 {
		opts.SpotReclaimDelay = DefaultSpotReclaimDelay
	}
	q := &sqsService{
		clock: clk, logger: logger.WithName("sqs"), maxWait: opts.MaxWait, spotReclaimDelay: opts.SpotReclaimDelay,
		queues: map[string]*sqsQueue{}, arrived: make(chan struct{}),
	}
	for _, name := range opts.Queues {
		q.queues[name] = &sqsQueue{name: name, createdAt: clk.Now(), attributes: map[string]string{}, visibilityTimeout: sqsDefaultVisibilityTimeout}
	}
	return q
}

// serveSQS handles an SQS request in the AWS JSON 1.0 protocol ("AmazonSQS.<Action>").
func (s *Server) serveSQS(w http.ResponseWriter, r *http.Request) {
	requestID := s.newRequestID()
	_, action, _ := strings.Cut(r.Header.Get("X-Amz-Target"), ".")
	body, err := io.ReadAll(r.Body)
	var resp any
	if err == nil {
		resp, err = s.sqs.action(r.Context(), action, body, "http://"+r.Host)
	}
	if err != nil {
		s.writeSQSError(w, requestID, err)
		return
	}
	out, err := json.Marshal(resp)
	if err != nil {
		s.writeSQSError(w, requestID, err)
		return
	}
	w.Header().Set("Content-Type", sqsContentType)
	w.Header().Set("X-Amzn-RequestId", requestID)
	_, _ = w.Write(out)
}

func (s *Server) writeSQSError(w http.ResponseWriter, requestID string, err error) {
	status := http.StatusBadRequest
	fault := "Sender"
	var sqsErr *sqsError
	if !errors.As(err, &sqsErr) {
		s.logger.Error(err, "failed to serve SQS request", "requestID", requestID)
		status, fault = http.StatusInternalServerError, "Receiver"
		sqsErr = newSQSError(sqsErrorCode{shape: "InternalError", query: "InternalError"}, err.Error())
	}
	out, _ := json.Marshal(map[string]string{"__type": "com.amazonaws.sqs#" + sqsErr.code.shape, "message": sqsErr.message})
	w.Header().Set("Content-Type", sqsContentType)
	w.Header().Set("X-Amzn-RequestId", requestID)
	w.Header().Set("X-Amzn-Query-Error", sqsErr.code.query+";"+fault)
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

// action runs one SQS action; baseURL (scheme and host the client used) prefixes queue URLs.
func (q *sqsService) action(ctx context.Context, action string, body []byte, baseURL string) (any, error) {
	decode := func(into any) error {
		if err := json.Unmarshal(body, into); err != nil {
			return newSQSError(sqsInvalidParameter, "The request body could not be decoded: "+err.Error())
		}
		return nil
	}
	switch action {
	case "CreateQueue":
		var in struct {
			QueueName  string
			Attributes map[string]string
		}
		if err := decode(&in); err != nil {
			return nil, err
		}
		return q.createQueue(in.QueueName, in.Attributes, baseURL)
	case "GetQueueUrl":
		var in struct{ QueueName string }
		if err := decode(&in); err != nil {
			return nil, err
		}
		q.mu.Lock()
		defer q.mu.Unlock()
		if _, ok := q.queues[in.QueueName]; !ok {
			return nil, newSQSError(sqsQueueDoesNotExist, "The specified queue does not exist.")
		}
		return map[string]string{"QueueUrl": queueURL(baseURL, in.QueueName)}, nil
	case "SendMessage":
		var in struct {
			QueueUrl     string //nolint:revive // the wire name
			MessageBody  string
			DelaySeconds int
		}
		if err := decode(&in); err != nil {
			return nil, err
		}
		return q.send(in.QueueUrl, in.MessageBody, time.Duration(in.DelaySeconds)*time.Second)
	case "ReceiveMessage":
		var in receiveRequest
		if err := decode(&in); err != nil {
			return nil, err
		}
		return q.receive(ctx, in)
	case "DeleteMessage":
		var in struct {
			QueueUrl      string //nolint:revive // the wire name
			ReceiptHandle string
		}
		if err := decode(&in); err != nil {
			return nil, err
		}
		return struct{}{}, q.deleteMessage(in.QueueUrl, in.ReceiptHandle)
	case "DeleteMessageBatch":
		var in struct {
			QueueUrl string //nolint:revive // the wire name
			Entries  []deleteEntry
		}
		if err := decode(&in); err != nil {
			return nil, err
		}
		return q.deleteBatch(in.QueueUrl, in.Entries)
	case "GetQueueAttributes":
		var in struct {
			QueueUrl       string //nolint:revive // the wire name
			AttributeNames []string
		}
		if err := decode(&in); err != nil {
			return nil, err
		}
		return q.queueAttributes(in.QueueUrl, in.AttributeNames)
	default:
		return nil, newSQSError(sqsUnknownOperation, "The local endpoint does not serve the SQS action "+action+".")
	}
}

// queueURL is the URL SQS gives a queue: endpoint, account, name.
func queueURL(baseURL, name string) string { return baseURL + "/" + accountID + "/" + name }

// queueByURL returns the queue a URL names. q.mu must be held.
func (q *sqsService) queueByURL(url string) (*sqsQueue, error) {
	if url == "" {
		return nil, newSQSError(sqsMissingParameter, "The request must contain the parameter QueueUrl.")
	}
	name := url[strings.LastIndex(url, "/")+1:]
	queue, ok := q.queues[name]
	if !ok || !strings.HasSuffix(url, "/"+accountID+"/"+name) {
		return nil, newSQSError(sqsQueueDoesNotExist, "The specified queue does not exist.")
	}
	return queue, nil
}

func (q *sqsService) createQueue(name string, attributes map[string]string, baseURL string) (any, error) {
	if !queueNamePattern.MatchString(name) {
		return nil, newSQSError(sqsInvalidParameter, "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length")
	}
	visibility := sqsDefaultVisibilityTimeout
	for k, v := range attributes {
		switch k {
		case "VisibilityTimeout":
			secs, err := strconv.Atoi(v)
			if err != nil || secs < 0 || time.Duration(secs)*time.Second > sqsMaxVisibilityTimeout {
				return nil, newSQSError(sqsErrorCode{shape: "InvalidAttributeValue", query: "InvalidAttributeValue"}, "Invalid value for the parameter VisibilityTimeout.")
			}
			visibility = time.Duration(secs) * time.Second
		case "MessageRetentionPeriod", "ReceiveMessageWaitTimeSeconds", "DelaySeconds", "MaximumMessageSize", "Policy", "SqsManagedSseEnabled", "KmsMasterKeyId":
		default:
			return nil, newSQSError(sqsInvalidAttribute, "Unknown Attribute "+k+".")
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if existing, ok := q.queues[name]; ok {
		for k, v := range attributes {
			if existing.attributes[k] != v {
				return nil, newSQSError(sqsQueueNameExists, "A queue already exists with the same name and a different value for attribute "+k)
			}
		}
		return map[string]string{"QueueUrl": queueURL(baseURL, name)}, nil
	}
	attrs := map[string]string{}
	for k, v := range attributes {
		attrs[k] = v
	}
	q.queues[name] = &sqsQueue{name: name, createdAt: q.clock.Now(), attributes: attrs, visibilityTimeout: visibility}
	q.logger.V(2).Info("created queue", "queue", name)
	return map[string]string{"QueueUrl": queueURL(baseURL, name)}, nil
}

type sendResponse struct {
	MessageId        string //nolint:revive // the wire name
	MD5OfMessageBody string
}

func (q *sqsService) send(url, body string, delay time.Duration) (*sendResponse, error) {
	if body == "" {
		return nil, newSQSError(sqsMissingParameter, "The request must contain the parameter MessageBody.")
	}
	if len(body) > sqsMaxBodyBytes {
		return nil, newSQSError(sqsInvalidParameter, "One or more parameters are invalid. Reason: Message must be shorter than 262144 bytes.")
	}
	if delay < 0 || delay > 15*time.Minute {
		return nil, newSQSError(sqsInvalidParameter, "Value for parameter DelaySeconds is invalid. Reason: must be between 0 and 900, if provided.")
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	queue, err := q.queueByURL(url)
	if err != nil {
		return nil, err
	}
	return q.enqueue(queue, body, delay), nil
}

// enqueue appends a message and wakes long polls. q.mu must be held.
func (q *sqsService) enqueue(queue *sqsQueue, body string, delay time.Duration) *sendResponse {
	q.seq++
	now := q.clock.Now()
	m := &sqsMessage{
		id:        uuidFrom("sqs", queue.name, strconv.FormatUint(q.seq, 10)),
		body:      body,
		md5:       md5Hex(body),
		sentAt:    now,
		visibleAt: now.Add(delay),
	}
	queue.messages = append(queue.messages, m)
	close(q.arrived)
	q.arrived = make(chan struct{})
	return &sendResponse{MessageId: m.id, MD5OfMessageBody: m.md5}
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

type receiveRequest struct {
	QueueUrl                    string //nolint:revive // the wire name
	MaxNumberOfMessages         *int
	VisibilityTimeout           *int
	WaitTimeSeconds             *int
	AttributeNames              []string
	MessageSystemAttributeNames []string
}

type receivedMessage struct {
	MessageId     string //nolint:revive // the wire name
	ReceiptHandle string
	MD5OfBody     string
	Body          string
	Attributes    map[string]string `json:",omitempty"`
}

// receive returns up to MaxNumberOfMessages visible messages, hiding them for the visibility
// timeout. With WaitTimeSeconds it waits (in real time, capped at the service's MaxWait)
// until at least one message is visible.
func (q *sqsService) receive(ctx context.Context, in receiveRequest) (any, error) {
	maxMessages := 1
	if in.MaxNumberOfMessages != nil {
		maxMessages = *in.MaxNumberOfMessages
		if maxMessages < 1 || maxMessages > sqsMaxMessages {
			return nil, newSQSError(sqsInvalidParameter, "Value "+strconv.Itoa(maxMessages)+" for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.")
		}
	}
	var wait time.Duration
	if in.WaitTimeSeconds != nil {
		if *in.WaitTimeSeconds < 0 || *in.WaitTimeSeconds > 20 {
			return nil, newSQSError(sqsInvalidParameter, "Value "+strconv.Itoa(*in.WaitTimeSeconds)+" for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.")
		}
		wait = min(time.Duration(*in.WaitTimeSeconds)*time.Second, q.maxWait)
	}
	var visibility *time.Duration
	if in.VisibilityTimeout != nil {
		v := time.Duration(*in.VisibilityTimeout) * time.Second
		if v < 0 || v > sqsMaxVisibilityTimeout {
			return nil, newSQSError(sqsInvalidParameter, "Value "+strconv.Itoa(*in.VisibilityTimeout)+" for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= 43200, if provided.")
		}
		visibility = &v
	}
	attributes := append(slices.Clone(in.AttributeNames), in.MessageSystemAttributeNames...)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	recheck := time.NewTicker(sqsRecheck)
	defer recheck.Stop()
	for {
		q.mu.Lock()
		queue, err := q.queueByURL(in.QueueUrl)
		if err != nil {
			q.mu.Unlock()
			return nil, err
		}
		got := q.take(queue, maxMessages, visibility, attributes)
		arrived := q.arrived
		q.mu.Unlock()
		if len(got) > 0 || wait == 0 {
			return map[string][]receivedMessage{"Messages": got}, nil
		}
		select {
		case <-ctx.Done():
			return map[string][]receivedMessage{"Messages": nil}, nil
		case <-deadline.C:
			wait = 0
		case <-arrived:
		case <-recheck.C:
		}
	}
}

// take hides and returns up to n visible messages, oldest first. q.mu must be held.
func (q *sqsService) take(queue *sqsQueue, n int, visibility *time.Duration, attributes []string) []receivedMessage {
	now := q.clock.Now()
	hide := queue.visibilityTimeout
	if visibility != nil {
		hide = *visibility
	}
	var out []receivedMessage
	for _, m := range queue.messages {
		if len(out) == n {
			break
		}
		if now.Before(m.visibleAt) {
			continue
		}
		m.receives++
		if m.firstReceive.IsZero() {
			m.firstReceive = now
		}
		m.visibleAt = now.Add(hide)
		m.receipt = base64.StdEncoding.EncodeToString([]byte(queue.name + "\x00" + m.id + "\x00" + strconv.Itoa(m.receives)))
		out = append(out, receivedMessage{MessageId: m.id, ReceiptHandle: m.receipt, MD5OfBody: m.md5, Body: m.body, Attributes: m.attributes(attributes)})
	}
	return out
}

// attributes returns the system attributes asked for.
func (m *sqsMessage) attributes(names []string) map[string]string {
	all := map[string]string{
		"SentTimestamp":                    strconv.FormatInt(m.sentAt.UnixMilli(), 10),
		"ApproximateReceiveCount":          strconv.Itoa(m.receives),
		"ApproximateFirstReceiveTimestamp": strconv.FormatInt(m.firstReceive.UnixMilli(), 10),
		"SenderId":                         accountID,
	}
	out := map[string]string{}
	for _, n := range names {
		if n == "All" {
			return all
		}
		if v, ok := all[n]; ok {
			out[n] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// deleteMessage deletes the message a receipt handle names. A handle of a message already
// deleted succeeds, as in SQS.
func (q *sqsService) deleteMessage(url, receipt string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	queue, err := q.queueByURL(url)
	if err != nil {
		return err
	}
	return q.deleteLocked(queue, receipt)
}

// deleteLocked deletes by receipt handle. q.mu must be held.
func (q *sqsService) deleteLocked(queue *sqsQueue, receipt string) error {
	raw, err := base64.StdEncoding.DecodeString(receipt)
	parts := strings.Split(string(raw), "\x00")
	if receipt == "" || err != nil || len(parts) != 3 || parts[0] != queue.name {
		return newSQSError(sqsReceiptInvalid, "The input receipt handle \""+receipt+"\" is not a valid receipt handle.")
	}
	for i, m := range queue.messages {
		if m.id == parts[1] {
			queue.messages = append(queue.messages[:i], queue.messages[i+1:]...)
			return nil
		}
	}
	return nil
}

// deleteEntry is an entry of DeleteMessageBatch.
type deleteEntry struct {
	Id            string //nolint:revive // the wire name
	ReceiptHandle string
}

type batchResultEntry struct {
	Id string //nolint:revive // the wire name
}

type batchErrorEntry struct {
	Id          string //nolint:revive // the wire name
	SenderFault bool
	Code        string
	Message     string
}

func (q *sqsService) deleteBatch(url string, entries []deleteEntry) (any, error) {
	if len(entries) == 0 {
		return nil, newSQSError(sqsEmptyBatch, "There should be at least one DeleteMessageBatchRequestEntry in the request.")
	}
	if len(entries) > sqsMaxMessages {
		return nil, newSQSError(sqsTooManyEntries, "Maximum number of entries per request are 10. You have sent "+strconv.Itoa(len(entries))+".")
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if seen[e.Id] {
			return nil, newSQSError(sqsDuplicateEntryID, "Id "+e.Id+" repeated.")
		}
		seen[e.Id] = true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	queue, err := q.queueByURL(url)
	if err != nil {
		return nil, err
	}
	out := struct {
		Successful []batchResultEntry
		Failed     []batchErrorEntry
	}{Successful: []batchResultEntry{}, Failed: []batchErrorEntry{}}
	for _, e := range entries {
		if err := q.deleteLocked(queue, e.ReceiptHandle); err != nil {
			var sqsErr *sqsError
			errors.As(err, &sqsErr)
			out.Failed = append(out.Failed, batchErrorEntry{Id: e.Id, SenderFault: true, Code: sqsErr.code.shape, Message: sqsErr.message})
			continue
		}
		out.Successful = append(out.Successful, batchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (q *sqsService) queueAttributes(url string, names []string) (any, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	queue, err := q.queueByURL(url)
	if err != nil {
		return nil, err
	}
	now := q.clock.Now()
	visible, hidden := 0, 0
	for _, m := range queue.messages {
		if now.Before(m.visibleAt) {
			hidden++
		} else {
			visible++
		}
	}
	all := map[string]string{
		"ApproximateNumberOfMessages":           strconv.Itoa(visible),
		"ApproximateNumberOfMessagesNotVisible": strconv.Itoa(hidden),
		"ApproximateNumberOfMessagesDelayed":    "0",
		"VisibilityTimeout":                     strconv.Itoa(int(queue.visibilityTimeout / time.Second)),
		"CreatedTimestamp":                      strconv.FormatInt(queue.createdAt.Unix(), 10),
		"LastModifiedTimestamp":                 strconv.FormatInt(queue.createdAt.Unix(), 10),
		"QueueArn":                              "arn:aws:sqs:us-east-1:" + accountID + ":" + queue.name,
		"MaximumMessageSize":                    strconv.Itoa(sqsMaxBodyBytes),
		"MessageRetentionPeriod":                "345600",
		"ReceiveMessageWaitTimeSeconds":         "0",
		"DelaySeconds":                          "0",
	}
	for k, v := range queue.attributes {
		all[k] = v
	}
	out := map[string]string{}
	for _, n := range names {
		if n == "All" {
			out = all
			break
		}
		v, ok := all[n]
		if !ok {
			return nil, newSQSError(sqsInvalidAttribute, "Unknown Attribute "+n+".")
		}
		out[n] = v
	}
	return map[string]map[string]string{"Attributes": out}, nil
}

// QueueSummary is a queue as the admin API lists it.
type QueueSummary struct {
	Name string `json:"name"`
	// Visible and InFlight count messages that can be received now and those received and
	// not yet deleted.
	Visible  int `json:"visible"`
	InFlight int `json:"inFlight"`
}

// Queues lists the SQS queues by name.
func (s *Server) Queues() []QueueSummary {
	q := s.sqs
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	out := []QueueSummary{}
	for _, queue := range q.queues {
		sum := QueueSummary{Name: queue.name}
		for _, m := range queue.messages {
			if now.Before(m.visibleAt) {
				sum.InFlight++
			} else {
				sum.Visible++
			}
		}
		out = append(out, sum)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
