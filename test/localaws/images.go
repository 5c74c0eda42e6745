package localaws

import (
	"encoding/xml"
	"sort"
	"strings"
)

type describeImagesResponse struct {
	XMLName xml.Name `xml:"DescribeImagesResponse"`
	ec2Envelope
	Images    []xmlImage `xml:"imagesSet>item"`
	NextToken string     `xml:"nextToken,omitempty"`
}

type xmlImage struct {
	ImageID            string                `xml:"imageId"`
	Platform           string                `xml:"platform,omitempty"`
	ImageLocation      string                `xml:"imageLocation"`
	ImageState         string                `xml:"imageState"`
	ImageOwnerID       string                `xml:"imageOwnerId"`
	ImageOwnerAlias    string                `xml:"imageOwnerAlias,omitempty"`
	CreationDate       string                `xml:"creationDate"`
	IsPublic           bool                  `xml:"isPublic"`
	Architecture       string                `xml:"architecture"`
	ImageType          string                `xml:"imageType"`
	Name               string                `xml:"name"`
	Description        string                `xml:"description"`
	RootDeviceType     string                `xml:"rootDeviceType"`
	RootDeviceName     string                `xml:"rootDeviceName"`
	BlockDeviceMapping []xmlImageBlockDevice `xml:"blockDeviceMapping>item"`
	VirtualizationType string                `xml:"virtualizationType"`
	Hypervisor         string                `xml:"hypervisor"`
	EnaSupport         bool                  `xml:"enaSupport"`
	PlatformDetails    string                `xml:"platformDetails"`
	UsageOperation     string                `xml:"usageOperation"`
	ImdsSupport        string                `xml:"imdsSupport,omitempty"`
	TagSet             []xmlTag              `xml:"tagSet>item"`
}

type xmlImageBlockDevice struct {
	DeviceName string            `xml:"deviceName"`
	EBS        xmlImageEBSVolume `xml:"ebs"`
}

type xmlImageEBSVolume struct {
	SnapshotID          string `xml:"snapshotId"`
	VolumeSize          int    `xml:"volumeSize"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
	VolumeType          string `xml:"volumeType"`
	Encrypted           bool   `xml:"encrypted"`
}

// imageFilters are the DescribeImages filters served.
func imageFilters() filterFields[*image] {
	return filterFields[*image]{
		fields: map[string]func(*image) []string{
			"image-id":            func(i *image) []string { return oneValue(i.id) },
			"name":                func(i *image) []string { return oneValue(i.name) },
			"description":         func(i *image) []string { return oneValue(i.description) },
			"architecture":        func(i *image) []string { return oneValue(i.arch) },
			"state":               func(*image) []string { return oneValue("available") },
			"owner-id":            func(i *image) []string { return oneValue(i.ownerID) },
			"owner-alias":         func(i *image) []string { return oneValue(i.ownerAlias) },
			"image-type":          func(*image) []string { return oneValue("machine") },
			"is-public":           func(i *image) []string { return boolValue(i.ownerAlias != "") },
			"root-device-type":    func(*image) []string { return oneValue("ebs") },
			"virtualization-type": func(*image) []string { return oneValue("hvm") },
			"platform":            func(i *image) []string { return oneValue(i.platform) },
		},
		tags: func(i *image) []tag { return i.tags },
	}
}

// describeImages lists the seeded AMIs, ordered by name.
func (s *Server) describeImages(p queryParams) (*describeImagesResponse, error) {
	filters, err := p.filters()
	if err != nil {
		return nil, err
	}
	keep, err := imageFilters().compile(filters)
	if err != nil {
		return nil, err
	}
	maxResults, token, err := p.pageParams()
	if err != nil {
		return nil, err
	}
	candidates := s.images
	if ids := p.strs("ImageId"); len(ids) > 0 {
		candidates = nil
		for _, id := range ids {
			if !strings.HasPrefix(id, "ami-") {
				return nil, newAPIError("InvalidAMIID.Malformed", "Invalid id: \"%s\" (expecting \"ami-...\")", id)
			}
			img := s.imageByID(id)
			if img == nil {
				return nil, newAPIError("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id)
			}
			candidates = append(candidates, img)
		}
	}
	if owners := p.strs("Owner"); len(owners) > 0 {
		candidates = filterSlice(candidates, func(i *image) bool {
			for _, o := range owners {
				if o == i.ownerID || (o == "self" && i.ownerID == accountID) || (o != "" && o == i.ownerAlias) {
					return true
				}
			}
			return false
		})
	}
	found := filterSlice(candidates, keep)
	sort.SliceStable(found, func(i, j int) bool { return found[i].name < found[j].name })
	page, next, err := paginate(found, maxResults, token, pageLimits{min: 5, max: 1000, fallback: len(found) + 1, tokenCode: codeInvalidPaginationToken})
	if err != nil {
		return nil, err
	}
	resp := &describeImagesResponse{NextToken: next}
	for _, img := range page {
		owner := img.ownerAlias
		if owner == "" {
			owner = img.ownerID
		}
		out := xmlImage{
			ImageID:            img.id,
			Platform:           img.platform,
			ImageLocation:      owner + "/" + img.name,
			ImageState:         "available",
			ImageOwnerID:       img.ownerID,
			ImageOwnerAlias:    img.ownerAlias,
			CreationDate:       formatTime(img.created),
			IsPublic:           img.ownerAlias != "",
			Architecture:       img.arch,
			ImageType:          "machine",
			Name:               img.name,
			Description:        img.description,
			RootDeviceType:     "ebs",
			RootDeviceName:     img.rootDevice,
			VirtualizationType: "hvm",
			Hypervisor:         "xen",
			EnaSupport:         true,
			PlatformDetails:    imagePlatformDetails(img),
			UsageOperation:     imageUsageOperation(img),
			ImdsSupport:        "v2.0",
			TagSet:             toXMLTags(img.tags),
		}
		for _, v := range img.volumes {
			out.BlockDeviceMapping = append(out.BlockDeviceMapping, xmlImageBlockDevice{
				DeviceName: v.device,
				EBS: xmlImageEBSVolume{
					SnapshotID:          "snap-" + hexDigits(17, img.id, v.device),
					VolumeSize:          v.sizeGiB,
					DeleteOnTermination: true,
					VolumeType:          "gp3",
				},
			})
		}
		resp.Images = append(resp.Images, out)
	}
	return resp, nil
}

// imageByID returns the AMI with the id, nil if there is none.
func (s *Server) imageByID(id string) *image {
	for _, img := range s.images {
		if img.id == id {
			return img
		}
	}
	return nil
}

// imagePlatformDetails is the operating system EC2 bills an image's instances for.
func imagePlatformDetails(img *image) string {
	if img.platform == platformWindows {
		return productWindows
	}
	return productLinux
}

// imageUsageOperation is the billing code of an image's instances: RunInstances:0002 is
// Windows with the license included.
func imageUsageOperation(img *image) string {
	if img.platform == platformWindows {
		return "RunInstances:0002"
	}
	return "RunInstances"
}
