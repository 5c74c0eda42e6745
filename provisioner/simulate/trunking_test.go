package simulate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
)

// podENIManifests is a NodePool of any on-demand type and one pod, which asks for the
// given pod-eni (security groups for pods) when podENI is not empty.
func podENIManifests(podENI string) string {
	// An extended resource's request equals its limit.
	extended := ""
	if podENI != "" {
		extended = "\n        vpc.amazonaws.com/pod-eni: \"" + podENI + "\"\n      limits:\n        vpc.amazonaws.com/pod-eni: \"" + podENI + "\""
	}
	return `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: TailorNodeRole
  amiSelectorTerms:
  - alias: al2023@latest
  subnetSelectorTerms:
  - tags:
      karpenter.sh/discovery: demo
  securityGroupSelectorTerms:
  - tags:
      karpenter.sh/discovery: demo
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: general
spec:
  template:
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      requirements:
      - key: karpenter.sh/capacity-type
        operator: In
        values: ["on-demand"]
---
apiVersion: v1
kind: Pod
metadata:
  name: sgp
  namespace: default
spec:
  containers:
  - name: app
    image: app
    resources:
      requests:
        cpu: 100m
        memory: 128Mi` + extended + `
`
}

// trunkingOutcome is what the pod-eni test compares of a simulation.
type trunkingOutcome struct {
	// Trunking says whether the chosen type and every type the NodeClaim lists have branch
	// interfaces; NodeClaims counts them.
	ChosenTrunking, AllListedTrunking bool
	NodeClaims                        int
	Unschedulable                     []string
}

func TestRunPlansPodENIOntoTrunkingTypes(t *testing.T) {
	tests := []struct {
		name   string
		podENI string
		want   trunkingOutcome
	}{
		{
			name: "without pod-eni the cheapest type is a burstable one without trunking",
			want: trunkingOutcome{NodeClaims: 1},
		},
		{
			name:   "a pod-eni pod goes to a type with branch interfaces, and every type its NodeClaim lists has them",
			podENI: "1",
			want:   trunkingOutcome{NodeClaims: 1, ChosenTrunking: true, AllListedTrunking: true},
		},
		{
			name:   "more branch interfaces than any type has",
			podENI: "121",
			want:   trunkingOutcome{Unschedulable: []string{"default/sgp"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "pod-eni.yaml")
			if err := os.WriteFile(path, []byte(podENIManifests(tt.podENI)), 0o644); err != nil {
				t.Fatal(err)
			}
			out, _ := run(t, "-f", path)
			got := trunkingOutcome{NodeClaims: len(out.NodeClaims)}
			for _, nc := range out.NodeClaims {
				got.ChosenTrunking = catalog.BranchInterfaces(nc.InstanceType) > 0
				got.AllListedTrunking = len(nc.InstanceTypes) > 0
				for _, it := range nc.InstanceTypes {
					if catalog.BranchInterfaces(it) == 0 {
						got.AllListedTrunking = false
					}
				}
			}
			for _, u := range out.Unschedulable {
				got.Unschedulable = append(got.Unschedulable, u.Pod)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("simulation (-want +got):\n%s", diff)
			}
		})
	}
}
