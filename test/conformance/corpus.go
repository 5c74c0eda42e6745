// Package conformance holds a corpus of karpenter.sh/v1 NodePools and karpenter.k8s.aws/v1
// EC2NodeClasses written in the shapes Karpenter's documentation shows (testdata), and what
// Tailor does with each: accepted or refused by the API server, and where Tailor does
// something else than Karpenter, what. Its tests apply the corpus to a real API server and
// plan pods with it; test/e2e launches the accepted pairs on the local stack.
package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
)

// Case is one manifest file of the corpus.
type Case struct {
	// File is the name of the manifest under testdata.
	File string
	// Rejected lists what the API server's refusal must say; empty when the manifest is
	// accepted. Manifests are created with strict field validation, as kubectl does: an
	// unknown field is refused, not dropped.
	Rejected []string
	// Differs says what Karpenter does differently with this manifest; the tests assert
	// Tailor's side of it. Empty when Tailor does what Karpenter does.
	Differs string
	// NotLaunched says why the local stack cannot launch an accepted manifest; empty when
	// it can.
	NotLaunched string
}

// Cases is the corpus.
func Cases() []Case {
	return []Case{
		{File: "docs-complete.yaml", Differs: "Karpenter holds back max(evictionHard, evictionSoft) memory.available " +
			"from the allocatable it plans with; Tailor holds back evictionHard only, as the kubelet does (evictionSoft is enforced on the node only)"},
		{File: "operators.yaml"},
		{File: "custom-family.yaml"},
		{File: "custom-ami.yaml"},
		{File: "bottlerocket.yaml"},
		{File: "windows2022.yaml"},
		{File: "instance-profile.yaml", NotLaunched: "the local IAM endpoint has no instance profile made beforehand"},
		{File: "rejected-kubernetes-io-label.yaml", Rejected: []string{"spec.template.metadata.labels", "keys in the kubernetes.io domain are reserved for the kubelet"}},
		{File: "rejected-karpenter-sh-label.yaml", Rejected: []string{"spec.template.metadata.labels", "labels in the karpenter.sh domain are set by Tailor"}},
		{File: "rejected-minvalues.yaml", Rejected: []string{"spec.template.spec.requirements[0]", "minValues is larger than the number of values"}},
		{File: "rejected-budget-schedule.yaml", Rejected: []string{"spec.disruption.budgets[0].schedule", "should match"}},
		{File: "rejected-gt-value.yaml", Rejected: []string{"spec.template.spec.requirements[0]", "operators Gt, Lt, Gte and Lte take exactly one non-negative integer"}},
		{File: "rejected-alias-with-id.yaml", Rejected: []string{"spec.amiSelectorTerms", "an AMI selector term with alias cannot also have id"}},
		{File: "differs-aws-domain-label.yaml", Differs: `Karpenter refuses template labels in the karpenter.k8s.aws domain other than its well-known ones (label domain "karpenter.k8s.aws" is restricted); Tailor accepts them`,
			NotLaunched: "refers to the EC2NodeClass of docs-complete.yaml; what matters is that the API server accepts it"},
		{File: "capacity-reservations.yaml"},
		{File: "differs-karpenter-sh-requirement.yaml", Differs: `Karpenter refuses requirement keys in the karpenter.sh domain other than capacity-type and nodepool (label domain "karpenter.sh" is restricted); Tailor accepts them`,
			NotLaunched: "no instance type carries the label: pods could not be planned onto the NodePool"},
	}
}

// Vars are the values of the placeholders the manifests use where Karpenter's documentation
// shows a value of the user's cluster: ${CLUSTER_NAME}, ${SUBNET_ID}, ${SECURITY_GROUP_ID}
// and ${AMI_ID}.
type Vars struct {
	ClusterName, SubnetID, SecurityGroupID, AMIID string
}

// OfflineVars are placeholder values for tests that reach no EC2 endpoint.
func OfflineVars() Vars {
	return Vars{ClusterName: "tailor-local", SubnetID: "subnet-0123456789abcdef0", SecurityGroupID: "sg-0123456789abcdef0", AMIID: "ami-0123456789abcdef0"}
}

// Read returns the case's manifests with the placeholders replaced.
func (c Case) Read(v Vars) ([]byte, error) {
	raw, err := os.ReadFile(filepath.Join(Dir(), c.File))
	if err != nil {
		return nil, fmt.Errorf("reading the corpus: %w", err)
	}
	values := map[string]string{"CLUSTER_NAME": v.ClusterName, "SUBNET_ID": v.SubnetID, "SECURITY_GROUP_ID": v.SecurityGroupID, "AMI_ID": v.AMIID}
	var missing error
	expanded := os.Expand(string(raw), func(name string) string {
		value, ok := values[name]
		if !ok || value == "" {
			missing = fmt.Errorf("%s: no value for ${%s}", c.File, name)
		}
		return value
	})
	return []byte(expanded), missing
}

// Dir is the corpus's directory.
func Dir() string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata")
}
