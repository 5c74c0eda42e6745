package v1

import (
	"cmp"
	"slices"
	"strings"

	"k8s.io/utils/ptr"

	"github.com/tailor-autoscaler/tailor/provisioner/apis/internal/jsonhash"
)

// AMI families.
const (
	AMIFamilyAL2023       = "AL2023"
	AMIFamilyAL2          = "AL2"
	AMIFamilyBottlerocket = "Bottlerocket"
	AMIFamilyWindows2019  = "Windows2019"
	AMIFamilyWindows2022  = "Windows2022"
	AMIFamilyCustom       = "Custom"
)

// EC2NodeClassHashVersion is the version of EC2NodeClass.Hash. It changes whenever the same
// class may hash differently: a field enters or leaves the hash, or a hashed field gets a
// new default. NodeClaims stamped with another version are stamped again with the current
// hash rather than drifted, so that upgrading Tailor never replaces nodes by itself.
const EC2NodeClassHashVersion = "v1"

// Hash identifies the static fields of the class, those that only change when the class
// does: userData, role, instanceProfile, tags, kubelet, blockDeviceMappings,
// instanceStorePolicy, detailedMonitoring, associatePublicIPAddress, metadataOptions,
// context, and the AMI family the class resolves to (so that spelling out the family its
// alias implies changes nothing). The selector terms are left out: what they select drifts
// a node when it changes (AMIs, subnets, security groups), not the terms themselves; a
// node's capacity reservation is its own, not its class's.
// Block device mappings count as a set keyed by device name.
func (in *EC2NodeClass) Hash() string {
	spec := in.Spec.DeepCopy()
	spec.SubnetSelectorTerms = nil
	spec.SecurityGroupSelectorTerms = nil
	spec.AMISelectorTerms = nil
	spec.CapacityReservationSelectorTerms = nil
	spec.AMIFamily = ptr.To(in.ResolvedAMIFamily())
	slices.SortStableFunc(spec.BlockDeviceMappings, func(a, b *BlockDeviceMapping) int {
		return cmp.Compare(ptr.Deref(a.DeviceName, ""), ptr.Deref(b.DeviceName, ""))
	})
	return jsonhash.Sum(spec)
}

// ResolvedAMIFamily is the class's amiFamily, or else the family of its alias, or else
// Custom.
func (in *EC2NodeClass) ResolvedAMIFamily() string {
	if in.Spec.AMIFamily != nil {
		return *in.Spec.AMIFamily
	}
	if family := in.AliasFamily(); family != "" {
		return family
	}
	return AMIFamilyCustom
}

// AliasFamily is the AMI family of the class's alias term ("al2023@latest" is AL2023), ""
// without one.
func (in *EC2NodeClass) AliasFamily() string {
	family := ""
	for _, t := range in.Spec.AMISelectorTerms {
		if t.Alias == "" {
			continue
		}
		switch strings.SplitN(t.Alias, "@", 2)[0] {
		case "al2023":
			family = AMIFamilyAL2023
		case "al2":
			family = AMIFamilyAL2
		case "bottlerocket":
			family = AMIFamilyBottlerocket
		case "windows2019":
			family = AMIFamilyWindows2019
		case "windows2022":
			family = AMIFamilyWindows2022
		}
	}
	return family
}
