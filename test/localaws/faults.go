package localaws

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Error codes of throttled requests, per protocol, as AWS returns them.
const (
	codeEC2Throttled  = "RequestLimitExceeded"
	codeIAMThrottled  = "Throttling"
	codeJSONThrottled = "ThrottlingException"
)

// Faults are the failures the server injects, changed at run time through the admin API
// (GET and PATCH /_admin/faults). The zero value injects nothing.
type Faults struct {
	// ThrottleRate is the share (0 to 1) of API requests answered with the protocol's
	// throttling error (EC2 RequestLimitExceeded, IAM Throttling, JSON ThrottlingException).
	// Throttling is deterministic: with 0.5, every second request is throttled.
	ThrottleRate float64 `json:"throttleRate"`
	// ThrottleActions limits throttling to these actions (e.g. "CreateFleet",
	// "GetProducts"); empty means every action.
	ThrottleActions []string `json:"throttleActions,omitempty"`
	// FleetMaxInstances, when set, is the most instances one CreateFleet call launches; the
	// shortfall is reported in the fleet's errorSet with FleetErrorCode (partial fulfilment).
	FleetMaxInstances *int `json:"fleetMaxInstances,omitempty"`
	// FleetErrorCode is the error code of the shortfall; empty means
	// InsufficientInstanceCapacity.
	FleetErrorCode string `json:"fleetErrorCode,omitempty"`
	// LaunchLatency is how long CreateFleet takes to answer.
	LaunchLatency Duration `json:"launchLatency"`
	// LaunchDelay, when set, replaces Options.LaunchDelay (how long instances launched from
	// now on stay pending).
	LaunchDelay *Duration `json:"launchDelay,omitempty"`
	// BootDelay, when set, replaces Options.BootDelay (how long instances launched from now
	// on take to register their Node once running).
	BootDelay *Duration `json:"bootDelay,omitempty"`
	// NeverRegisterNext is how many of the next instances launched never register a Node,
	// as when a node fails to join; it counts down with each launch.
	NeverRegisterNext int `json:"neverRegisterNext"`
	// FailActions answers every request of these actions with an error, as a persistent
	// failure does (a missing permission, an outage): e.g. {"GetProducts": {"code":
	// "InternalErrorException", "status": 500}}. Requests are counted before they fail.
	FailActions map[string]ActionFailure `json:"failActions,omitempty"`
}

// codeUnauthorized is EC2's error code for a request IAM denies.
const codeUnauthorized = "UnauthorizedOperation"

// ActionFailure is the error FailActions answers an action with.
type ActionFailure struct {
	// Code is the error code, such as UnauthorizedOperation or InternalErrorException. An
	// UnauthorizedOperation message ends with an encoded authorization failure message
	// that differs on every request, as EC2's does.
	Code string `json:"code"`
	// Message is the error message; empty means one that names the action.
	Message string `json:"message,omitempty"`
	// Status is the HTTP status, 400 to 599; zero means 400.
	Status int `json:"status,omitempty"`
}

// Duration is a time.Duration written in JSON as Go writes durations ("1.5s").
type Duration struct{ time.Duration }

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"1.5s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

func (f *Faults) validate() error {
	switch {
	case f.ThrottleRate < 0 || f.ThrottleRate > 1:
		return fmt.Errorf("throttleRate must be between 0 and 1, got %v", f.ThrottleRate)
	case f.FleetMaxInstances != nil && *f.FleetMaxInstances < 0:
		return fmt.Errorf("fleetMaxInstances must not be negative, got %d", *f.FleetMaxInstances)
	case f.LaunchLatency.Duration < 0 || (f.LaunchDelay != nil && f.LaunchDelay.Duration < 0) || (f.BootDelay != nil && f.BootDelay.Duration < 0):
		return fmt.Errorf("durations must not be negative")
	case f.NeverRegisterNext < 0:
		return fmt.Errorf("neverRegisterNext must not be negative, got %d", f.NeverRegisterNext)
	}
	for action, failure := range f.FailActions {
		if failure.Code == "" {
			return fmt.Errorf("failActions[%s] needs a code", action)
		}
		if failure.Status != 0 && (failure.Status < 400 || failure.Status > 599) {
			return fmt.Errorf("failActions[%s].status must be 400 to 599, got %d", action, failure.Status)
		}
	}
	return nil
}

