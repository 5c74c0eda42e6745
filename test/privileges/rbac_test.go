package privileges

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"
	rbacregistry "k8s.io/kubernetes/pkg/registry/rbac/validation"
	rbacauthorizer "k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/deletioncost"
	"github.com/tailor-autoscaler/tailor/test/localstack"
	"github.com/tailor-autoscaler/tailor/test/stacktest"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

// chartUser is the ServiceAccount both containers of the chart's pod run as, in the
// namespace manifests/rendered/tailor.yaml is rendered for.
const chartUser = "system:serviceaccount:tailor:tailor"

// notExercised are grants of Tailor's own roles that the test's round does not use, and why
// they are kept. A grant missing here and unused fails the test, as does one listed here
// that the round did use.
var notExercised = map[string]string{
	"get leases.coordination.k8s.io tailor-scheduler":    "leader election: only with more than one replica (the stack runs one, without it)",
	"update leases.coordination.k8s.io tailor-scheduler": "leader election: only with more than one replica (the stack runs one, without it)",
	"get nodepools.karpenter.sh":                         "reads are served by the informer cache (list, watch); get is the uncached read",
	"get nodeclaims.karpenter.sh":                        "reads are served by the informer cache (list, watch); get is the uncached read",
	"get ec2nodeclasses.karpenter.k8s.aws":               "reads are served by the informer cache (list, watch); get is the uncached read",
	"delete nodeclaims.karpenter.sh":                     "disruption, expiration, interruption and re-planning delete NodeClaims; a deleted NodePool's go by garbage collection",
	"watch nodeoverlays.karpenter.sh":                    "NodeOverlay feature gate only (off in this round: the overlays are listed once, to say they are ignored)",
	"patch nodeoverlays/status.karpenter.sh":             "NodeOverlay feature gate only: the NodeOverlay status controller",
	"get podgroups.scheduling.x-k8s.io":                  "gangs only: pods that name a Coscheduling PodGroup",
	"create pods":                                        replaceBeforeEvict,
	"get replicasets.apps":                               replaceBeforeEvict,
	"get deployments.apps":                               replaceBeforeEvict,
	"list nodepools.karpenter.sh":                        watchListed,
	"list nodeclaims.karpenter.sh":                       watchListed,
	"list ec2nodeclasses.karpenter.k8s.aws":              watchListed,
	"list daemonsets.apps":                               watchListed,
	"list podgroups.scheduling.x-k8s.io":                 watchListed,
	"list elasticquotas.scheduling.x-k8s.io":             "quotas only: --elastic-quotas and CapacityScheduling in the profile",
	"get elasticquotas.scheduling.x-k8s.io":              "quotas only: CapacityScheduling in the profile",
	"watch elasticquotas.scheduling.x-k8s.io":            "quotas only: CapacityScheduling in the profile",
}

// replaceBeforeEvict is why the round does not use the grants of replace before evict: its
// pods do not opt in (test/e2e's disruption scenario and provisioner/disruption's tests do).
const replaceBeforeEvict = "replace before evict only: pods annotated tailor.sh/replace-before-evict whose node is disrupted"

// watchListed is why an informer's list goes unused: client-go 1.35 streams an informer's
// initial list over its watch (WatchListClient, on by default), and lists only when the API
// server does not serve that.
const watchListed = "informers stream their initial list over the watch (client-go's WatchListClient); list is their fallback on API servers that do not serve it"

