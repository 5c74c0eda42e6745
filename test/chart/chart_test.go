// Package chart applies the Helm chart's rendered manifests (manifests/rendered/tailor.yaml,
// the chart with default values) to a real API server and checks what the server accepted:
// every object, least-privilege RBAC that still grants what kube-scheduler needs, locked-down
// containers, a highly available Deployment, the scheduler configuration and the flags.
package chart

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	schedvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/tailor-autoscaler/tailor/plugin/apis/config"
	"github.com/tailor-autoscaler/tailor/plugin/apis/config/scheme"
	argsvalidation "github.com/tailor-autoscaler/tailor/plugin/apis/config/validation"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

const (
	namespace  = "tailor"
	fieldOwner = "tailor-chart-test"
)

var (
	// k8s is a client of the test API server.
	k8s client.Client
	// objects are the rendered manifests in file order, as applied.
	objects []*unstructured.Unstructured
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(klog.Background())
	scheme.AddToScheduler()
	os.Exit(testenv.Run(m, func(cfg *rest.Config) error {
		var err error
		if objects, err = readManifests(filepath.Join(testenv.Root(), "manifests", "rendered", "tailor.yaml")); err != nil {
			return err
		}
		s := runtime.NewScheme()
		if err := clientgoscheme.AddToScheme(s); err != nil {
			return err
		}
		if err := apiextensionsv1.AddToScheme(s); err != nil {
			return err
		}
		if k8s, err = client.New(cfg, client.Options{Scheme: s}); err != nil {
			return fmt.Errorf("creating client: %w", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return apply(ctx, k8s, objects)
	}))
}

// objectID names an object the way `kubectl get` does.
type objectID struct {
	APIVersion, Kind, Namespace, Name string
}

func idOf(o *unstructured.Unstructured) objectID {
	return objectID{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
}

func (id objectID) String() string {
	if id.Namespace == "" {
		return fmt.Sprintf("%s %s", id.Kind, id.Name)
	}
	return fmt.Sprintf("%s %s/%s", id.Kind, id.Namespace, id.Name)
}

// TestEveryObjectIsAccepted checks that the rendered manifests hold exactly the expected
// objects and that the API server stored each of them.
func TestEveryObjectIsAccepted(t *testing.T) {
	want := []objectID{
		{"v1", "Namespace", "", "tailor"},
		{"apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "ec2nodeclasses.karpenter.k8s.aws"},
		{"apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "nodeclaims.karpenter.sh"},
		{"apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "nodeoverlays.karpenter.sh"},
		{"apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "nodepools.karpenter.sh"},
		{"apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "elasticquotas.scheduling.x-k8s.io"},
		{"apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "podgroups.scheduling.x-k8s.io"},
		{"policy/v1", "PodDisruptionBudget", namespace, "tailor"},
		{"v1", "ServiceAccount", namespace, "tailor"},
		{"v1", "ConfigMap", namespace, "tailor-scheduler"},
		{"rbac.authorization.k8s.io/v1", "ClusterRole", "", "tailor-scheduler"},
		{"rbac.authorization.k8s.io/v1", "ClusterRole", "", "tailor-provisioner"},
		{"rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", "tailor-scheduler"},
		{"rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", "tailor-provisioner"},
		{"rbac.authorization.k8s.io/v1", "Role", namespace, "tailor-leader-election"},
		{"rbac.authorization.k8s.io/v1", "RoleBinding", namespace, "tailor-leader-election"},
		{"rbac.authorization.k8s.io/v1", "RoleBinding", "kube-system", "tailor-scheduler:extension-apiserver-authentication-reader"},
		{"v1", "Service", namespace, "tailor-metrics"},
		{"apps/v1", "Deployment", namespace, "tailor"},
	}
	var got []objectID
	for _, o := range objects {
		got = append(got, idOf(o))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("objects in manifests/rendered/tailor.yaml (-want +got):\n%s", diff)
	}
	for _, o := range objects {
		id := idOf(o)
		t.Run(id.String(), func(t *testing.T) {
			stored := &unstructured.Unstructured{}
			stored.SetGroupVersionKind(o.GroupVersionKind())
			if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(o), stored); err != nil {
				t.Fatalf("getting %s: %v", id, err)
			}
			if stored.GetUID() == "" {
				t.Errorf("%s has no UID: the server did not store it", id)
			}
		})
	}
}

// TestRBACHasNoWildcards checks that no rule of the chart grants "*".
func TestRBACHasNoWildcards(t *testing.T) {
	for _, o := range objects {
		if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
			continue
		}
		t.Run(idOf(o).String(), func(t *testing.T) {
			for i, r := range rulesOf(t, o) {
				for name, values := range map[string][]string{
					"apiGroups": r.APIGroups, "resources": r.Resources, "verbs": r.Verbs,
					"resourceNames": r.ResourceNames, "nonResourceURLs": r.NonResourceURLs,
				} {
					for _, v := range values {
						if strings.Contains(v, "*") {
							t.Errorf("rule %d: %s holds %q", i, name, v)
						}
					}
				}
			}
		})
	}
}

// TestSchedulerHasWhatKubeSchedulerHas checks the chart's grants against the API server's
// own system:kube-scheduler and system:volume-scheduler ClusterRoles: everything they grant
// except leader election, which the chart scopes to its own Lease in its namespace.
func TestSchedulerHasWhatKubeSchedulerHas(t *testing.T) {
	owner := append(rulesOfObject(t, "ClusterRole", "", "tailor-scheduler"),
		rulesOfObject(t, "Role", namespace, "tailor-leader-election")...)
	for _, system := range []string{"system:kube-scheduler", "system:volume-scheduler"} {
		t.Run(system, func(t *testing.T) {
			role := &rbacv1.ClusterRole{}
			if err := k8s.Get(t.Context(), client.ObjectKey{Name: system}, role); err != nil {
				t.Fatalf("getting the bootstrap ClusterRole: %v", err)
			}
			servant := slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
				return slices.Equal(r.APIGroups, []string{"coordination.k8s.io"})
			})
			if covered, missing := rbacvalidation.Covers(owner, servant); !covered {
				t.Errorf("the chart does not grant what %s grants:\n%s", system, rulesYAML(t, missing))
			}
		})
	}
	leases := []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"tailor-scheduler"}, Verbs: []string{"get", "update"}},
	}
	if covered, missing := rbacvalidation.Covers(rulesOfObject(t, "Role", namespace, "tailor-leader-election"), leases); !covered {
		t.Errorf("the leader election Role lacks:\n%s", rulesYAML(t, missing))
	}
}

// TestProvisionerHasWhatManifestsGrant checks that the chart's provisioner ClusterRole
// grants exactly what manifests/rbac/provisioner.yaml grants, no more and no less.
func TestProvisionerHasWhatManifestsGrant(t *testing.T) {
	manifests, err := readManifests(filepath.Join(testenv.Root(), "manifests", "rbac", "provisioner.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want []rbacv1.PolicyRule
	for _, o := range manifests {
		if o.GetKind() == "ClusterRole" {
			want = rulesOf(t, o)
		}
	}
	got := rulesOfObject(t, "ClusterRole", "", "tailor-provisioner")
	if covered, missing := rbacvalidation.Covers(got, want); !covered {
		t.Errorf("the chart lacks rules of manifests/rbac/provisioner.yaml:\n%s", rulesYAML(t, missing))
	}
	if covered, extra := rbacvalidation.Covers(want, got); !covered {
		t.Errorf("the chart grants more than manifests/rbac/provisioner.yaml:\n%s", rulesYAML(t, extra))
	}
}

// TestContainersAreLockedDown checks every container's security context and resources.
func TestContainersAreLockedDown(t *testing.T) {
	want := &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		ReadOnlyRootFilesystem:   ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	containers := deployment(t).Spec.Template.Spec.Containers
	if diff := cmp.Diff([]string{"scheduler", "provisioner"}, containerNames(containers)); diff != "" {
		t.Errorf("containers (-want +got):\n%s", diff)
	}
	for _, c := range containers {
		t.Run(c.Name, func(t *testing.T) {
			if diff := cmp.Diff(want, c.SecurityContext); diff != "" {
				t.Errorf("securityContext (-want +got):\n%s", diff)
			}
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if _, ok := c.Resources.Requests[r]; !ok {
					t.Errorf("no %s request", r)
				}
			}
			if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
				t.Error("no memory limit")
			}
		})
	}
}

// TestProbesUseHealthEndpoints checks that each container is probed on the endpoints its
// binary serves, through a port it declares.
func TestProbesUseHealthEndpoints(t *testing.T) {
	type probe struct {
		Path, Port string
		Scheme     corev1.URIScheme
	}
	tests := []struct {
		container           string
		liveness, readiness probe
	}{
		{
			container: "scheduler",
			liveness:  probe{Path: "/healthz", Port: "https", Scheme: corev1.URISchemeHTTPS},
			readiness: probe{Path: "/readyz", Port: "https", Scheme: corev1.URISchemeHTTPS},
		},
		{
			container: "provisioner",
			liveness:  probe{Path: "/healthz", Port: "http-health", Scheme: corev1.URISchemeHTTP},
			readiness: probe{Path: "/readyz", Port: "http-health", Scheme: corev1.URISchemeHTTP},
		},
	}
	containers := deployment(t).Spec.Template.Spec.Containers
	for _, tt := range tests {
		t.Run(tt.container, func(t *testing.T) {
			i := slices.IndexFunc(containers, func(c corev1.Container) bool { return c.Name == tt.container })
			if i < 0 {
				t.Fatalf("no container %s", tt.container)
			}
			c := containers[i]
			probeOf := func(p *corev1.Probe) probe {
				if p == nil || p.HTTPGet == nil {
					return probe{}
				}
				return probe{Path: p.HTTPGet.Path, Port: p.HTTPGet.Port.String(), Scheme: p.HTTPGet.Scheme}
			}
			if diff := cmp.Diff(tt.liveness, probeOf(c.LivenessProbe)); diff != "" {
				t.Errorf("liveness probe (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.readiness, probeOf(c.ReadinessProbe)); diff != "" {
				t.Errorf("readiness probe (-want +got):\n%s", diff)
			}
			if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == tt.liveness.Port }) {
				t.Errorf("the container declares no port %q", tt.liveness.Port)
			}
		})
	}
}

// TestDeploymentIsHighlyAvailable checks replicas, spreading, the PodDisruptionBudget,
// priority, and that the pods stay off nodes Tailor manages.
func TestDeploymentIsHighlyAvailable(t *testing.T) {
	d := deployment(t)
	spec := d.Spec.Template.Spec
	if got := ptr.Deref(d.Spec.Replicas, 0); got != 2 {
		t.Errorf("replicas = %d, want 2", got)
	}
	if spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priorityClassName = %q, want system-cluster-critical", spec.PriorityClassName)
	}
	wantAntiAffinity := &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: d.Spec.Selector,
			TopologyKey:   corev1.LabelHostname,
		}},
	}
	wantNodeAffinity := &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "karpenter.sh/nodepool", Operator: corev1.NodeSelectorOpDoesNotExist}},
			}},
		},
	}
	if spec.Affinity == nil {
		t.Fatal("no affinity")
	}
	if diff := cmp.Diff(wantAntiAffinity, spec.Affinity.PodAntiAffinity); diff != "" {
		t.Errorf("podAntiAffinity (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantNodeAffinity, spec.Affinity.NodeAffinity); diff != "" {
		t.Errorf("nodeAffinity (-want +got):\n%s", diff)
	}

	pdb := &policyv1.PodDisruptionBudget{}
	if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: "tailor"}, pdb); err != nil {
		t.Fatalf("getting the PodDisruptionBudget: %v", err)
	}
	if diff := cmp.Diff(d.Spec.Selector, pdb.Spec.Selector); diff != "" {
		t.Errorf("PodDisruptionBudget selector (-want Deployment's +got):\n%s", diff)
	}
	if diff := cmp.Diff(ptr.To(intstr.FromInt32(1)), pdb.Spec.MaxUnavailable); diff != "" {
		t.Errorf("PodDisruptionBudget maxUnavailable (-want +got):\n%s", diff)
	}

	sa := &corev1.ServiceAccount{}
	if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: spec.ServiceAccountName}, sa); err != nil {
		t.Errorf("getting the pods' ServiceAccount: %v", err)
	}
}

