package alerts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/test/localaws"
	"github.com/tailor-autoscaler/tailor/test/localstack"
	"github.com/tailor-autoscaler/tailor/test/rejectfilter"
	"github.com/tailor-autoscaler/tailor/test/stacktest"
)

// Timings of the rules as the test renders them, short enough for a test; the chart's
// defaults are minutes.
var ruleValues = map[string]string{
	"window":                    "15s",
	"alerts.launchFailures.for": "3s",
	"alerts.insufficientCapacityStorm.offerings": "3",
	"alerts.insufficientCapacityStorm.for":       "2s",
	"alerts.nodeClaimsStuck.waitSeconds":         "15",
	"alerts.nodeClaimsStuck.for":                 "2s",
	"alerts.disruptionBlockedByBudget.for":       "3s",
	"alerts.disruptionBlockedByPDB.for":          "3s",
	"alerts.orphanedInstances.for":               "2s",
	"alerts.podsHeldBack.for":                    "2s",
}

// unavailableTTL is how long the sidecar keeps offerings that reported a capacity error.
const unavailableTTL = 15 * time.Second

// env is the running stack, its Prometheus and clients.
type env struct {
	ctx   context.Context
	stack *localstack.Stack
	prom  *prometheus
	cs    kubernetes.Interface
	kube  client.Client
}