// TestRBACGrantsWhatTheComponentsUse runs a scheduling round on the local stack with the API
// server's audit log on (a Deployment scheduled onto nodes Tailor launches, kept until a
// disruption pass has ranked them as deletion costs on its pods, then its NodePool deleted,
// which drains and deletes them), collects every request of
// tailor-provisioner and tailor-scheduler, and checks them against manifests/rbac (as the
// stack applies it) and the chart's rendered RBAC: every request must be allowed, and every
// grant of Tailor's own roles must be used or listed in notExercised. Grants the chart
// writes out from Kubernetes' system:kube-scheduler and system:volume-scheduler are upstream
// kube-scheduler's needs; test/chart checks them against those roles.
func TestRBACGrantsWhatTheComponentsUse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	stack, cs, kube := stacktest.Start(t, ctx, localstack.Options{Audit: true, BootDelay: time.Second})
	pods := stacktest.SchedulingRound(t, ctx, stack, cs, "privileges", 2, 3*time.Minute)
	waitForDeletionCosts(t, ctx, cs, pods)
	deleteNodePool(t, ctx, kube, "general")
	bootstrap := bootstrapRBAC(t, ctx, cs)
	stack.Down()

	requests, err := readAudit(stack.AuditLog)
	if err != nil {
		t.Fatal(err)
	}
	byUser := map[string][]request{}
	for _, r := range requests {
		byUser[r.User] = append(byUser[r.User], r)
	}
	for u, component := range localstack.TailorUsers {
		if len(byUser[u]) == 0 {
			t.Fatalf("the audit log holds no request of %s (%s)", component, u)
		}
		t.Logf("%s: %d requests, %d distinct", component, len(byUser[u]), len(distinct(byUser[u])))
	}
	upstream := upstreamSchedulerRules(t, bootstrap)

	manifests := readRBAC(t, filepath.Join(testenv.Root(), "manifests", "rbac", "provisioner.yaml"),
		filepath.Join(testenv.Root(), "manifests", "rbac", "scheduler.yaml"))
	t.Run("manifests", func(t *testing.T) {
		resolver := manifests.with(bootstrap).resolver()
		var all []request
		for u := range localstack.TailorUsers {
			checkAllowed(t, resolver, u, byUser[u])
			all = append(all, byUser[u]...)
		}
		checkUsed(t, manifests, all, upstream)
	})
	chart := readRBAC(t, filepath.Join(testenv.Root(), "manifests", "rendered", "tailor.yaml"))
	t.Run("chart", func(t *testing.T) {
		resolver := chart.with(bootstrap).resolver()
		var all []request
		for u := range localstack.TailorUsers {
			all = append(all, byUser[u]...)
		}
		checkAllowed(t, resolver, chartUser, all)
		checkUsed(t, chart, all, upstream)
	})
}

// request is what the audit log says a client asked for.
type request struct {
	User, Verb, Group, Resource, Subresource, Namespace, Name string
}

func (r request) String() string {
	where := r.Namespace
	if r.Name != "" {
		where += "/" + r.Name
	}
	return fmt.Sprintf("%s %s %s", r.Verb, resourceName(r.Group, r.Resource, r.Subresource), where)
}

func resourceName(group, resource, subresource string) string {
	if subresource != "" {
		resource += "/" + subresource
	}
	if group == "" {
		return resource
	}
	return resource + "." + group
}

func (r request) attributes(userName string) authorizer.Attributes {
	return authorizer.AttributesRecord{
		User: &user.DefaultInfo{Name: userName, Groups: []string{user.AllAuthenticated}},
		Verb: r.Verb, Namespace: r.Namespace, APIGroup: r.Group, Resource: r.Resource,
		Subresource: r.Subresource, Name: r.Name, ResourceRequest: true,
	}
}

// readAudit returns the resource requests of the audit log. Requests for non-resource URLs
// (discovery, /version) are left out: every authenticated user may make them.
func readAudit(path string) ([]request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	defer f.Close()
	var requests []request
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		var e auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("decoding an audit event: %w", err)
		}
		if e.ObjectRef == nil {
			continue
		}
		requests = append(requests, request{
			User: e.User.Username, Verb: e.Verb, Group: e.ObjectRef.APIGroup, Resource: e.ObjectRef.Resource,
			Subresource: e.ObjectRef.Subresource, Namespace: e.ObjectRef.Namespace, Name: e.ObjectRef.Name,
		})
	}
	return requests, sc.Err()
}

