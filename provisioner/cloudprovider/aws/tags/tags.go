// Package tags names the tags Tailor puts on what it creates in EC2 and IAM, to find it
// again and to scope IAM permissions to it.
package tags

import (
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Tag keys.
const (
	NodePool      = "karpenter.sh/nodepool"
	NodeClaim     = "karpenter.sh/nodeclaim"
	NodeClass     = "karpenter.k8s.aws/ec2nodeclass"
	NodeClassRole = "karpenter.k8s.aws/role"
	EKSCluster    = "eks:eks-cluster-name"
	Name          = "Name"
)

// ClusterKey is the key of the tag, valued "owned", of what the cluster owns.
func ClusterKey(cluster string) string { return "kubernetes.io/cluster/" + cluster }

// EC2 turns tags into EC2 tags, sorted by key.
func EC2(tags map[string]string) []ec2types.Tag {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]ec2types.Tag, len(keys))
	for i, k := range keys {
		out[i] = ec2types.Tag{Key: aws.String(k), Value: aws.String(tags[k])}
	}
	return out
}

// Filters are the EC2 filters that select what has the tags: a value "*" matches any
// value of the key.
func Filters(tags map[string]string) []ec2types.Filter {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []ec2types.Filter
	for _, k := range keys {
		if tags[k] == "*" {
			out = append(out, ec2types.Filter{Name: aws.String("tag-key"), Values: []string{k}})
			continue
		}
		out = append(out, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{tags[k]}})
	}
	return out
}
