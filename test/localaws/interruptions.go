package localaws

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"k8s.io/utils/clock"
)

// Kinds of interruption event the admin API injects.
const (
	InterruptionSpot        = "spot-interruption"
	InterruptionRebalance   = "rebalance-recommendation"
	InterruptionScheduled   = "scheduled-change"
	InterruptionStateChange = "state-change"
)

// Interruption asks the server to send an EC2 interruption event to a queue, as EventBridge
// would deliver it.
type Interruption struct {
	// Queue is the name of the queue the event goes to.
	Queue string `json:"queue"`
	// InstanceID is the instance the event is about.
	InstanceID string `json:"instanceId"`
	// Kind is one of spot-interruption, rebalance-recommendation, scheduled-change and
	// state-change.
	Kind string `json:"kind"`
	// State is the new state of a state-change: pending, running, stopping, stopped,
	// shutting-down or terminated. Shutting-down and terminated also terminate the instance.
	State string `json:"state,omitempty"`
	// StartIn is how long after now a scheduled change starts (default 24h).
	StartIn string `json:"startIn,omitempty"`
}

// InjectedEvent is what an injection sent.
type InjectedEvent struct {
	MessageID string `json:"messageId"`
	Body      string `json:"body"`
}

// eventBridgeEvent is the envelope EventBridge puts every event in.
type eventBridgeEvent struct {
	Version    string   `json:"version"`
	ID         string   `json:"id"`
	DetailType string   `json:"detail-type"`
	Source     string   `json:"source"`
	Account    string   `json:"account"`
	Time       string   `json:"time"`
	Region     string   `json:"region"`
	Resources  []string `json:"resources"`
	Detail     any      `json:"detail"`
}

type healthDescription struct {
	Language          string `json:"language"`
	LatestDescription string `json:"latestDescription"`
}

type healthEntity struct {
	EntityValue string `json:"entityValue"`
}

type healthDetail struct {
	EventArn          string              `json:"eventArn"`
	Service           string              `json:"service"`
	EventTypeCode     string              `json:"eventTypeCode"`
	EventTypeCategory string              `json:"eventTypeCategory"`
	StartTime         string              `json:"startTime"`
	EndTime           string              `json:"endTime"`
	EventDescription  []healthDescription `json:"eventDescription"`
	AffectedEntities  []healthEntity      `json:"affectedEntities"`
}

// instanceStates are the states an EC2 state-change notification reports.
var instanceStates = map[string]bool{
	"pending": true, "running": true, "stopping": true, "stopped": true, stateShuttingDown: true, stateTerminated: true,
}

