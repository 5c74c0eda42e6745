package convert

import (
	"fmt"
	"sort"
	"strings"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
)

// aliasFamilies are the AMI families with a v1 alias ("al2023@latest").
var aliasFamilies = map[string]string{"AL2": "al2", "AL2023": "al2023", "Bottlerocket": "bottlerocket", "Windows2019": "windows2019", "Windows2022": "windows2022"}

// awsNodeTemplateSpec converts the spec of a karpenter.k8s.aws/v1alpha1 AWSNodeTemplate, or
// the inline provider of a v1alpha5 Provisioner, which has the same fields.
func awsNodeTemplateSpec(d *document, spec *fields, out *awsv1.EC2NodeClassSpec) {
	for _, id := range selectorIDs(spec.stringMap("subnetSelector")) {
		out.SubnetSelectorTerms = append(out.SubnetSelectorTerms, awsv1.SubnetSelectorTerm{ID: id})
	}
	if tags := selectorTags(spec.stringMap("subnetSelector")); tags != nil {
		out.SubnetSelectorTerms = append(out.SubnetSelectorTerms, awsv1.SubnetSelectorTerm{Tags: tags})
	}
	if out.SubnetSelectorTerms != nil {
		d.changed(spec.at("subnetSelector"), "→ spec.subnetSelectorTerms (aws-ids: one term per id; tags: one term)")
	} else {
		d.fail(spec.at("subnetSelector"), "is missing: nodes need subnets; set subnetSelector (tags, or aws-ids)")
	}
	sgs := spec.stringMap("securityGroupSelector")
	for _, id := range selectorIDs(sgs) {
		out.SecurityGroupSelectorTerms = append(out.SecurityGroupSelectorTerms, awsv1.SecurityGroupSelectorTerm{ID: id})
	}
	if tags := selectorTags(sgs); tags != nil {
		out.SecurityGroupSelectorTerms = append(out.SecurityGroupSelectorTerms, awsv1.SecurityGroupSelectorTerm{Tags: tags})
	}
	if out.SecurityGroupSelectorTerms != nil {
		d.changed(spec.at("securityGroupSelector"), "→ spec.securityGroupSelectorTerms (aws-ids: one term per id; tags: one term)")
	} else if !spec.has("launchTemplate") {
		d.fail(spec.at("securityGroupSelector"), "is missing: nodes need security groups; set securityGroupSelector (tags, or aws-ids)")
	}

	var terms []awsv1.AMISelectorTerm
	if amis := spec.stringMap("amiSelector"); amis != nil {
		terms = amiTerms(amis)
		d.changed(spec.at("amiSelector"), "→ spec.amiSelectorTerms (aws::ids: one term per id; aws::name with each of aws::owners; other keys: tags)")
	}
	family, ok := spec.str("amiFamily")
	if !ok {
		family = "AL2"
	}
	amis(d, spec, family, ok, terms, out)

	if profile, ok := spec.str("instanceProfile"); ok {
		out.InstanceProfile = &profile
	} else {
		d.dropped(spec.at("instanceProfile"), "unset: the AWSNodeTemplate used the aws.defaultInstanceProfile setting, which v1 does not have; set spec.role or spec.instanceProfile")
	}
	if spec.has("launchTemplate") {
		spec.get("launchTemplate")
		d.dropped(spec.at("launchTemplate"), "v1 launches from its own launch templates: move the template's AMI, user data, security groups and volumes into amiSelectorTerms, userData, securityGroupSelectorTerms and blockDeviceMappings")
	}
	common(d, spec, out)
	spec.unread("unknown field: not part of the v1alpha1 AWSNodeTemplate API")
}

// ec2NodeClassV1beta1Spec converts the spec of a karpenter.k8s.aws/v1beta1 EC2NodeClass.
func ec2NodeClassV1beta1Spec(d *document, spec *fields, out *awsv1.EC2NodeClassSpec) {
	if !spec.decode("subnetSelectorTerms", &out.SubnetSelectorTerms) {
		d.fail(spec.at("subnetSelectorTerms"), "is missing: nodes need subnets; add subnetSelectorTerms")
	}
	if !spec.decode("securityGroupSelectorTerms", &out.SecurityGroupSelectorTerms) {
		d.fail(spec.at("securityGroupSelectorTerms"), "is missing: nodes need security groups; add securityGroupSelectorTerms")
	}
	var terms []awsv1.AMISelectorTerm
	spec.decode("amiSelectorTerms", &terms)
	family, ok := spec.str("amiFamily")
	if !ok {
		family = "AL2"
	}
	amis(d, spec, family, ok, terms, out)
	if role, ok := spec.str("role"); ok {
		out.Role = role
	}
	if profile, ok := spec.str("instanceProfile"); ok {
		out.InstanceProfile = &profile
	}
	if out.Role == "" && out.InstanceProfile == nil {
		d.dropped(spec.at("role"), "neither role nor instanceProfile is set: v1 needs one; set spec.role")
	}
	if spec.decode("instanceStorePolicy", &out.InstanceStorePolicy) {
		if *out.InstanceStorePolicy != awsv1.InstanceStorePolicyRAID0 {
			d.fail(spec.at("instanceStorePolicy"), fmt.Sprintf("%q is not a policy: use RAID0", *out.InstanceStorePolicy))
		}
	}
	spec.decode("associatePublicIPAddress", &out.AssociatePublicIPAddress)
	common(d, spec, out)
	spec.unread("unknown field: not part of the v1beta1 EC2NodeClass API")
}

