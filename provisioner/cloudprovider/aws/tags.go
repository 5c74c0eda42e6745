package aws

// Tags Tailor puts on what it creates in EC2 and IAM, to find it again and to scope IAM
// permissions to it.
const (
	tagNodePool      = "karpenter.sh/nodepool"
	tagNodeClaim     = "karpenter.sh/nodeclaim"
	tagNodeClass     = "karpenter.k8s.aws/ec2nodeclass"
	tagNodeClassRole = "karpenter.k8s.aws/role"
	tagEKSCluster    = "eks:eks-cluster-name"
	tagName          = "Name"
)

func clusterTagKey(cluster string) string { return "kubernetes.io/cluster/" + cluster }
