package localaws

import (
	"fmt"
	"math/bits"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Discovery and naming tags on the seeded network, matching what EKS blueprints create.
const (
	discoveryTagKey = "karpenter.sh/discovery"
	nameTagKey      = "Name"
	vpcCIDR         = "10.0.0.0/16"
	// reservedHosts is how many addresses AWS keeps at the start of every subnet.
	reservedHosts = 4
)

// zone is an availability zone of the region.
type zone struct {
	name string
	id   string
}

// vpc is the one seeded VPC.
type vpc struct {
	id string
}

// subnet is a seeded private subnet. Instances take an address when they launch and give it
// back when they terminate: nextHost is the next address never handed out, released those
// handed back, used those held. addresses is how many instances the subnet can hold at once,
// the whole prefix less AWS's reserved addresses unless the admin API set fewer.
type subnet struct {
	id        string
	zone      zone
	vpcID     string
	prefix    netip.Prefix
	tags      []tag
	nextHost  uint32
	released  []uint32
	used      int
	addresses int
}

// capacity is how many addresses the subnet's prefix has for instances.
func (sn *subnet) capacity() int {
	return 1<<(32-sn.prefix.Bits()) - reservedHosts - 1
}

// available is the subnet's AvailableIpAddressCount.
func (sn *subnet) available() int {
	return max(0, sn.addresses-sn.used)
}

// takeAddress hands out a free address, one never handed out first and then the one released
// longest ago; false when none is free. An address released a moment ago names a node that
// may still be going away: handed out at once, the new instance's node would collide with it.
func (sn *subnet) takeAddress() (netip.Addr, bool) {
	if sn.available() == 0 {
		return netip.Addr{}, false
	}
	var host uint32
	if int(sn.nextHost) < reservedHosts+sn.capacity() || len(sn.released) == 0 {
		host = sn.nextHost
		sn.nextHost++
	} else {
		host, sn.released = sn.released[0], sn.released[1:]
	}
	sn.used++
	return uintToAddr(addrToUint(sn.prefix.Addr()) + host), true
}

// releaseAddress gives back the address of a terminated instance.
func (sn *subnet) releaseAddress(ip string) {
	addr, err := netip.ParseAddr(ip)
	if err != nil || !sn.prefix.Contains(addr) {
		return
	}
	sn.released = append(sn.released, addrToUint(addr)-addrToUint(sn.prefix.Addr()))
	sn.used--
}

// securityGroup is a seeded security group.
type securityGroup struct {
	id          string
	name        string
	description string
	vpcID       string
	tags        []tag
}

// image is a seeded AMI.
type image struct {
	id          string
	name        string
	description string
	arch        string
	ownerID     string
	ownerAlias  string
	created     time.Time
	rootDevice  string
	volumes     []imageVolume
	tags        []tag
	// platform is "windows" for Windows images, "" for Linux ones, as EC2 reports it.
	platform string
	// windowsBuild is the Windows Server build of a Windows image, which its kubelet
	// reports as node.kubernetes.io/windows-build.
	windowsBuild string
}

// imageVolume is an EBS volume in an AMI's block device mappings.
type imageVolume struct {
	device  string
	sizeGiB int
}

// parameter is an SSM parameter.
type parameter struct {
	name     string
	value    string
	dataType string
	modified time.Time
}

// seedNetwork creates the VPC, perZone private subnets per zone and the security groups. The
// first subnet of a zone keeps the id and name it has when a zone has one.
func (s *Server) seedNetwork(zoneNames []string, perZone int) {
	s.vpc = vpc{id: "vpc-" + hexDigits(17, s.clusterName, "vpc")}
	whole := netip.MustParsePrefix(vpcCIDR)
	subnetBits := bits.Len(uint(len(zoneNames)*perZone - 1))
	for i, name := range zoneNames {
		z := zone{name: name, id: zoneID(s.region, i)}
		s.zones = append(s.zones, z)
		for j := range perZone {
			idParts, label := []string{s.clusterName, "subnet", name}, s.clusterName+"-private-"+name
			if j > 0 {
				idParts, label = append(idParts, strconv.Itoa(j)), fmt.Sprintf("%s-%d", label, j)
			}
			base := addrToUint(whole.Addr()) + uint32(i*perZone+j)<<(32-whole.Bits()-subnetBits)
			sn := &subnet{
				id:       "subnet-" + hexDigits(17, idParts...),
				zone:     z,
				vpcID:    s.vpc.id,
				prefix:   netip.PrefixFrom(uintToAddr(base), whole.Bits()+subnetBits),
				tags:     sortedTags(tag{discoveryTagKey, s.clusterName}, tag{nameTagKey, label}),
				nextHost: reservedHosts,
			}
			sn.addresses = sn.capacity()
			s.subnets = append(s.subnets, sn)
		}
	}
	s.securityGroups = []*securityGroup{
		{
			id:          "sg-" + hexDigits(17, s.clusterName, "sg", "default"),
			name:        "default",
			description: "default VPC security group",
			vpcID:       s.vpc.id,
		},
		{
			id:          "sg-" + hexDigits(17, s.clusterName, "sg", "node"),
			name:        s.clusterName + "-node",
			description: "Nodes of cluster " + s.clusterName,
			vpcID:       s.vpc.id,
			tags: sortedTags(
				tag{discoveryTagKey, s.clusterName},
				tag{nameTagKey, s.clusterName + "-node"},
			),
		},
	}
}

// zoneID names the i-th zone of a region the way EC2 does, e.g. use1-az1 for us-east-1.
func zoneID(region string, i int) string {
	parts := strings.Split(region, "-")
	if len(parts) < 2 {
		return fmt.Sprintf("%s-az%d", region, i+1)
	}
	short := parts[0]
	for _, p := range parts[1 : len(parts)-1] {
		short += p[:1]
	}
	short += parts[len(parts)-1]
	return fmt.Sprintf("%s-az%d", short, i+1)
}

// amiRelease is one release of an AMI family; the last of a list is the newest.
type amiRelease struct {
	version string
	date    time.Time
}

// seedImages creates the EKS-optimized and Bottlerocket AMIs for both architectures, a few
// releases each, the SSM parameters of each release and of the newest (recommended or
// latest), and one custom AMI owned by the account and tagged for discovery.
func (s *Server) seedImages() {
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 4, 12, 33, 0, time.UTC) }
	eksReleases := []amiRelease{
		{"20260901", day(2026, time.September, 1)},
		{"20261001", day(2026, time.October, 1)},
		{"20261101", day(2026, time.November, 1)},
	}
	bottlerocketReleases := []amiRelease{
		{"1.48.0", day(2026, time.September, 8)},
		{"1.49.0", day(2026, time.October, 9)},
		{"1.50.0", day(2026, time.November, 4)},
	}
	const (
		eksOwner          = "602401143452"
		bottlerocketOwner = "092701018921"
	)
	eksPath := "/aws/service/eks/optimized-ami/" + s.kubernetes
	bottlerocketPath := "/aws/service/bottlerocket/aws-k8s-" + s.kubernetes
	families := []struct {
		owner    string
		releases []amiRelease
		name     func(arch string, r amiRelease) string
		desc     string
		volumes  []imageVolume
		// ssm names the parameter of the newest release; versioned that of each release.
		ssm       func(arch string) string
		versioned func(arch string, r amiRelease) string
	}{
		{
			owner:    eksOwner,
			releases: eksReleases,
			name: func(arch string, r amiRelease) string {
				return fmt.Sprintf("amazon-eks-node-al2023-%s-standard-%s-v%s", arch, s.kubernetes, r.version)
			},
			desc:    "EKS-optimized Kubernetes node based on Amazon Linux 2023",
			volumes: []imageVolume{{"/dev/xvda", 20}},
			ssm: func(arch string) string {
				return eksPath + "/amazon-linux-2023/" + arch + "/standard/recommended/image_id"
			},
			versioned: func(arch string, r amiRelease) string {
				return fmt.Sprintf("%s/amazon-linux-2023/%s/standard/amazon-eks-node-al2023-%s-standard-%s-v%s/image_id", eksPath, arch, arch, s.kubernetes, r.version)
			},
		},
		{
			owner:    eksOwner,
			releases: eksReleases,
			name: func(arch string, r amiRelease) string {
				if arch == archARM64 {
					return fmt.Sprintf("amazon-eks-arm64-node-%s-v%s", s.kubernetes, r.version)
				}
				return fmt.Sprintf("amazon-eks-node-%s-v%s", s.kubernetes, r.version)
			},
			desc:    "EKS Kubernetes Worker AMI with AmazonLinux2 image",
			volumes: []imageVolume{{"/dev/xvda", 20}},
			ssm: func(arch string) string {
				if arch == archARM64 {
					return eksPath + "/amazon-linux-2-arm64/recommended/image_id"
				}
				return eksPath + "/amazon-linux-2/recommended/image_id"
			},
			versioned: func(arch string, r amiRelease) string {
				if arch == archARM64 {
					return fmt.Sprintf("%s/amazon-linux-2-arm64/amazon-eks-arm64-node-%s-v%s/image_id", eksPath, s.kubernetes, r.version)
				}
				return fmt.Sprintf("%s/amazon-linux-2/amazon-eks-node-%s-v%s/image_id", eksPath, s.kubernetes, r.version)
			},
		},
		{
			owner:    bottlerocketOwner,
			releases: bottlerocketReleases,
			name: func(arch string, r amiRelease) string {
				machine := arch
				if arch == archARM64 {
					machine = "aarch64"
				}
				return fmt.Sprintf("bottlerocket-aws-k8s-%s-%s-v%s-%s", s.kubernetes, machine, r.version, hexDigits(8, "bottlerocket", r.version))
			},
			desc:    "bottlerocket-aws-k8s-" + s.kubernetes,
			volumes: []imageVolume{{"/dev/xvda", 2}, {"/dev/xvdb", 20}},
			ssm: func(arch string) string {
				return bottlerocketPath + "/" + arch + "/latest/image_id"
			},
			versioned: func(arch string, r amiRelease) string {
				return bottlerocketPath + "/" + arch + "/" + r.version + "/image_id"
			},
		},
	}
	for _, f := range families {
		for _, arch := range []string{archX8664, archARM64} {
			for i, r := range f.releases {
				img := &image{
					name:        f.name(arch, r),
					description: f.desc,
					arch:        arch,
					ownerID:     f.owner,
					ownerAlias:  "amazon",
					created:     r.date,
					rootDevice:  f.volumes[0].device,
					volumes:     f.volumes,
				}
				img.id = "ami-" + hexDigits(17, img.name)
				names := []string{f.versioned(arch, r)}
				if i == len(f.releases)-1 {
					names = append(names, f.ssm(arch))
				}
				for _, name := range names {
					s.parameters[name] = &parameter{
						name:     name,
						value:    img.id,
						dataType: "aws:ec2:image",
						modified: r.date.Add(3 * time.Hour),
					}
				}
				s.images = append(s.images, img)
			}
		}
	}
	s.seedWindowsImages(day)
	custom := &image{
		name:        s.clusterName + "-custom-node-x86_64-v1",
		description: "Custom node image built by the cluster's owners",
		arch:        archX8664,
		ownerID:     accountID,
		created:     day(2026, time.October, 20),
		rootDevice:  "/dev/xvda",
		volumes:     []imageVolume{{"/dev/xvda", 30}},
		tags:        []tag{{discoveryTagKey, s.clusterName}},
	}
	custom.id = "ami-" + hexDigits(17, s.clusterName, custom.name)
	// An image another account shares under a name like the EKS images' and newer than
	// them: a name-only selector term must not pick it (owner defaults to self and amazon).
	lookalike := &image{
		name:        "amazon-eks-node-al2023-x86_64-standard-" + s.kubernetes + "-v20261201-community",
		description: "Community rebuild of the EKS-optimized AL2023 image",
		arch:        archX8664,
		ownerID:     communityAccountID,
		created:     day(2026, time.December, 1),
		rootDevice:  "/dev/xvda",
		volumes:     []imageVolume{{"/dev/xvda", 20}},
	}
	lookalike.id = "ami-" + hexDigits(17, lookalike.name)
	s.images = append(s.images, custom, lookalike)
}