func distinct(requests []request) []request {
	seen := map[request]bool{}
	var out []request
	for _, r := range requests {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// rbacObjects are Roles, ClusterRoles and their bindings.
type rbacObjects struct {
	roles               []*rbacv1.Role
	roleBindings        []*rbacv1.RoleBinding
	clusterRoles        []*rbacv1.ClusterRole
	clusterRoleBindings []*rbacv1.ClusterRoleBinding
}

func (o rbacObjects) with(other rbacObjects) rbacObjects {
	return rbacObjects{
		roles:               append(slices.Clone(o.roles), other.roles...),
		roleBindings:        append(slices.Clone(o.roleBindings), other.roleBindings...),
		clusterRoles:        append(slices.Clone(o.clusterRoles), other.clusterRoles...),
		clusterRoleBindings: append(slices.Clone(o.clusterRoleBindings), other.clusterRoleBindings...),
	}
}

func (o rbacObjects) resolver() rbacregistry.AuthorizationRuleResolver {
	r, _ := rbacregistry.NewTestRuleResolver(o.roles, o.roleBindings, o.clusterRoles, o.clusterRoleBindings)
	return r
}

// readRBAC decodes the RBAC objects of manifest files.
func readRBAC(t *testing.T, paths ...string) rbacObjects {
	t.Helper()
	var objs rbacObjects
	for _, path := range paths {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		decoded, err := localstack.Decode(raw)
		if err != nil {
			t.Fatalf("decoding %s: %v", path, err)
		}
		for _, u := range decoded {
			var target any
			switch u.GetKind() {
			case "Role":
				r := &rbacv1.Role{}
				objs.roles, target = append(objs.roles, r), r
			case "RoleBinding":
				r := &rbacv1.RoleBinding{}
				objs.roleBindings, target = append(objs.roleBindings, r), r
			case "ClusterRole":
				r := &rbacv1.ClusterRole{}
				objs.clusterRoles, target = append(objs.clusterRoles, r), r
			case "ClusterRoleBinding":
				r := &rbacv1.ClusterRoleBinding{}
				objs.clusterRoleBindings, target = append(objs.clusterRoleBindings, r), r
			default:
				continue
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, target); err != nil {
				t.Fatalf("decoding %s %s: %v", u.GetKind(), u.GetName(), err)
			}
		}
	}
	return objs
}

// bootstrapRBAC returns Kubernetes' own RBAC objects, which every cluster has: the roles the
// manifests bind by name (system:kube-scheduler) and the grants of every authenticated user.
func bootstrapRBAC(t *testing.T, ctx context.Context, cs kubernetes.Interface) rbacObjects {
	t.Helper()
	opts := metav1.ListOptions{LabelSelector: "kubernetes.io/bootstrapping=rbac-defaults"}
	var objs rbacObjects
	crs, err := cs.RbacV1().ClusterRoles().List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range crs.Items {
		objs.clusterRoles = append(objs.clusterRoles, &crs.Items[i])
	}
	crbs, err := cs.RbacV1().ClusterRoleBindings().List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range crbs.Items {
		objs.clusterRoleBindings = append(objs.clusterRoleBindings, &crbs.Items[i])
	}
	roles, err := cs.RbacV1().Roles(metav1.NamespaceAll).List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range roles.Items {
		objs.roles = append(objs.roles, &roles.Items[i])
	}
	rbs, err := cs.RbacV1().RoleBindings(metav1.NamespaceAll).List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rbs.Items {
		objs.roleBindings = append(objs.roleBindings, &rbs.Items[i])
	}
	return objs
}

// upstreamSchedulerRules are the rules of kube-scheduler's bootstrap ClusterRoles.
func upstreamSchedulerRules(t *testing.T, bootstrap rbacObjects) []rbacv1.PolicyRule {
	t.Helper()
	var rules []rbacv1.PolicyRule
	for _, cr := range bootstrap.clusterRoles {
		if cr.Name == "system:kube-scheduler" || cr.Name == "system:volume-scheduler" {
			rules = append(rules, cr.Rules...)
		}
	}
	if len(rules) == 0 {
		t.Fatal("the API server has no system:kube-scheduler ClusterRole")
	}
	return rules
}

// checkAllowed fails for every distinct request the user's grants do not allow.
func checkAllowed(t *testing.T, resolver rbacregistry.AuthorizationRuleResolver, userName string, requests []request) {
	t.Helper()
	for _, r := range distinct(requests) {
		attrs := r.attributes(userName)
		rules, err := resolver.RulesFor(context.Background(), attrs.GetUser(), r.Namespace)
		if err != nil {
			t.Fatalf("resolving the rules of %s: %v", userName, err)
		}
		if !rbacauthorizer.RulesAllow(attrs, rules...) {
			t.Errorf("%s is not allowed to %s, which %s did", userName, r, r.User)
		}
	}
}

// grant is one verb on one resource of a rule, with the rule's resource names.
type grant struct {
	rule rbacv1.PolicyRule
}

func (g grant) String() string {
	s := g.rule.Verbs[0] + " " + resourceName(g.rule.APIGroups[0], g.rule.Resources[0], "")
	if len(g.rule.ResourceNames) > 0 {
		s += " " + strings.Join(g.rule.ResourceNames, ",")
	}
	return s
}

// grantsOf splits the rules of Tailor's own roles (not Kubernetes' bootstrap ones) into
// single grants.
func grantsOf(objs rbacObjects) []grant {
	var rules []rbacv1.PolicyRule
	for _, r := range objs.roles {
		rules = append(rules, r.Rules...)
	}
	for _, r := range objs.clusterRoles {
		rules = append(rules, r.Rules...)
	}
	var grants []grant
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					grants = append(grants, grant{rule: rbacv1.PolicyRule{
						APIGroups: []string{g}, Resources: []string{res}, Verbs: []string{v}, ResourceNames: r.ResourceNames,
					}})
				}
			}
		}
	}
	return grants
}