// TestContainersShareTheSocket checks that both containers mount the emptyDir that holds
// the provisioner's socket, where the scheduler configuration and the provisioner's flag
// put it.
func TestContainersShareTheSocket(t *testing.T) {
	spec := deployment(t).Spec.Template.Spec
	i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.EmptyDir != nil })
	if i < 0 {
		t.Fatal("no emptyDir volume")
	}
	socketVolume := spec.Volumes[i].Name
	for _, c := range spec.Containers {
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == socketVolume && m.MountPath == "/var/run/tailor"
		}) {
			t.Errorf("container %s does not mount %s at /var/run/tailor", c.Name, socketVolume)
		}
	}
	provisioner := spec.Containers[slices.IndexFunc(spec.Containers, func(c corev1.Container) bool { return c.Name == "provisioner" })]
	if !slices.Contains(provisioner.Args, "--socket=/var/run/tailor/provisioner.sock") {
		t.Errorf("provisioner args %q lack --socket=/var/run/tailor/provisioner.sock", provisioner.Args)
	}
}

// TestSchedulerConfiguration loads the chart's KubeSchedulerConfiguration with kube-scheduler's
// own loader and compares it with manifests/scheduler/config.yaml.
func TestSchedulerConfiguration(t *testing.T) {
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: "tailor-scheduler"}, cm); err != nil {
		t.Fatalf("getting the scheduler ConfigMap: %v", err)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(cm.Data["config.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := options.LoadConfigFromFile(klog.Background(), path)
	if err != nil {
		t.Fatalf("loading the chart's scheduler configuration: %v", err)
	}
	want, err := options.LoadConfigFromFile(klog.Background(), filepath.Join(testenv.Root(), "manifests", "scheduler", "config.yaml"))
	if err != nil {
		t.Fatalf("loading manifests/scheduler/config.yaml: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("KubeSchedulerConfiguration (-manifests/scheduler/config.yaml +chart):\n%s", diff)
	}
	if err := schedvalidation.ValidateKubeSchedulerConfiguration(got); err != nil {
		t.Errorf("invalid KubeSchedulerConfiguration: %v", err)
	}
	for i, p := range got.Profiles {
		for j, pc := range p.PluginConfig {
			if args, ok := pc.Args.(*config.NodeProvisioningArgs); ok {
				path := field.NewPath("profiles").Index(i).Child("pluginConfig").Index(j).Child("args")
				if errs := argsvalidation.ValidateNodeProvisioningArgs(path, args); len(errs) > 0 {
					t.Errorf("invalid NodeProvisioning args: %v", errs.ToAggregate())
				}
			}
		}
	}
	if !got.LeaderElection.LeaderElect {
		t.Error("leader election is off")
	}
	vol := slices.IndexFunc(deployment(t).Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
		return v.ConfigMap != nil && v.ConfigMap.Name == cm.Name
	})
	if vol < 0 {
		t.Errorf("no volume of the Deployment holds ConfigMap %s", cm.Name)
	}
}

// TestProvisionerFollowsTheSchedulersLease checks that the provisioner follows the Lease the
// scheduler's configuration names, with the same timing, and that both containers name
// their replica after the pod.
func TestProvisionerFollowsTheSchedulersLease(t *testing.T) {
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: "tailor-scheduler"}, cm); err != nil {
		t.Fatalf("getting the scheduler ConfigMap: %v", err)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(cm.Data["config.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := options.LoadConfigFromFile(klog.Background(), path)
	if err != nil {
		t.Fatalf("loading the chart's scheduler configuration: %v", err)
	}
	le := cfg.LeaderElection
	containers := deployment(t).Spec.Template.Spec.Containers
	provisioner := containers[slices.IndexFunc(containers, func(c corev1.Container) bool { return c.Name == "provisioner" })]
	want := []string{
		"--leader-elect=true",
		"--leader-election-namespace=" + le.ResourceNamespace,
		"--scheduler-lease-name=" + le.ResourceName,
		"--leader-election-lease-duration=" + le.LeaseDuration.Duration.String(),
		"--leader-election-renew-deadline=" + le.RenewDeadline.Duration.String(),
		"--leader-election-retry-period=" + le.RetryPeriod.Duration.String(),
	}
	got := slices.DeleteFunc(slices.Clone(provisioner.Args), func(a string) bool {
		return !strings.HasPrefix(a, "--leader-elect") && !strings.HasPrefix(a, "--scheduler-lease")
	})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("provisioner leader election flags (-want +got):\n%s", diff)
	}
	replica := []corev1.EnvVar{{Name: "TAILOR_REPLICA", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}}
	for _, c := range containers {
		got := slices.DeleteFunc(slices.Clone(c.Env), func(e corev1.EnvVar) bool { return e.Name != "TAILOR_REPLICA" })
		if diff := cmp.Diff(replica, got); diff != "" {
			t.Errorf("container %s: TAILOR_REPLICA (-want +got):\n%s", c.Name, diff)
		}
	}
}

// TestArgsAreFlagsOfTheBinaries checks that every flag the chart passes is one the binary
// defines, as hack/build.sh built it into _output/bin.
func TestArgsAreFlagsOfTheBinaries(t *testing.T) {
	binaries := map[string]string{"scheduler": "tailor-scheduler", "provisioner": "tailor-provisioner"}
	flagName := regexp.MustCompile(`^--?([^=]+)`)
	for _, c := range deployment(t).Spec.Template.Spec.Containers {
		t.Run(c.Name, func(t *testing.T) {
			defined := flagsOf(t, filepath.Join(testenv.BinDir(), binaries[c.Name]))
			for _, arg := range c.Args {
				m := flagName.FindStringSubmatch(arg)
				if m == nil {
					t.Errorf("argument %q is not a flag", arg)
					continue
				}
				if !defined[m[1]] {
					t.Errorf("%s has no flag --%s (if the flag is new, run `make binaries`)", binaries[c.Name], m[1])
				}
			}
		})
	}
}

// flagsOf runs a binary's --help and returns the names of the flags it lists.
func flagsOf(t *testing.T, binary string) map[string]bool {
	t.Helper()
	if _, err := os.Stat(binary); err != nil {
		t.Fatalf("run `make binaries` first: %v", err)
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(t.Context(), binary, "--help")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil && out.Len() == 0 {
		t.Fatalf("%s --help: %v", binary, err)
	}
	// Go's flag package lists "  -name type", cobra "  -v, --v Level" and "      --name type".
	listed := regexp.MustCompile(`(?m)^\s+(?:-\w, )?--?([a-zA-Z0-9][\w-]*)`)
	defined := map[string]bool{}
	for _, m := range listed.FindAllStringSubmatch(out.String(), -1) {
		defined[m[1]] = true
	}
	return defined
}

// deployment returns the Deployment as the API server stored it.
func deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: "tailor"}, d); err != nil {
		t.Fatalf("getting the Deployment: %v", err)
	}
	return d
}