// InjectInterruption sends the event to the queue. A spot interruption also terminates the
// instance after the spot reclaim delay; a state change to shutting-down or terminated
// terminates it now.
func (s *Server) InjectInterruption(in Interruption) (InjectedEvent, error) {
	now := s.clock.Now().UTC()
	s.mu.Lock()
	inst := s.instanceByID(in.InstanceID, now)
	var zone string
	if inst != nil {
		zone = inst.zone.name
	}
	s.mu.Unlock()
	if inst == nil {
		return InjectedEvent{}, fmt.Errorf("instance %q does not exist", in.InstanceID)
	}
	seq := strconv.FormatUint(s.requests.Add(1), 10)
	ev := eventBridgeEvent{
		Version: "0", ID: uuidFrom("event", in.InstanceID, in.Kind, seq), Source: "aws.ec2", Account: accountID,
		Time: now.Format(time.RFC3339), Region: s.region,
		Resources: []string{"arn:aws:ec2:" + s.region + ":" + accountID + ":instance/" + in.InstanceID},
	}
	var terminateAt time.Time
	switch in.Kind {
	case InterruptionSpot:
		if inst.capacityType != capacitySpot {
			return InjectedEvent{}, fmt.Errorf("instance %s is %s, not spot", in.InstanceID, inst.capacityType)
		}
		// EC2 puts the availability zone, not the region, in this event's ARN.
		ev.Resources = []string{"arn:aws:ec2:" + zone + ":instance/" + in.InstanceID}
		ev.DetailType = "EC2 Spot Instance Interruption Warning"
		ev.Detail = map[string]string{"instance-id": in.InstanceID, "instance-action": "terminate"}
		terminateAt = now.Add(s.sqs.spotReclaimDelay)
	case InterruptionRebalance:
		ev.DetailType = "EC2 Instance Rebalance Recommendation"
		ev.Detail = map[string]string{"instance-id": in.InstanceID}
	case InterruptionScheduled:
		startIn := 24 * time.Hour
		if in.StartIn != "" {
			d, err := time.ParseDuration(in.StartIn)
			if err != nil || d < 0 {
				return InjectedEvent{}, fmt.Errorf("startIn %q is not a non-negative duration", in.StartIn)
			}
			startIn = d
		}
		const code = "AWS_EC2_INSTANCE_STOP_SCHEDULED"
		start := now.Add(startIn)
		ev.Source, ev.DetailType = "aws.health", "AWS Health Event"
		ev.Resources = []string{in.InstanceID}
		ev.Detail = healthDetail{
			EventArn:          "arn:aws:health:" + s.region + "::event/EC2/" + code + "/" + code + "_" + hexDigits(16, ev.ID),
			Service:           "EC2",
			EventTypeCode:     code,
			EventTypeCategory: "scheduledChange",
			StartTime:         start.Format(http.TimeFormat),
			EndTime:           start.Add(7 * 24 * time.Hour).Format(http.TimeFormat),
			EventDescription: []healthDescription{{Language: "en_US",
				LatestDescription: "EC2 has detected degradation of the underlying hardware hosting your Amazon EC2 instance. Your instance will be stopped after the specified retirement date."}},
			AffectedEntities: []healthEntity{{EntityValue: in.InstanceID}},
		}
	case InterruptionStateChange:
		if !instanceStates[in.State] {
			return InjectedEvent{}, fmt.Errorf("state %q is not an EC2 instance state", in.State)
		}
		ev.DetailType = "EC2 Instance State-change Notification"
		ev.Detail = map[string]string{"instance-id": in.InstanceID, "state": in.State}
		if in.State == stateShuttingDown || in.State == stateTerminated {
			terminateAt = now
		}
	default:
		return InjectedEvent{}, fmt.Errorf("kind %q is not one of %s, %s, %s, %s", in.Kind, InterruptionSpot, InterruptionRebalance, InterruptionScheduled, InterruptionStateChange)
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return InjectedEvent{}, err
	}
	q := s.sqs
	q.mu.Lock()
	queue, ok := q.queues[in.Queue]
	var sent *sendResponse
	if ok {
		sent = q.enqueue(queue, string(body), 0)
	}
	q.mu.Unlock()
	if !ok {
		return InjectedEvent{}, fmt.Errorf("queue %q does not exist", in.Queue)
	}
	if !terminateAt.IsZero() {
		s.terminateAt(in.InstanceID, terminateAt)
	}
	s.logger.V(2).Info("injected interruption", "instance", in.InstanceID, "kind", in.Kind, "queue", in.Queue)
	return InjectedEvent{MessageID: sent.MessageId, Body: string(body)}, nil
}

// terminateAt terminates the instance once the server's clock reaches at. The termination
// runs on its own goroutine because a fake clock fires timers while holding its lock, and
// the server's lock is taken by code that reads that clock.
func (s *Server) terminateAt(id string, at time.Time) {
	terminate := func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if i := s.instanceByID(id, at); i != nil && i.terminatedAt.IsZero() {
			s.terminate(i, at)
			s.logger.V(2).Info("reclaiming interrupted instance", "instance", id)
		}
	}
	delay := at.Sub(s.clock.Now())
	if delay <= 0 {
		terminate()
		return
	}
	if timers, ok := s.clock.(clock.WithDelayedExecution); ok {
		timers.AfterFunc(delay, func() { go terminate() })
		return
	}
	time.AfterFunc(delay, terminate)
}

// serveInterruptionAdmin serves the admin routes of SQS and interruptions:
//
//	GET  /_admin/queues          the queues, as a JSON list of QueueSummary
//	POST /_admin/interruptions   send the Interruption posted, answer the InjectedEvent
func (s *Server) serveInterruptionAdmin(w http.ResponseWriter, r *http.Request, path string) bool {
	switch {
	case path == "queues" && r.Method == http.MethodGet:
		s.writeAdminJSON(w, s.Queues())
	case path == "interruptions" && r.Method == http.MethodPost:
		var in Interruption
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, "decoding interruption: "+err.Error(), http.StatusBadRequest)
			return true
		}
		sent, err := s.InjectInterruption(in)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return true
		}
		s.writeAdminJSON(w, sent)
	case path == "queues" || path == "interruptions":
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	default:
		return false
	}
	return true
}