// TestAlertsFireOnTheirFaultsAndDashboardsReadExistingSeries runs one local stack and one
// Prometheus with the chart's rules; each subtest injects a fault and checks that exactly
// its alert fires, then repairs it and waits until nothing fires. Last, every query of every
// dashboard panel must select series that exist.
func TestAlertsFireOnTheirFaultsAndDashboardsReadExistingSeries(t *testing.T) {
	start := time.Now()
	tl := findTools(t)
	rules := renderRules(t, tl, ruleValues)
	e := startStack(t)
	e.prom = startPrometheus(t, tl, e.stack, t.TempDir(), rules)
	applier, err := localstack.NewApplier(e.stack.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := applier.ApplyFiles(e.ctx, filepath.Join("testdata", "nodepools.yaml")); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		e.createPod(t, fmt.Sprintf("warm-%d", i), "alerts", "1", nil)
	}
	for i := range 2 {
		e.waitRunning(t, fmt.Sprintf("warm-%d", i))
	}
	t.Logf("stack, Prometheus and the first nodes up in %s", time.Since(start).Round(time.Second))

	t.Run("a healthy stack raises nothing", func(t *testing.T) {
		// Longer than every rule's for: an alert pending now would be firing.
		time.Sleep(5 * time.Second)
		got, err := e.prom.alerts(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string][]string{}, got); diff != "" {
			t.Errorf("alerts by state on the healthy stack (-want +got):\n%s", diff)
		}
	})

	t.Run("launches failing raise TailorLaunchFailures", func(t *testing.T) {
		defer e.took(t, time.Now())
		e.setFaults(t, `{"failActions": {"CreateFleet": {"code": "UnauthorizedOperation"}}}`)
		defer func() {
			e.setFaults(t, `{"failActions": null}`)
			e.deletePod(t, "unlaunchable")
			e.deleteUnlaunchedNodeClaims(t)
		}()
		e.createPod(t, "unlaunchable", "alerts", "3", nil)
		e.expectFiring(t, "TailorLaunchFailures")
	})
	e.waitQuiet(t)

	t.Run("capacity errors across the offerings raise TailorInsufficientCapacityStorm", func(t *testing.T) {
		defer e.took(t, time.Now())
		var pools []localaws.CapacityPool
		for _, it := range []string{"m6i.large", "m6i.xlarge", "c6i.xlarge"} {
			for _, zone := range []string{"us-east-1a", "us-east-1b"} {
				pools = append(pools, localaws.CapacityPool{InstanceType: it, Zone: zone, CapacityType: karpv1.CapacityTypeOnDemand})
			}
		}
		body, err := json.Marshal(pools)
		if err != nil {
			t.Fatal(err)
		}
		e.admin(t, http.MethodPut, "insufficient-capacity", string(body))
		defer func() {
			e.admin(t, http.MethodPut, "insufficient-capacity", "[]")
			e.deletePod(t, "no-capacity")
			// The offerings are forgotten once their time is up and a plan asks for them.
			time.Sleep(unavailableTTL)
			e.createPod(t, "capacity-back", "alerts", "3", nil)
			e.waitRunning(t, "capacity-back")
			e.deletePod(t, "capacity-back")
		}()
		e.createPod(t, "no-capacity", "alerts", "3", nil)
		e.expectFiring(t, "TailorInsufficientCapacityStorm")
	})
	e.waitQuiet(t)

	t.Run("a node that never registers raises TailorNodeClaimsStuck", func(t *testing.T) {
		defer e.took(t, time.Now())
		// The next instance launched is the pod's: no other pod asks for NodePool stuck.
		e.setFaults(t, `{"neverRegisterNext": 1}`)
		defer func() {
			e.setFaults(t, `{"neverRegisterNext": 0}`)
			e.deletePod(t, "stuck")
			e.deleteNodeClaimsWhere(t, func(nc *karpv1.NodeClaim) bool { return nc.Labels[karpv1.NodePoolLabelKey] == "stuck" })
		}()
		e.createPod(t, "stuck", "stuck", "1", nil)
		e.expectFiring(t, "TailorNodeClaimsStuck")
	})
	e.waitQuiet(t)

	t.Run("an empty node a budget of zero keeps raises TailorDisruptionBlockedByBudget", func(t *testing.T) {
		defer e.took(t, time.Now())
		e.createPod(t, "frozen-pod", "frozen", "1", nil)
		e.waitRunning(t, "frozen-pod")
		e.deletePod(t, "frozen-pod")
		defer func() {
			pool := &karpv1.NodePool{}
			if err := e.kube.Get(e.ctx, client.ObjectKey{Name: "frozen"}, pool); err != nil {
				t.Fatal(err)
			}
			pool.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1"}}
			if err := e.kube.Update(e.ctx, pool); err != nil {
				t.Fatal(err)
			}
		}()
		e.expectFiring(t, "TailorDisruptionBlockedByBudget")
	})
	e.waitQuiet(t)

	t.Run("a drain a PodDisruptionBudget holds raises TailorDisruptionBlockedByPDB", func(t *testing.T) {
		defer e.took(t, time.Now())
		labels := map[string]string{"app": "guarded"}
		guarded := e.createPod(t, "guarded", "alerts", "1", labels)
		node := e.waitRunning(t, guarded.Name).Spec.NodeName
		pdb := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "guarded"},
			Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptrTo(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}},
		}
		if _, err := e.cs.PolicyV1().PodDisruptionBudgets(metav1.NamespaceDefault).Create(e.ctx, pdb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := e.cs.PolicyV1().PodDisruptionBudgets(metav1.NamespaceDefault).Delete(e.ctx, pdb.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}()
		e.deleteNodeClaimsWhere(t, func(nc *karpv1.NodeClaim) bool { return nc.Status.NodeName == node })
		e.expectFiring(t, "TailorDisruptionBlockedByPDB")
	})
	e.waitQuiet(t)

	t.Run("a pod the scheduler rejects on every node launched for it raises TailorPodsHeldBack", func(t *testing.T) {
		defer e.took(t, time.Now())
		defer func() {
			e.deletePod(t, "rejected")
			e.deleteNodeClaimsWhere(t, func(nc *karpv1.NodeClaim) bool { return nc.Labels[karpv1.NodePoolLabelKey] == "stuck" })
		}()
		e.createPod(t, "rejected", "stuck", "1", map[string]string{rejectfilter.Label: "true"})
		e.expectFiring(t, "TailorPodsHeldBack")
	})
	e.waitQuiet(t)

	t.Run("an instance launched behind Tailor's back raises TailorOrphanedInstances", func(t *testing.T) {
		defer e.took(t, time.Now())
		e.launchOrphan(t)
		e.expectFiring(t, "TailorOrphanedInstances")
	})

	t.Run("every dashboard query reads series that exist", func(t *testing.T) {
		for _, d := range readDashboards(t) {
			for _, p := range d.Panels {
				for _, tg := range p.Targets {
					expr := strings.ReplaceAll(tg.Expr, "$__rate_interval", rateInterval)
					selectors, err := e.prom.selectors(e.ctx, expr)
					if err != nil {
						t.Errorf("dashboard %s panel %q: parsing %q: %v", d.Title, p.Title, expr, err)
						continue
					}
					if len(selectors) == 0 {
						t.Errorf("dashboard %s panel %q: %q selects no series", d.Title, p.Title, expr)
					}
					for _, sel := range selectors {
						n, err := e.prom.seriesSince(e.ctx, sel, start)
						if err != nil {
							t.Errorf("dashboard %s panel %q: series %s: %v", d.Title, p.Title, sel, err)
						} else if n == 0 {
							t.Errorf("dashboard %s panel %q: no series %s since the stack started (expr %s)", d.Title, p.Title, sel, tg.Expr)
						}
					}
				}
			}
		}
	})
	t.Logf("the test took %s", time.Since(start).Round(time.Second))
}

