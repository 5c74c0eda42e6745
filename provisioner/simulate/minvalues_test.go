package simulate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// minValuesManifests is a NodePool asking for 55 instance families (the 60 cheapest types that can take a small pod hold 52) and two pods: one any
// type can take, one that allows two families only.
const minValuesManifests = `apiVersion: karpenter.k8s.aws/v1
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
  name: diverse
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
      - key: karpenter.k8s.aws/instance-family
        operator: Exists
        minValues: 55
---
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: default
spec:
  containers:
  - name: app
    image: app
    resources:
      requests:
        cpu: "1"
        memory: 1Gi
---
apiVersion: v1
kind: Pod
metadata:
  name: narrow
  namespace: default
spec:
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - key: karpenter.k8s.aws/instance-family
            operator: In
            values: ["m5", "c5"]
  containers:
  - name: app
    image: app
    resources:
      requests:
        cpu: "1"
        memory: 1Gi
`

// familyOutcome is what the minValues test compares of a simulation: per NodeClaim, its
// pods, whether minValues were relaxed and how many families its instanceTypes hold.
type familyOutcome struct {
	NodeClaims    []familyClaim
	Unschedulable map[string]string
}

type familyClaim struct {
	Pods           []string
	Relaxed        bool
	Families       int
	CheapestListed bool
	// Widened is whether it lists more than packing.MaxInstanceTypes types.
	Widened bool
}

func TestRunKeepsMinValues(t *testing.T) {
	path := filepath.Join(t.TempDir(), "minvalues.yaml")
	if err := os.WriteFile(path, []byte(minValuesManifests), 0o644); err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	familyOf := map[string]string{}
	for _, it := range cat.InstanceTypes {
		familyOf[it.Name] = it.Family
	}
	tests := []struct {
		name   string
		policy string
		want   familyOutcome
	}{
		{
			name:   "Strict: the NodeClaim lists 55 families, more types than MaxInstanceTypes; the pod only two families can take is unschedulable, with the key named",
			policy: "Strict",
			want: familyOutcome{
				NodeClaims: []familyClaim{{Pods: []string{"default/web"}, Families: 55, CheapestListed: true, Widened: true}},
				Unschedulable: map[string]string{
					"default/narrow": `NodePool "diverse": minValues 55 for karpenter.k8s.aws/instance-family: only 2 families can take these pods`,
				},
			},
		},
		{
			name:   "BestEffort: the narrow pod gets a NodeClaim of its two families, marked relaxed",
			policy: "BestEffort",
			want: familyOutcome{NodeClaims: []familyClaim{
				{Pods: []string{"default/web"}, Families: 55, CheapestListed: true, Widened: true},
				{Pods: []string{"default/narrow"}, Relaxed: true, Families: 2, CheapestListed: true},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _ := run(t, "-f", path, "--min-values-policy", tt.policy)
			var got familyOutcome
			for _, nc := range out.NodeClaims {
				families := map[string]bool{}
				for _, it := range nc.InstanceTypes {
					families[familyOf[it]] = true
				}
				got.NodeClaims = append(got.NodeClaims, familyClaim{Pods: nc.Pods, Relaxed: nc.MinValuesRelaxed, Families: len(families),
					CheapestListed: len(nc.InstanceTypes) > 0 && nc.InstanceTypes[0] == nc.InstanceType, Widened: len(nc.InstanceTypes) > packing.MaxInstanceTypes})
			}
			for _, u := range out.Unschedulable {
				if got.Unschedulable == nil {
					got.Unschedulable = map[string]string{}
				}
				got.Unschedulable[u.Pod] = u.Reason
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("simulation (-want +got):\n%s", diff)
			}
		})
	}
}
