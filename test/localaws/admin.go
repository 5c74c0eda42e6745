package localaws

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// adminPrefix is where the admin API is served.
const adminPrefix = "/_admin/"

// InstanceSummary is an instance as the admin API lists it.
type InstanceSummary struct {
	ID               string            `json:"id"`
	InstanceType     string            `json:"instanceType"`
	Zone             string            `json:"zone"`
	CapacityType     string            `json:"capacityType"`
	PricePerHour     float64           `json:"pricePerHour"`
	State            string            `json:"state"`
	PrivateDNSName   string            `json:"privateDnsName"`
	PrivateIPAddress string            `json:"privateIpAddress"`
	ImageID          string            `json:"imageId"`
	Tags             map[string]string `json:"tags"`
	LaunchTime       time.Time         `json:"launchTime"`
	NodeRegistered   bool              `json:"nodeRegistered"`
	NeverRegisters   bool              `json:"neverRegisters,omitempty"`
}

// Instances lists the instances EC2 still shows, in launch order.
func (s *Server) Instances() []InstanceSummary {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	visible := s.visibleInstances(now)
	out := make([]InstanceSummary, 0, len(visible))
	for _, i := range visible {
		out = append(out, InstanceSummary{
			ID:               i.id,
			InstanceType:     i.instanceType.Name,
			Zone:             i.zone.name,
			CapacityType:     i.capacityType,
			PricePerHour:     i.pricePerHour,
			State:            s.stateAt(i, now),
			PrivateDNSName:   i.privateDNS,
			PrivateIPAddress: i.privateIP,
			ImageID:          i.imageID,
			Tags:             tagMap(i.tags),
			LaunchTime:       i.launchedAt.UTC(),
			NodeRegistered:   i.node.registered,
			NeverRegisters:   i.neverRegister,
		})
	}
	return out
}

// Launched counts the instances CreateFleet launched since the server started, terminated
// ones included: a harness compares it with the NodeClaims created to find duplicate launches.
func (s *Server) Launched() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.launched
}

// LaunchCount is what GET /_admin/launched answers.
type LaunchCount struct {
	Instances int `json:"instances"`
}

// KillInstance terminates an instance now, with no event of any kind, as when its hardware
// fails or a spot instance is reclaimed without its warning; its Node goes with it.
func (s *Server) KillInstance(id string) error {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.instanceByID(id, now)
	if i == nil || !i.terminatedAt.IsZero() {
		return fmt.Errorf("instance %q does not exist or is terminated", id)
	}
	s.terminate(i, now)
	s.logger.V(2).Info("killed instance", "instance", id)
	return nil
}

// serveAdmin serves the admin API:
//
//	GET /_admin/healthz                 "ok" while the server runs
//	GET /_admin/instances               the instances, as a JSON list of InstanceSummary
//	DELETE /_admin/instances/<id>       terminate the instance now, without any event
//	GET /_admin/launched                instances launched since start (LaunchCount)
//	GET /_admin/insufficient-capacity   the pools that report InsufficientInstanceCapacity
//	PUT /_admin/insufficient-capacity   replace them with the JSON list of CapacityPool sent
//	GET /_admin/faults                  the Faults injected
//	PATCH /_admin/faults                change the Faults fields sent
//	GET /_admin/subnets                 the subnets and their free addresses (SubnetSummary)
//	PATCH /_admin/subnets               set the addresses of the subnets sent ([]SubnetSize)
//	GET /_admin/requests                requests received per action
//	GET /_admin/capacity-reservations   the capacity reservations (CapacityReservationSummary)
//	POST /_admin/capacity-reservations  add the CapacityReservationSpec sent
//	DELETE /_admin/requests             reset those counts
func (s *Server) serveAdmin(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, adminPrefix)
	if s.serveInterruptionAdmin(w, r, path) {
		return
	}
	switch {
	case path == "healthz" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	case path == "instances" && r.Method == http.MethodGet:
		s.writeAdminJSON(w, s.Instances())
	case path == "insufficient-capacity" && r.Method == http.MethodGet:
		s.writeAdminJSON(w, s.insufficientCapacity())
	case path == "insufficient-capacity" && r.Method == http.MethodPut:
		var pools []CapacityPool
		if err := json.NewDecoder(r.Body).Decode(&pools); err != nil {
			http.Error(w, "decoding capacity pools: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := s.setInsufficientCapacity(pools); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.writeAdminJSON(w, s.insufficientCapacity())
	case strings.HasPrefix(path, "instances/") && r.Method == http.MethodDelete:
		if err := s.KillInstance(strings.TrimPrefix(path, "instances/")); err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case path == "launched" && r.Method == http.MethodGet:
		s.writeAdminJSON(w, LaunchCount{Instances: s.Launched()})
	case path == "faults":
		s.serveFaults(w, r)
	case path == "subnets":
		s.serveSubnets(w, r)
	case path == "requests":
		s.serveRequests(w, r)
	case path == "capacity-reservations":
		s.serveCapacityReservations(w, r)
	case path == "healthz" || path == "instances" || path == "insufficient-capacity":
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	default:
		http.NotFound(w, r)
	}
}

// writeAdminJSON writes v as the JSON response.
func (s *Server) writeAdminJSON(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		s.logger.Error(err, "failed to encode admin response")
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}
