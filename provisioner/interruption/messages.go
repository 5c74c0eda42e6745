package interruption

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Kind is what an interruption message announces.
type Kind string

// Kinds of message, as the tailor_interruption_messages_total metric labels them.
const (
	KindSpotInterruption        Kind = "spot_interruption"
	KindRebalanceRecommendation Kind = "rebalance_recommendation"
	KindScheduledChange         Kind = "scheduled_change"
	KindStateChange             Kind = "state_change"
	// KindUnknown is every message that is not one of the above, or is malformed.
	KindUnknown Kind = "unknown"
)

// spotReclaimWarning is how long EC2 gives between a spot interruption warning and the
// reclaim.
const spotReclaimWarning = 2 * time.Minute

// Message is a parsed interruption event.
type Message struct {
	// ID is the EventBridge event id.
	ID string
	// Kind is what the event announces.
	Kind Kind
	// InstanceIDs are the EC2 instances the event is about.
	InstanceIDs []string
	// State is the new instance state of a state change.
	State string
	// Time is when the event happened.
	Time time.Time
	// Deadline is when the instance is expected to go: the reclaim time of a spot
	// interruption, the start of a scheduled change, the event time of a state change, and
	// zero for a rebalance recommendation.
	Deadline time.Time
}

// UnknownMessageError says a message is not an interruption event Tailor handles.
type UnknownMessageError struct{ err error }

func (e *UnknownMessageError) Error() string { return "unknown message: " + e.err.Error() }
func (e *UnknownMessageError) Unwrap() error { return e.err }

// IsUnknownMessageError reports whether err is, or wraps, an UnknownMessageError.
func IsUnknownMessageError(err error) bool {
	var target *UnknownMessageError
	return errors.As(err, &target)
}

// envelope is the EventBridge event every message is.
type envelope struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Time       time.Time       `json:"time"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

// parsers are keyed by event source and detail type.
var parsers = map[[2]string]func(envelope) (Message, error){
	{"aws.ec2", "EC2 Spot Instance Interruption Warning"}: parseSpotInterruption,
	{"aws.ec2", "EC2 Instance Rebalance Recommendation"}:  parseRebalanceRecommendation,
	{"aws.ec2", "EC2 Instance State-change Notification"}: parseStateChange,
	{"aws.health", "AWS Health Event"}:                    parseScheduledChange,
}

// Parse reads an SQS message body. It returns an UnknownMessageError for anything that is
// not a well-formed interruption event.
func Parse(body string) (Message, error) {
	var e envelope
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		return Message{}, &UnknownMessageError{err: fmt.Errorf("decoding event: %w", err)}
	}
	parse, ok := parsers[[2]string{e.Source, e.DetailType}]
	if !ok {
		return Message{}, &UnknownMessageError{err: fmt.Errorf("source %q, detail-type %q", e.Source, e.DetailType)}
	}
	m, err := parse(e)
	if err != nil {
		return Message{}, &UnknownMessageError{err: fmt.Errorf("%s: %w", e.DetailType, err)}
	}
	m.ID, m.Time = e.ID, e.Time
	return m, nil
}

type ec2Detail struct {
	InstanceID     string `json:"instance-id"`
	InstanceAction string `json:"instance-action"`
	State          string `json:"state"`
}

func decodeEC2Detail(e envelope) (ec2Detail, error) {
	var d ec2Detail
	if err := json.Unmarshal(e.Detail, &d); err != nil {
		return d, fmt.Errorf("decoding detail: %w", err)
	}
	if !strings.HasPrefix(d.InstanceID, "i-") {
		return d, fmt.Errorf("detail has no instance-id")
	}
	return d, nil
}

func parseSpotInterruption(e envelope) (Message, error) {
	d, err := decodeEC2Detail(e)
	if err != nil {
		return Message{}, err
	}
	return Message{Kind: KindSpotInterruption, InstanceIDs: []string{d.InstanceID}, Deadline: e.Time.Add(spotReclaimWarning)}, nil
}

func parseRebalanceRecommendation(e envelope) (Message, error) {
	d, err := decodeEC2Detail(e)
	if err != nil {
		return Message{}, err
	}
	return Message{Kind: KindRebalanceRecommendation, InstanceIDs: []string{d.InstanceID}}, nil
}

func parseStateChange(e envelope) (Message, error) {
	d, err := decodeEC2Detail(e)
	if err != nil {
		return Message{}, err
	}
	if d.State == "" {
		return Message{}, errors.New("detail has no state")
	}
	return Message{Kind: KindStateChange, InstanceIDs: []string{d.InstanceID}, State: d.State, Deadline: e.Time}, nil
}

type healthDetail struct {
	Service           string `json:"service"`
	EventTypeCode     string `json:"eventTypeCode"`
	EventTypeCategory string `json:"eventTypeCategory"`
	StartTime         string `json:"startTime"`
	AffectedEntities  []struct {
		EntityValue string `json:"entityValue"`
	} `json:"affectedEntities"`
}

// parseScheduledChange reads an AWS Health scheduled change of EC2 instances (retirement,
// scheduled stop or reboot). Health events of other services or categories are unknown.
func parseScheduledChange(e envelope) (Message, error) {
	var d healthDetail
	if err := json.Unmarshal(e.Detail, &d); err != nil {
		return Message{}, fmt.Errorf("decoding detail: %w", err)
	}
	if d.Service != "EC2" || d.EventTypeCategory != "scheduledChange" {
		return Message{}, fmt.Errorf("service %q category %q is not an EC2 scheduled change", d.Service, d.EventTypeCategory)
	}
	m := Message{Kind: KindScheduledChange}
	for _, a := range d.AffectedEntities {
		if strings.HasPrefix(a.EntityValue, "i-") {
			m.InstanceIDs = append(m.InstanceIDs, a.EntityValue)
		}
	}
	if len(m.InstanceIDs) == 0 {
		return Message{}, errors.New("no affected instance")
	}
	if d.StartTime != "" {
		start, err := time.Parse(http.TimeFormat, d.StartTime)
		if err != nil {
			if start, err = time.Parse(time.RFC1123, d.StartTime); err != nil {
				return Message{}, fmt.Errorf("startTime %q: %w", d.StartTime, err)
			}
		}
		m.Deadline = start
	}
	return m, nil
}
