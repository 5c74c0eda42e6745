package localaws

import (
	"encoding/xml"
	"slices"
)

type describeAvailabilityZonesResponse struct {
	XMLName xml.Name `xml:"DescribeAvailabilityZonesResponse"`
	ec2Envelope
	Zones []xmlZone `xml:"availabilityZoneInfo>item"`
}

type xmlZone struct {
	ZoneName           string `xml:"zoneName"`
	ZoneID             string `xml:"zoneId"`
	ZoneState          string `xml:"zoneState"`
	ZoneType           string `xml:"zoneType"`
	OptInStatus        string `xml:"optInStatus"`
	RegionName         string `xml:"regionName"`
	GroupName          string `xml:"groupName"`
	NetworkBorderGroup string `xml:"networkBorderGroup"`
}

// describeAvailabilityZones lists the region's zones.
func (s *Server) describeAvailabilityZones(p queryParams) (*describeAvailabilityZonesResponse, error) {
	filters, err := p.filters()
	if err != nil {
		return nil, err
	}
	keep, err := filterFields[zone]{fields: map[string]func(zone) []string{
		"zone-name":   func(z zone) []string { return oneValue(z.name) },
		"zone-id":     func(z zone) []string { return oneValue(z.id) },
		"region-name": func(zone) []string { return oneValue(s.region) },
		"state":       func(zone) []string { return oneValue("available") },
		"zone-type":   func(zone) []string { return oneValue("availability-zone") },
	}}.compile(filters)
	if err != nil {
		return nil, err
	}
	names, ids := p.strs("ZoneName"), p.strs("ZoneId")
	for _, name := range names {
		if !anyZone(s.zones, func(z zone) bool { return z.name == name }) {
			return nil, invalidParameter("The zone '%s' does not exist.", name)
		}
	}
	for _, id := range ids {
		if !anyZone(s.zones, func(z zone) bool { return z.id == id }) {
			return nil, invalidParameter("The zone id '%s' does not exist.", id)
		}
	}
	resp := &describeAvailabilityZonesResponse{}
	for _, z := range s.zones {
		if (len(names) > 0 || len(ids) > 0) && !slices.Contains(names, z.name) && !slices.Contains(ids, z.id) {
			continue
		}
		if !keep(z) {
			continue
		}
		resp.Zones = append(resp.Zones, xmlZone{
			ZoneName:           z.name,
			ZoneID:             z.id,
			ZoneState:          "available",
			ZoneType:           "availability-zone",
			OptInStatus:        "opt-in-not-required",
			RegionName:         s.region,
			GroupName:          s.region,
			NetworkBorderGroup: s.region,
		})
	}
	return resp, nil
}

func anyZone(zones []zone, match func(zone) bool) bool {
	for _, z := range zones {
		if match(z) {
			return true
		}
	}
	return false
}

type describeSubnetsResponse struct {
	XMLName xml.Name `xml:"DescribeSubnetsResponse"`
	ec2Envelope
	Subnets   []xmlSubnet `xml:"subnetSet>item"`
	NextToken string      `xml:"nextToken,omitempty"`
}

type xmlSubnet struct {
	SubnetID                string   `xml:"subnetId"`
	SubnetArn               string   `xml:"subnetArn"`
	State                   string   `xml:"state"`
	VpcID                   string   `xml:"vpcId"`
	OwnerID                 string   `xml:"ownerId"`
	CidrBlock               string   `xml:"cidrBlock"`
	AvailableIPAddressCount int      `xml:"availableIpAddressCount"`
	AvailabilityZone        string   `xml:"availabilityZone"`
	AvailabilityZoneID      string   `xml:"availabilityZoneId"`
	DefaultForAz            bool     `xml:"defaultForAz"`
	MapPublicIPOnLaunch     bool     `xml:"mapPublicIpOnLaunch"`
	TagSet                  []xmlTag `xml:"tagSet>item"`
}

// subnetFilters are the DescribeSubnets filters served.
func subnetFilters() filterFields[*subnet] {
	return filterFields[*subnet]{
		fields: map[string]func(*subnet) []string{
			"subnet-id":            func(sn *subnet) []string { return oneValue(sn.id) },
			"vpc-id":               func(sn *subnet) []string { return oneValue(sn.vpcID) },
			"availability-zone":    func(sn *subnet) []string { return oneValue(sn.zone.name) },
			"availability-zone-id": func(sn *subnet) []string { return oneValue(sn.zone.id) },
			"cidr-block":           func(sn *subnet) []string { return oneValue(sn.prefix.String()) },
			"state":                func(*subnet) []string { return oneValue("available") },
			"default-for-az":       func(*subnet) []string { return boolValue(false) },
		},
		tags: func(sn *subnet) []tag { return sn.tags },
	}
}