// faultState holds the faults and the request counts. Its zero value injects nothing. It
// never takes Server.mu, so it may be used while that is held.
type faultState struct {
	mu     sync.Mutex
	faults Faults
	// throttleDebt accumulates ThrottleRate per eligible request; a request that brings it
	// to 1 is throttled.
	throttleDebt float64
	requests     map[string]int
}

// Faults returns the faults injected now.
func (s *Server) Faults() Faults {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	f := s.faults.faults
	f.ThrottleActions = slices.Clone(f.ThrottleActions)
	f.FailActions = maps.Clone(f.FailActions)
	return f
}

// SetFaults replaces the faults injected.
func (s *Server) SetFaults(f Faults) error {
	if err := f.validate(); err != nil {
		return err
	}
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.faults = f
	s.faults.throttleDebt = 0
	return nil
}

// RequestCounts returns how many requests each action received (throttled ones included),
// keyed by action ("CreateFleet", "GetProducts", ...).
func (s *Server) RequestCounts() map[string]int {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	out := make(map[string]int, len(s.faults.requests))
	for k, v := range s.faults.requests {
		out[k] = v
	}
	return out
}

// ResetRequestCounts sets every request count to zero.
func (s *Server) ResetRequestCounts() {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.requests = nil
}

// admit counts a request and returns the error to answer it with (the action's failure or
// throttling), or nil.
func (s *Server) admit(action, throttleCode string) *apiError {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	if s.faults.requests == nil {
		s.faults.requests = map[string]int{}
	}
	s.faults.requests[action]++
	f := &s.faults.faults
	if failure, ok := f.FailActions[action]; ok {
		return failure.apiError(action, s.faults.requests[action])
	}
	if f.ThrottleRate == 0 || (len(f.ThrottleActions) > 0 && !slices.Contains(f.ThrottleActions, action)) {
		return nil
	}
	s.faults.throttleDebt += f.ThrottleRate
	if s.faults.throttleDebt < 1 {
		return nil
	}
	s.faults.throttleDebt--
	return &apiError{code: throttleCode, message: "Request limit exceeded.", status: http.StatusServiceUnavailable}
}

// apiError is the error answering the nth request of the action.
func (f ActionFailure) apiError(action string, n int) *apiError {
	message := f.Message
	if message == "" {
		message = "The local endpoint fails every " + action + " request."
	}
	if f.Code == codeUnauthorized {
		message += " Encoded authorization failure message: " + hexDigits(48, "denied", action, strconv.Itoa(n))
	}
	return &apiError{code: f.Code, message: message, status: f.Status}
}

// launchLatency returns how long CreateFleet takes to answer.
func (s *Server) launchLatency() time.Duration {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	return s.faults.faults.LaunchLatency.Duration
}

// fleetLimit returns the most instances a CreateFleet call launches (-1 for no limit) and the
// error code of a shortfall.
func (s *Server) fleetLimit() (int, string) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	f := s.faults.faults
	code := f.FleetErrorCode
	if code == "" {
		code = codeInsufficientCapacity
	}
	if f.FleetMaxInstances == nil {
		return -1, code
	}
	return *f.FleetMaxInstances, code
}

// launchTiming returns, for an instance launched now, how long it stays pending, how long it
// then takes to register, and whether it never registers (which uses up one
// NeverRegisterNext).
func (s *Server) launchTiming() (pending, boot time.Duration, neverRegister bool) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	f := &s.faults.faults
	pending, boot = s.launchDelay, s.bootDelay
	if f.LaunchDelay != nil {
		pending = f.LaunchDelay.Duration
	}
	if f.BootDelay != nil {
		boot = f.BootDelay.Duration
	}
	if f.NeverRegisterNext > 0 {
		f.NeverRegisterNext--
		neverRegister = true
	}
	return pending, boot, neverRegister
}

// serveFaults serves GET and PATCH /_admin/faults (PATCH changes only the fields sent).
func (s *Server) serveFaults(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPatch {
		f := s.Faults()
		if err := json.NewDecoder(r.Body).Decode(&f); err != nil {
			http.Error(w, "decoding faults: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := s.SetFaults(f); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	} else if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	s.writeAdminJSON(w, s.Faults())
}

// serveRequests serves GET /_admin/requests (counts by action) and DELETE (reset).
func (s *Server) serveRequests(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
	case http.MethodDelete:
		s.ResetRequestCounts()
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	s.writeAdminJSON(w, s.RequestCounts())
}
