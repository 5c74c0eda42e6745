package localaws

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// SubnetSummary is a subnet as the admin API lists it.
type SubnetSummary struct {
	ID   string `json:"id"`
	Zone string `json:"zone"`
	CIDR string `json:"cidrBlock"`
	// Addresses is how many instances the subnet holds at once.
	Addresses int `json:"addresses"`
	// AvailableIPAddressCount is what DescribeSubnets reports: Addresses less those held.
	AvailableIPAddressCount int `json:"availableIpAddressCount"`
}

// SubnetSize sets how many instances a subnet holds at once.
type SubnetSize struct {
	ID        string `json:"id"`
	Addresses int    `json:"addresses"`
}

// Subnets lists the subnets and their free addresses.
func (s *Server) Subnets() []SubnetSummary {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]SubnetSummary, 0, len(s.subnets))
	for _, sn := range s.subnets {
		out = append(out, SubnetSummary{ID: sn.id, Zone: sn.zone.name, CIDR: sn.prefix.String(), Addresses: sn.addresses, AvailableIPAddressCount: sn.available()})
	}
	return out
}

// SetSubnetSizes changes how many instances the subnets named hold at once, from 0 to what
// their prefix has room for. Instances already launched keep their addresses, so a subnet
// sized below what it holds reports no free address until enough terminate.
func (s *Server) SetSubnetSizes(sizes []SubnetSize) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, size := range sizes {
		sn := s.subnetByID(size.ID)
		if sn == nil {
			return fmt.Errorf("unknown subnet %q", size.ID)
		}
		if size.Addresses < 0 || size.Addresses > sn.capacity() {
			return fmt.Errorf("subnet %s (%s) holds 0 to %d addresses, not %d", sn.id, sn.prefix, sn.capacity(), size.Addresses)
		}
	}
	for _, size := range sizes {
		s.subnetByID(size.ID).addresses = size.Addresses
	}
	return nil
}

// serveSubnets serves GET and PATCH /_admin/subnets.
func (s *Server) serveSubnets(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		s.writeAdminJSON(w, s.Subnets())
	case http.MethodPatch:
		var sizes []SubnetSize
		if err := json.NewDecoder(r.Body).Decode(&sizes); err != nil {
			http.Error(w, "decoding subnet sizes: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := s.SetSubnetSizes(sizes); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.writeAdminJSON(w, s.Subnets())
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}