func ptrTo[T any](v T) *T { return &v }

// startStack starts the local stack with short disruption, orphan and capacity timings, and
// stops it when the test ends; on failure the components' last log lines go to the test log.
func startStack(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	stack, cs, kube := stacktest.Start(t, ctx, localstack.Options{
		BootDelay: time.Second, RejectLaunchedNodes: true,
		ProvisionerArgs: []string{"--disruption-interval=1s", "--orphan-instance-grace=10s", "--unavailable-offerings-ttl=" + unavailableTTL.String(), "--launch-backoff=1s"},
	})
	return &env{ctx: ctx, stack: stack, cs: cs, kube: kube}
}

// took logs how long a subtest took.
func (e *env) took(t *testing.T, start time.Time) {
	t.Logf("%s took %s", t.Name(), time.Since(start).Round(time.Second))
}

// expectFiring waits until the alert fires and checks that no other does.
func (e *env) expectFiring(t *testing.T, name string) {
	t.Helper()
	var got map[string][]string
	err := wait.PollUntilContextTimeout(e.ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		got, err = e.prom.alerts(ctx)
		return slices.Contains(got["firing"], name), err
	})
	if err != nil {
		t.Fatalf("%s did not fire: %v; alerts by state: %v", name, err, got)
	}
	if diff := cmp.Diff([]string{name}, got["firing"]); diff != "" {
		t.Errorf("firing alerts (-want +got):\n%s", diff)
	}
}

// waitQuiet waits until no alert is pending or firing.
func (e *env) waitQuiet(t *testing.T) {
	t.Helper()
	var got map[string][]string
	err := wait.PollUntilContextTimeout(e.ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		got, err = e.prom.alerts(ctx)
		return len(got) == 0, err
	})
	if err != nil {
		t.Fatalf("alerts still raised once the fault was repaired: %v; alerts by state: %v", err, got)
	}
}

// admin calls the local EC2 endpoint's admin API.
func (e *env) admin(t *testing.T, method, path, body string) {
	t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, method, e.stack.AWSEndpoint+"/_admin/"+path, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s /_admin/%s: %s", method, path, resp.Status)
	}
}

// setFaults changes the faults the local EC2 endpoint injects.
func (e *env) setFaults(t *testing.T, patch string) {
	t.Helper()
	e.admin(t, http.MethodPatch, "faults", patch)
}

