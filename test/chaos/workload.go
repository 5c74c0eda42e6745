package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
	"github.com/tailor-autoscaler/tailor/provisioner/simulate"
	"github.com/tailor-autoscaler/tailor/provisioner/surge"
)

// DeploymentLabel names, on the trials' pods, the Deployment they belong to: the selector of
// the Deployment and of its PodDisruptionBudget.
const DeploymentLabel = "chaos.tailor.sh/deployment"

// The AMI releases a drift phase pins the EC2NodeClass to, in turn: the local endpoint
// publishes both (the newer is al2023@latest).
var amiAliases = [2]string{"al2023@v20261101", "al2023@v20261001"}

// poolName names the NodePool and the EC2NodeClass of the trials.
const poolName = "chaos"

// poolManifest is the trials' NodePool: spot and on-demand c, m and r instances, as the
// general example, consolidating nodes whose pods have not changed for 5s so that a trial
// comes to rest within its bound.
func poolManifest(cluster, alias string) string {
	return fmt.Sprintf(`apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: %[1]s
spec:
  role: KarpenterNodeRole-%[2]s
  amiSelectorTerms:
  - alias: %[3]s
  subnetSelectorTerms:
  - tags:
      karpenter.sh/discovery: %[2]s
  securityGroupSelectorTerms:
  - tags:
      karpenter.sh/discovery: %[2]s
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: %[1]s
spec:
  template:
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: %[1]s
      requirements:
      - key: karpenter.sh/capacity-type
        operator: In
        values: [spot, on-demand]
      - key: karpenter.k8s.aws/instance-category
        operator: In
        values: [c, m, r]
      - key: karpenter.k8s.aws/instance-generation
        operator: Gt
        values: ["5"]
      - key: kubernetes.io/arch
        operator: In
        values: [amd64]
  limits:
    cpu: "1000"
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 5s
`, poolName, cluster, alias)
}

// freshPlanner plans pods afresh on an empty cluster with the trials' NodePool.
type freshPlanner struct{ pools []packing.NodePool }

// newFreshPlanner reads the NodePool as the planner sees it, with the embedded catalog (the
// local endpoint's prices).
func newFreshPlanner(dir, cluster string) (*freshPlanner, error) {
	path := filepath.Join(dir, "chaos-pool.yaml")
	if err := os.WriteFile(path, []byte(poolManifest(cluster, amiAliases[0])), 0o644); err != nil {
		return nil, err
	}
	cat, err := catalog.Embedded()
	if err != nil {
		return nil, fmt.Errorf("reading the embedded catalog: %w", err)
	}
	in, err := simulate.Load([]string{path}, cat, aws.OfflineOptions{})
	if err != nil {
		return nil, fmt.Errorf("loading the trials' NodePool: %w", err)
	}
	return &freshPlanner{pools: in.NodePools}, nil
}

// cost is the hourly price of a fresh plan of the pods, its nodes priced whole.
func (f *freshPlanner) cost(pods []*corev1.Pod) float64 {
	return packing.Solve(packing.Input{Pods: pods, NodePools: f.pools}).PricePerHour()
}

// podTemplate is the pod of a Deployment.
func podTemplate(d Deployment) corev1.PodTemplateSpec {
	zero := int64(0)
	var annotations map[string]string
	if d.ReplaceBeforeEvict {
		annotations = map[string]string{surge.AnnotationKey: "true"}
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{DeploymentLabel: d.Name}, Annotations: annotations},
		Spec: corev1.PodSpec{
			SchedulerName:                 "tailor-scheduler",
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    *resource.NewMilliQuantity(d.CPUMilli, resource.DecimalSI),
					corev1.ResourceMemory: resource.MustParse("512Mi"),
				}},
			}},
		},
	}
}

// podsOf are n pods of a Deployment, unbound, as a fresh plan takes them.
func podsOf(d Deployment, n int) []*corev1.Pod {
	tmpl := podTemplate(d)
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: fmt.Sprintf("%s-%d", d.Name, i), Labels: tmpl.Labels, Annotations: tmpl.Annotations},
			Spec:       *tmpl.Spec.DeepCopy(),
		}
	}
	return out
}

// createDeployments creates each Deployment's PodDisruptionBudget, then the Deployment.
func createDeployments(ctx context.Context, cs kubernetes.Interface, ds []Deployment) error {
	for _, d := range ds {
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{DeploymentLabel: d.Name}}
		pdb := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: d.Name},
			Spec:       budget(d, sel),
		}
		if _, err := cs.PolicyV1().PodDisruptionBudgets(pdb.Namespace).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating PodDisruptionBudget %s: %w", d.Name, err)
		}
		replicas := int32(d.Replicas)
		dep := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: d.Name},
			Spec:       appsv1.DeploymentSpec{Replicas: &replicas, Selector: sel, Template: podTemplate(d)},
		}
		if _, err := cs.AppsV1().Deployments(dep.Namespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Deployment %s: %w", d.Name, err)
		}
	}
	return nil
}

// budget is a Deployment's PodDisruptionBudget: maxUnavailable 1, or minAvailable 1 for one
// replaced before its eviction, whose single pod it then lets no one evict.
func budget(d Deployment, sel *metav1.LabelSelector) policyv1.PodDisruptionBudgetSpec {
	one := intstr.FromInt32(1)
	if d.ReplaceBeforeEvict {
		return policyv1.PodDisruptionBudgetSpec{Selector: sel, MinAvailable: &one}
	}
	return policyv1.PodDisruptionBudgetSpec{Selector: sel, MaxUnavailable: &one}
}

// scaleDeployments scales each Deployment to its Keep replicas.
func scaleDeployments(ctx context.Context, cs kubernetes.Interface, ds []Deployment) error {
	for _, d := range ds {
		// The Deployment controller writes the Deployment as its pods come up.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			scale, err := cs.AppsV1().Deployments(metav1.NamespaceDefault).GetScale(ctx, d.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			scale.Spec.Replicas = int32(d.Keep)
			_, err = cs.AppsV1().Deployments(metav1.NamespaceDefault).UpdateScale(ctx, d.Name, scale, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("scaling Deployment %s: %w", d.Name, err)
		}
	}
	return nil
}

// deleteDeployments deletes every Deployment and PodDisruptionBudget of the trials.
func deleteDeployments(ctx context.Context, cs kubernetes.Interface) error {
	opts := metav1.ListOptions{LabelSelector: DeploymentLabel}
	deps, err := cs.AppsV1().Deployments(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing Deployments: %w", err)
	}
	background := metav1.DeletePropagationBackground
	for _, d := range deps.Items {
		if err := cs.AppsV1().Deployments(d.Namespace).Delete(ctx, d.Name, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting Deployment %s: %w", d.Name, err)
		}
		if err := cs.PolicyV1().PodDisruptionBudgets(d.Namespace).Delete(ctx, d.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting PodDisruptionBudget %s: %w", d.Name, err)
		}
	}
	zero := int64(0)
	return cs.CoreV1().Pods(metav1.NamespaceDefault).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, opts)
}