func containerNames(cs []corev1.Container) []string {
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	return names
}

// rulesOfObject returns the rules of a stored Role or ClusterRole of the chart.
func rulesOfObject(t *testing.T, kind, ns, name string) []rbacv1.PolicyRule {
	t.Helper()
	i := slices.IndexFunc(objects, func(o *unstructured.Unstructured) bool {
		return o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name
	})
	if i < 0 {
		t.Fatalf("the chart has no %s %s", kind, name)
	}
	return rulesOf(t, objects[i])
}

// rulesOf returns the rules of a Role or ClusterRole as the API server stored them, or as
// written when it is not one of the applied objects.
func rulesOf(t *testing.T, o *unstructured.Unstructured) []rbacv1.PolicyRule {
	t.Helper()
	var obj client.Object = &rbacv1.ClusterRole{}
	if o.GetKind() == "Role" {
		obj = &rbacv1.Role{}
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, obj); err != nil {
		t.Fatalf("decoding %s: %v", idOf(o), err)
	}
	if slices.Contains(objects, o) {
		if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(o), obj); err != nil {
			t.Fatalf("getting %s: %v", idOf(o), err)
		}
	}
	switch r := obj.(type) {
	case *rbacv1.Role:
		return r.Rules
	case *rbacv1.ClusterRole:
		return r.Rules
	}
	return nil
}