// createPod creates a pod for tailor-scheduler on the NodePool's nodes.
func (e *env) createPod(t *testing.T, name, nodePool, cpu string, labels map[string]string) *corev1.Pod {
	t.Helper()
	zero := int64(0)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			SchedulerName:                 "tailor-scheduler",
			TerminationGracePeriodSeconds: &zero,
			NodeSelector:                  map[string]string{karpv1.NodePoolLabelKey: nodePool},
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("256Mi"),
				}},
			}},
		},
	}
	created, err := e.cs.CoreV1().Pods(metav1.NamespaceDefault).Create(e.ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

func (e *env) deletePod(t *testing.T, name string) {
	t.Helper()
	if err := e.cs.CoreV1().Pods(metav1.NamespaceDefault).Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (e *env) waitRunning(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	return stacktest.WaitRunning(t, e.ctx, e.cs, name, 2*time.Minute)
}

// deleteNodeClaimsWhere deletes the NodeClaims that match.
func (e *env) deleteNodeClaimsWhere(t *testing.T, match func(*karpv1.NodeClaim) bool) {
	t.Helper()
	claims := &karpv1.NodeClaimList{}
	if err := e.kube.List(e.ctx, claims); err != nil {
		t.Fatal(err)
	}
	for i := range claims.Items {
		if nc := &claims.Items[i]; match(nc) {
			if err := e.kube.Delete(e.ctx, nc); client.IgnoreNotFound(err) != nil {
				t.Fatal(err)
			}
		}
	}
}

func (e *env) deleteUnlaunchedNodeClaims(t *testing.T) {
	t.Helper()
	e.deleteNodeClaimsWhere(t, func(nc *karpv1.NodeClaim) bool { return nc.Status.ProviderID == "" })
}

func (e *env) deleteUnregisteredNodeClaims(t *testing.T) {
	t.Helper()
	e.deleteNodeClaimsWhere(t, func(nc *karpv1.NodeClaim) bool {
		for _, c := range nc.Status.Conditions {
			if c.Type == karpv1.ConditionTypeRegistered {
				return c.Status != metav1.ConditionTrue
			}
		}
		return true
	})
}

// launchOrphan launches an instance tagged as Tailor tags its own (the cluster, a NodeClaim's
// name), through the local EC2 endpoint, for a NodeClaim that does not exist.
func (e *env) launchOrphan(t *testing.T) {
	t.Helper()
	cfg := awssdk.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("tailor-local", "tailor-local", ""),
		BaseEndpoint: awssdk.String(e.stack.AWSEndpoint),
	}
	ec2Client, ssmClient := ec2.NewFromConfig(cfg), ssm.NewFromConfig(cfg)
	param, err := ssmClient.GetParameter(e.ctx, &ssm.GetParameterInput{Name: awssdk.String("/aws/service/eks/optimized-ami/" + localaws.DefaultKubernetesVersion + "/amazon-linux-2023/x86_64/standard/recommended/image_id")})
	if err != nil {
		t.Fatal(err)
	}
	subnets, err := ec2Client.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{})
	if err != nil || len(subnets.Subnets) == 0 {
		t.Fatalf("describing subnets: %v", err)
	}
	lt, err := ec2Client.CreateLaunchTemplate(e.ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: awssdk.String("behind-tailors-back"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: param.Parameter.Value},
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := ec2Client.CreateFleet(e.ctx, &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: lt.LaunchTemplate.LaunchTemplateId, Version: awssdk.String("$Latest")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: ec2types.InstanceTypeM5Large, SubnetId: subnets.Subnets[0].SubnetId}},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: awssdk.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{
			{Key: awssdk.String("kubernetes.io/cluster/" + e.stack.ClusterName()), Value: awssdk.String("owned")},
			{Key: awssdk.String("karpenter.sh/nodeclaim"), Value: awssdk.String("never-created")},
		}}},
	})
	if err != nil || len(out.Instances) != 1 {
		t.Fatalf("launching an instance behind Tailor's back: %v %+v", err, out)
	}
}