// common converts the fields every version names and shapes alike.
func common(d *document, spec *fields, out *awsv1.EC2NodeClassSpec) {
	if s, ok := spec.str("userData"); ok {
		out.UserData = &s
	}
	if s, ok := spec.str("context"); ok {
		out.Context = &s
	}
	out.Tags = spec.stringMap("tags")
	spec.decode("detailedMonitoring", &out.DetailedMonitoring)
	spec.decode("blockDeviceMappings", &out.BlockDeviceMappings)
	if !spec.decode("metadataOptions", &out.MetadataOptions) {
		d.changed(spec.at("metadataOptions"), "unset: v1 defaults httpPutResponseHopLimit to 1, so pods cannot reach the instance metadata service (earlier versions allowed 2); set metadataOptions.httpPutResponseHopLimit: 2 if pods need it")
	}
}

// amis sets the AMI selector terms and family. Without terms, the family becomes an alias.
func amis(d *document, spec *fields, family string, familySet bool, terms []awsv1.AMISelectorTerm, out *awsv1.EC2NodeClassSpec) {
	alias, hasAlias := aliasFamilies[family]
	switch {
	case len(terms) > 0 && (hasAlias || family == "Custom"):
		out.AMISelectorTerms = terms
		out.AMIFamily = &family
		if !familySet {
			d.changed(spec.at("amiFamily"), "AL2: the earlier default, which v1 requires with amiSelectorTerms")
		}
	case len(terms) > 0:
		custom := "Custom"
		out.AMISelectorTerms = terms
		out.AMIFamily = &custom
		d.dropped(spec.at("amiFamily"), fmt.Sprintf("%s → Custom: Tailor bootstraps AL2, AL2023, Bottlerocket and Windows only; give userData that joins the node to the cluster", family))
	case hasAlias:
		out.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: alias + "@latest"}}
		what := family
		if !familySet {
			what += " (the earlier default)"
		}
		if strings.HasPrefix(alias, "windows") {
			d.changed(spec.at("amiFamily"), fmt.Sprintf("%s without AMI selector → spec.amiSelectorTerms [{alias: %s@latest}]; EKS publishes only the latest Windows AMIs: select one by id for repeatable nodes", what, alias))
			return
		}
		d.changed(spec.at("amiFamily"), fmt.Sprintf("%s without AMI selector → spec.amiSelectorTerms [{alias: %s@latest}]; pin a version (%s@v20240807, say) for repeatable nodes", what, alias, alias))
	default:
		d.fail(spec.at("amiFamily"), fmt.Sprintf("%s without AMI selector has no v1 alias: select AMIs with amiSelectorTerms, or use AL2, AL2023, Bottlerocket, Windows2019 or Windows2022", family))
	}
}

// selectorIDs reads the ids of a v1alpha1 selector map: "aws-ids" or "aws::ids", comma separated.
func selectorIDs(m map[string]string) []string {
	var ids []string
	for _, k := range []string{"aws-ids", "aws::ids"} {
		for _, id := range strings.Split(m[k], ",") {
			if id = strings.TrimSpace(id); id != "" {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// selectorTags is a v1alpha1 selector map without its special keys.
func selectorTags(m map[string]string) map[string]string {
	var tags map[string]string
	for k, v := range m {
		if strings.HasPrefix(k, "aws::") || k == "aws-ids" {
			continue
		}
		if tags == nil {
			tags = map[string]string{}
		}
		tags[k] = v
	}
	return tags
}

// amiTerms converts a v1alpha1 amiSelector: ids become one term each; aws::name becomes a
// term per owner of aws::owners (which defaulted to self and amazon); the tags one term.
func amiTerms(m map[string]string) []awsv1.AMISelectorTerm {
	var terms []awsv1.AMISelectorTerm
	for _, id := range selectorIDs(m) {
		terms = append(terms, awsv1.AMISelectorTerm{ID: id})
	}
	tags := selectorTags(m)
	if name, ok := m["aws::name"]; ok {
		owners := []string{"self", "amazon"}
		if o, ok := m["aws::owners"]; ok {
			owners = strings.Split(o, ",")
		}
		sort.Strings(owners)
		for _, owner := range owners {
			terms = append(terms, awsv1.AMISelectorTerm{Name: name, Owner: strings.TrimSpace(owner), Tags: tags})
		}
		return terms
	}
	if tags != nil {
		terms = append(terms, awsv1.AMISelectorTerm{Tags: tags})
	}
	return terms
}