func rulesYAML(t *testing.T, rules []rbacv1.PolicyRule) string {
	t.Helper()
	b, err := yaml.Marshal(rules)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// readManifests decodes every object of a multi-document YAML file.
func readManifests(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading manifests: %w", err)
	}
	defer f.Close()
	var objs []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("reading %s document %d: %w", path, len(objs)+1, err)
		}
		if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
			continue // a document of comments only
		}
		obj, _, err := unstructured.UnstructuredJSONScheme.Decode(js, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("decoding %s document %d: %w", path, len(objs)+1, err)
		}
		objs = append(objs, obj.(*unstructured.Unstructured))
	}
}

// apply applies the CRDs with server-side apply and waits until they are established, then
// applies every other object in file order.
func apply(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	isCRD := func(o *unstructured.Unstructured) bool { return o.GetKind() == "CustomResourceDefinition" }
	for _, o := range objs {
		if isCRD(o) {
			if err := applyOne(ctx, c, o); err != nil {
				return err
			}
		}
	}
	for _, o := range objs {
		if !isCRD(o) {
			continue
		}
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: o.GetName()}, crd); err != nil {
				return false, err
			}
			return slices.ContainsFunc(crd.Status.Conditions, func(cond apiextensionsv1.CustomResourceDefinitionCondition) bool {
				return cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue
			}), nil
		})
		if err != nil {
			return fmt.Errorf("waiting for %s to be established: %w", idOf(o), err)
		}
	}
	for _, o := range objs {
		if !isCRD(o) {
			if err := applyOne(ctx, c, o); err != nil {
				return err
			}
		}
	}
	return nil
}

func applyOne(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s: %w", idOf(o), err)
	}
	return nil
}
