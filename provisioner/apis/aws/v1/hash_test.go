package v1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestEC2NodeClassHashCountsOnlyStaticFields(t *testing.T) {
	base := func() *EC2NodeClass {
		size := resource.MustParse("20Gi")
		return &EC2NodeClass{Spec: EC2NodeClassSpec{
			Role:                       "NodeRole",
			AMISelectorTerms:           []AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        []SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
			SecurityGroupSelectorTerms: []SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
			BlockDeviceMappings: []*BlockDeviceMapping{
				{DeviceName: ptr.To("/dev/xvda"), EBS: &BlockDevice{VolumeSize: &size}, RootVolume: true},
				{DeviceName: ptr.To("/dev/xvdb"), EBS: &BlockDevice{VolumeSize: &size}},
			},
		}}
	}
	for _, tt := range []struct {
		name   string
		change func(*EC2NodeClassSpec)
		same   bool
	}{
		{name: "selector terms", change: func(s *EC2NodeClassSpec) {
			s.AMISelectorTerms = []AMISelectorTerm{{Alias: "al2023@v20250101"}}
			s.SubnetSelectorTerms = []SubnetSelectorTerm{{ID: "subnet-1"}}
			s.SecurityGroupSelectorTerms = []SecurityGroupSelectorTerm{{ID: "sg-1"}}
			s.CapacityReservationSelectorTerms = []CapacityReservationSelectorTerm{{ID: "cr-1"}}
		}, same: true},
		{name: "amiFamily the alias implies", change: func(s *EC2NodeClassSpec) { s.AMIFamily = ptr.To(AMIFamilyAL2023) }, same: true},
		{name: "block device mappings reordered", change: func(s *EC2NodeClassSpec) {
			s.BlockDeviceMappings[0], s.BlockDeviceMappings[1] = s.BlockDeviceMappings[1], s.BlockDeviceMappings[0]
		}, same: true},
		{name: "alias of another family", change: func(s *EC2NodeClassSpec) { s.AMISelectorTerms = []AMISelectorTerm{{Alias: "bottlerocket@latest"}} }},
		{name: "amiFamily Custom", change: func(s *EC2NodeClassSpec) { s.AMIFamily = ptr.To(AMIFamilyCustom) }},
		{name: "userData", change: func(s *EC2NodeClassSpec) { s.UserData = ptr.To("#!/bin/bash") }},
		{name: "instanceProfile", change: func(s *EC2NodeClassSpec) { s.Role, s.InstanceProfile = "", ptr.To("profile") }},
		{name: "tags", change: func(s *EC2NodeClassSpec) { s.Tags = map[string]string{"team": "a"} }},
		{name: "kubelet", change: func(s *EC2NodeClassSpec) { s.Kubelet = &KubeletConfiguration{MaxPods: ptr.To[int32](20)} }},
		{name: "volume size", change: func(s *EC2NodeClassSpec) {
			size := resource.MustParse("30Gi")
			s.BlockDeviceMappings[1].EBS.VolumeSize = &size
		}},
		{name: "instanceStorePolicy", change: func(s *EC2NodeClassSpec) { s.InstanceStorePolicy = ptr.To(InstanceStorePolicyRAID0) }},
		{name: "detailedMonitoring set to its default", change: func(s *EC2NodeClassSpec) { s.DetailedMonitoring = ptr.To(false) }, same: true},
		{name: "detailedMonitoring", change: func(s *EC2NodeClassSpec) { s.DetailedMonitoring = ptr.To(true) }},
		{name: "associatePublicIPAddress", change: func(s *EC2NodeClassSpec) { s.AssociatePublicIPAddress = ptr.To(true) }},
		{name: "metadataOptions", change: func(s *EC2NodeClassSpec) { s.MetadataOptions = &MetadataOptions{HTTPTokens: ptr.To("optional")} }},
		{name: "context", change: func(s *EC2NodeClassSpec) { s.Context = ptr.To("ctx") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			class := base()
			before := class.Hash()
			tt.change(&class.Spec)
			if diff := cmp.Diff(tt.same, class.Hash() == before); diff != "" {
				t.Errorf("hash unchanged (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEC2NodeClassHashLeavesTheClassAlone(t *testing.T) {
	class := &EC2NodeClass{Spec: EC2NodeClassSpec{
		AMISelectorTerms:    []AMISelectorTerm{{Alias: "al2@latest"}},
		BlockDeviceMappings: []*BlockDeviceMapping{{DeviceName: ptr.To("/dev/xvdb")}, {DeviceName: ptr.To("/dev/xvda")}},
	}}
	want := class.DeepCopy()
	class.Hash()
	if diff := cmp.Diff(want, class); diff != "" {
		t.Errorf("Hash changed the class (-want +got):\n%s", diff)
	}
}