// checkUsed fails for every grant of Tailor's roles that no request used, unless
// notExercised says why or upstream kube-scheduler's roles hold it; and for every
// notExercised entry that was used after all.
func checkUsed(t *testing.T, objs rbacObjects, requests []request, upstream []rbacv1.PolicyRule) {
	t.Helper()
	used := map[string]bool{}
	for _, g := range grantsOf(objs) {
		name := g.String()
		if covered, _ := rbacvalidation.Covers(upstream, []rbacv1.PolicyRule{g.rule}); covered {
			continue
		}
		for _, r := range distinct(requests) {
			if rbacauthorizer.RuleAllows(r.attributes(""), &g.rule) {
				used[name] = true
				break
			}
		}
		_, listed := notExercised[name]
		switch {
		case used[name] && listed:
			t.Errorf("%q is listed as not exercised, but was used", name)
		case !used[name] && !listed:
			t.Errorf("nothing used %q: remove the grant, or list it in notExercised with the reason", name)
		}
	}
}

// deleteNodePool deletes a NodePool and waits for its NodeClaims to go: Tailor drains and
// deletes their nodes and terminates their instances.
// waitForDeletionCosts waits for a disruption pass to rank the round's nodes and Tailor to
// keep that rank as a deletion cost on a pod of the round's ReplicaSet (patch pods).
func waitForDeletionCosts(t *testing.T, ctx context.Context, cs kubernetes.Interface, pods []corev1.Pod) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, time.Second, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, p := range pods {
			got, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if _, ok := got.Annotations[deletioncost.ManagedAnnotationKey]; ok {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("waiting for a deletion cost on a pod of the round: %v", err)
	}
}

func deleteNodePool(t *testing.T, ctx context.Context, kube client.Client, name string) {
	t.Helper()
	pool := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := kube.Delete(ctx, pool); err != nil {
		t.Fatalf("deleting NodePool %s: %v", name, err)
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var claims karpv1.NodeClaimList
		if err := kube.List(ctx, &claims); err != nil {
			return false, err
		}
		return len(claims.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("NodeClaims of the deleted NodePool %s still there: %v", name, err)
	}
}