// describeSubnets lists the seeded subnets.
func (s *Server) describeSubnets(p queryParams) (*describeSubnetsResponse, error) {
	filters, err := p.filters()
	if err != nil {
		return nil, err
	}
	keep, err := subnetFilters().compile(filters)
	if err != nil {
		return nil, err
	}
	maxResults, token, err := p.pageParams()
	if err != nil {
		return nil, err
	}
	candidates := s.subnets
	if ids := p.strs("SubnetId"); len(ids) > 0 {
		candidates = nil
		for _, id := range ids {
			sn := s.subnetByID(id)
			if sn == nil {
				return nil, newAPIError("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
			}
			candidates = append(candidates, sn)
		}
	}
	page, next, err := paginate(filterSlice(candidates, keep), maxResults, token, pageLimits{min: 5, max: 1000, fallback: 1000, tokenCode: codeInvalidPaginationToken})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := &describeSubnetsResponse{NextToken: next}
	for _, sn := range page {
		resp.Subnets = append(resp.Subnets, xmlSubnet{
			SubnetID:                sn.id,
			SubnetArn:               "arn:aws:ec2:" + s.region + ":" + accountID + ":subnet/" + sn.id,
			State:                   "available",
			VpcID:                   sn.vpcID,
			OwnerID:                 accountID,
			CidrBlock:               sn.prefix.String(),
			AvailableIPAddressCount: sn.available(),
			AvailabilityZone:        sn.zone.name,
			AvailabilityZoneID:      sn.zone.id,
			TagSet:                  toXMLTags(sn.tags),
		})
	}
	return resp, nil
}

// subnetByID returns the subnet with the id, nil if there is none.
func (s *Server) subnetByID(id string) *subnet {
	for _, sn := range s.subnets {
		if sn.id == id {
			return sn
		}
	}
	return nil
}

type describeSecurityGroupsResponse struct {
	XMLName xml.Name `xml:"DescribeSecurityGroupsResponse"`
	ec2Envelope
	Groups    []xmlSecurityGroup `xml:"securityGroupInfo>item"`
	NextToken string             `xml:"nextToken,omitempty"`
}

type xmlSecurityGroup struct {
	OwnerID          string   `xml:"ownerId"`
	GroupID          string   `xml:"groupId"`
	GroupName        string   `xml:"groupName"`
	GroupDescription string   `xml:"groupDescription"`
	VpcID            string   `xml:"vpcId"`
	SecurityGroupArn string   `xml:"securityGroupArn"`
	TagSet           []xmlTag `xml:"tagSet>item"`
}

// describeSecurityGroups lists the seeded security groups.
func (s *Server) describeSecurityGroups(p queryParams) (*describeSecurityGroupsResponse, error) {
	filters, err := p.filters()
	if err != nil {
		return nil, err
	}
	keep, err := filterFields[*securityGroup]{
		fields: map[string]func(*securityGroup) []string{
			"group-id":    func(g *securityGroup) []string { return oneValue(g.id) },
			"group-name":  func(g *securityGroup) []string { return oneValue(g.name) },
			"vpc-id":      func(g *securityGroup) []string { return oneValue(g.vpcID) },
			"description": func(g *securityGroup) []string { return oneValue(g.description) },
			"owner-id":    func(*securityGroup) []string { return oneValue(accountID) },
		},
		tags: func(g *securityGroup) []tag { return g.tags },
	}.compile(filters)
	if err != nil {
		return nil, err
	}
	maxResults, token, err := p.pageParams()
	if err != nil {
		return nil, err
	}
	ids, names := p.strs("GroupId"), p.strs("GroupName")
	candidates := s.securityGroups
	if len(ids) > 0 || len(names) > 0 {
		candidates = nil
		for _, id := range ids {
			g := s.securityGroupByID(id)
			if g == nil {
				return nil, newAPIError("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
			}
			candidates = append(candidates, g)
		}
		for _, name := range names {
			var found *securityGroup
			for _, g := range s.securityGroups {
				if g.name == name {
					found = g
				}
			}
			if found == nil {
				return nil, newAPIError("InvalidGroup.NotFound", "The security group '%s' does not exist in default VPC '%s'", name, s.vpc.id)
			}
			candidates = append(candidates, found)
		}
	}
	page, next, err := paginate(filterSlice(candidates, keep), maxResults, token, pageLimits{min: 5, max: 1000, fallback: 1000, tokenCode: codeInvalidPaginationToken})
	if err != nil {
		return nil, err
	}
	resp := &describeSecurityGroupsResponse{NextToken: next}
	for _, g := range page {
		resp.Groups = append(resp.Groups, xmlSecurityGroup{
			OwnerID:          accountID,
			GroupID:          g.id,
			GroupName:        g.name,
			GroupDescription: g.description,
			VpcID:            g.vpcID,
			SecurityGroupArn: "arn:aws:ec2:" + s.region + ":" + accountID + ":security-group/" + g.id,
			TagSet:           toXMLTags(g.tags),
		})
	}
	return resp, nil
}

// securityGroupByID returns the security group with the id, nil if there is none.
func (s *Server) securityGroupByID(id string) *securityGroup {
	for _, g := range s.securityGroups {
		if g.id == id {
			return g
		}
	}
	return nil
}
