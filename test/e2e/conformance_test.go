package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/requirements"
	"github.com/tailor-autoscaler/tailor/test/conformance"
	"github.com/tailor-autoscaler/tailor/test/localstack"
)

// TestConformanceCorpusLaunches applies every accepted NodePool and EC2NodeClass pair of the
// conformance corpus (test/conformance) that the local stack can launch, runs one small pod
// on each NodePool, and checks that the node each pod lands on carries labels meeting its
// NodePool's requirements and template labels, and the template's annotations and taints.
// Startup taints are removed once a node registers, as the component they wait for would.
func TestConformanceCorpusLaunches(t *testing.T) {
	start := time.Now()
	e := startStack(t)
	vars := e.corpusVars(t)
	applier, err := localstack.NewApplier(e.stack.Config)
	if err != nil {
		t.Fatal(err)
	}
	var pools []*karpv1.NodePool
	var classes []string
	for _, c := range conformance.Cases() {
		if len(c.Rejected) > 0 || c.NotLaunched != "" {
			continue
		}
		raw, err := c.Read(vars)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), c.File)
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := applier.ApplyFiles(e.ctx, path); err != nil {
			t.Fatalf("applying %s: %v", c.File, err)
		}
		objs, err := localstack.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			switch o.GetKind() {
			case "EC2NodeClass":
				classes = append(classes, o.GetName())
			case "NodePool":
				np := &karpv1.NodePool{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, np); err != nil {
					t.Fatal(err)
				}
				pools = append(pools, np)
			}
		}
	}
	for _, name := range classes {
		e.waitNodeClassReady(t, name)
	}
	for _, np := range pools {
		p := pod("conformance-"+np.Name, "100m")
		p.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: np.Name}
		p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		if _, err := e.cs.CoreV1().Pods(metav1.NamespaceDefault).Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	running := map[string]*corev1.Pod{}
	err = wait.PollUntilContextTimeout(e.ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		e.removeStartupTaints(t, pools)
		for _, np := range pools {
			p, err := e.cs.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, "conformance-"+np.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if p.Status.Phase == corev1.PodRunning {
				running[np.Name] = p
			}
		}
		return len(running) == len(pools), nil
	})
	if err != nil {
		var waiting []string
		for _, np := range pools {
			if running[np.Name] == nil {
				waiting = append(waiting, np.Name)
			}
		}
		t.Fatalf("pods of NodePools %v not running: %v", waiting, err)
	}

	for _, np := range pools {
		node, err := e.cs.CoreV1().Nodes().Get(e.ctx, running[np.Name].Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if problems := nodeAgainstPool(node, np); len(problems) > 0 {
			t.Errorf("node %s of NodePool %s:\n  %s", node.Name, np.Name, strings.Join(problems, "\n  "))
			continue
		}
		t.Logf("NodePool %s: node %s, %s %s %s", np.Name, node.Name, node.Labels[corev1.LabelInstanceTypeStable],
			node.Labels[corev1.LabelTopologyZone], node.Labels[karpv1.CapacityTypeLabelKey])
	}
	t.Logf("%d NodePools launched in %s", len(pools), time.Since(start).Round(time.Second))
}

// nodeAgainstPool lists where a node's labels fail its NodePool's requirements and template
// labels, and the template annotations and taints it lacks.
func nodeAgainstPool(node *corev1.Node, np *karpv1.NodePool) []string {
	var problems []string
	for _, r := range np.Spec.Template.Spec.Requirements {
		if !requirements.Matches([]karpv1.NodeSelectorRequirementWithMinValues{r}, node.Labels) {
			value, ok := node.Labels[r.Key]
			problems = append(problems, fmt.Sprintf("label %s=%q (set: %t) does not meet %s", r.Key, value, ok, requirements.Describe(r)))
		}
	}
	for k, v := range np.Spec.Template.ObjectMeta.Labels {
		if node.Labels[k] != v {
			problems = append(problems, fmt.Sprintf("template label %s=%s: node has %q", k, v, node.Labels[k]))
		}
	}
	for k, v := range np.Spec.Template.ObjectMeta.Annotations {
		if node.Annotations[k] != v {
			problems = append(problems, fmt.Sprintf("template annotation %s=%s: node has %q", k, v, node.Annotations[k]))
		}
	}
	for _, taint := range np.Spec.Template.Spec.Taints {
		if !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&taint) }) {
			problems = append(problems, fmt.Sprintf("template taint %s: node has %v", taint.ToString(), node.Spec.Taints))
		}
	}
	return problems
}

// removeStartupTaints takes the NodePools' startup taints off their registered nodes.
func (e *env) removeStartupTaints(t *testing.T, pools []*karpv1.NodePool) {
	t.Helper()
	for _, np := range pools {
		if len(np.Spec.Template.Spec.StartupTaints) == 0 {
			continue
		}
		nodes, err := e.cs.CoreV1().Nodes().List(e.ctx, metav1.ListOptions{LabelSelector: karpv1.NodePoolLabelKey + "=" + np.Name})
		if err != nil {
			t.Fatal(err)
		}
		for i := range nodes.Items {
			node := &nodes.Items[i]
			kept := slices.DeleteFunc(slices.Clone(node.Spec.Taints), func(taint corev1.Taint) bool {
				return slices.ContainsFunc(np.Spec.Template.Spec.StartupTaints, func(startup corev1.Taint) bool { return taint.MatchTaint(&startup) })
			})
			if len(kept) == len(node.Spec.Taints) {
				continue
			}
			node.Spec.Taints = kept
			if _, err := e.cs.CoreV1().Nodes().Update(e.ctx, node, metav1.UpdateOptions{}); err != nil {
				t.Logf("removing startup taints of node %s: %v", node.Name, err)
			}
		}
	}
}

// corpusVars looks up the local EC2 endpoint's values for the corpus's placeholders: its
// first subnet, the nodes' security group, and the newest EKS AL2023 arm64 image.
func (e *env) corpusVars(t *testing.T) conformance.Vars {
	t.Helper()
	client := e.ec2Client()
	cluster := e.stack.ClusterName()
	discovery := []ec2types.Filter{{Name: aws.String("tag:karpenter.sh/discovery"), Values: []string{cluster}}}
	subnets, err := client.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{Filters: discovery})
	if err != nil || len(subnets.Subnets) == 0 {
		t.Fatalf("describing subnets: %d found: %v", len(subnets.Subnets), err)
	}
	groups, err := client.DescribeSecurityGroups(e.ctx, &ec2.DescribeSecurityGroupsInput{Filters: discovery})
	if err != nil || len(groups.SecurityGroups) == 0 {
		t.Fatalf("describing security groups: %v", err)
	}
	images, err := client.DescribeImages(e.ctx, &ec2.DescribeImagesInput{Owners: []string{"amazon"}, Filters: []ec2types.Filter{
		{Name: aws.String("name"), Values: []string{"amazon-eks-node-al2023-arm64-standard-*"}},
	}})
	if err != nil || len(images.Images) == 0 {
		t.Fatalf("describing images: %v", err)
	}
	newest := slices.MaxFunc(images.Images, func(a, b ec2types.Image) int {
		return strings.Compare(aws.ToString(a.CreationDate), aws.ToString(b.CreationDate))
	})
	return conformance.Vars{
		ClusterName:     cluster,
		SubnetID:        aws.ToString(subnets.Subnets[0].SubnetId),
		SecurityGroupID: aws.ToString(groups.SecurityGroups[0].GroupId),
		AMIID:           aws.ToString(newest.ImageId),
	}
}