// platformWindows is EC2's platform of Windows images and instances.
const platformWindows = "windows"

// seedWindowsImages creates the EKS-optimized Windows Server 2019 and 2022 Core AMIs, x86_64
// only, two releases each, and the SSM parameter of the latest release: EKS publishes no
// parameter per Windows release.
func (s *Server) seedWindowsImages(day func(int, time.Month, int) time.Time) {
	const windowsOwner = "801119661308"
	releases := []amiRelease{
		{"2026.10.15", day(2026, time.October, 15)},
		{"2026.11.12", day(2026, time.November, 12)},
	}
	for _, w := range []struct{ year, build string }{{"2019", "10.0.17763"}, {"2022", "10.0.20348"}} {
		year, build := w.year, w.build
		base := "Windows_Server-" + year + "-English-Core-EKS_Optimized-" + s.kubernetes
		for i, r := range releases {
			img := &image{
				name:        base + "-" + r.version,
				description: "Microsoft Windows Server " + year + " Core optimized for EKS and Kubernetes " + s.kubernetes,
				arch:        archX8664,
				ownerID:     windowsOwner,
				ownerAlias:  "amazon",
				created:     r.date,
				rootDevice:  "/dev/sda1",
				volumes:     []imageVolume{{"/dev/sda1", 50}},
				platform:    platformWindows,
				// The build the kubelet of this Windows Server release reports.
				windowsBuild: build,
			}
			img.id = "ami-" + hexDigits(17, img.name)
			if i == len(releases)-1 {
				name := "/aws/service/ami-windows-latest/" + base + "/image_id"
				s.parameters[name] = &parameter{name: name, value: img.id, dataType: "aws:ec2:image", modified: r.date.Add(3 * time.Hour)}
			}
			s.images = append(s.images, img)
		}
	}
}

// communityAccountID owns the images other accounts share.
const communityAccountID = "210987654321"

// addrToUint and uintToAddr convert IPv4 addresses to and from numbers for subnet arithmetic.
func addrToUint(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func uintToAddr(u uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(u >> 24), byte(u >> 16), byte(u >> 8), byte(u)})
}
