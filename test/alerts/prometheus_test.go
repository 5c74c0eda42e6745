package alerts

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/tailor-autoscaler/tailor/test/localstack"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

// prometheusDirEnv names the directory of prometheus and promtool; hack/test.sh sets it
// after building them with prometheus_tool.
const prometheusDirEnv = "TAILOR_PROMETHEUS_DIR"

// tools are the binaries the test runs.
type tools struct {
	prometheus, helm, kubeVersion string
}

// findTools locates Prometheus (TAILOR_PROMETHEUS_DIR; outside CI, built by prometheus_tool
// when unset) and Helm. In CI a missing Prometheus fails the test: hack/test.sh must build it.
func findTools(t *testing.T) tools {
	t.Helper()
	dir := os.Getenv(prometheusDirEnv)
	script := "source hack/lib.sh && helm_tool && module_version k8s.io/kubernetes"
	if dir == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set: CI runs this test through hack/test.sh, which builds Prometheus with prometheus_tool", prometheusDirEnv)
		}
		script += " && prometheus_tool"
	}
	cmd := exec.CommandContext(t.Context(), "bash", "-c", script)
	cmd.Dir = testenv.Root()
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("finding helm and prometheus with hack/lib.sh: %v", err)
	}
	lines := strings.Fields(string(out))
	if dir == "" && len(lines) == 3 {
		dir = lines[2]
	}
	if len(lines) < 2 {
		t.Fatalf("hack/lib.sh printed %q, want helm's path and the Kubernetes version", out)
	}
	for _, bin := range []string{"prometheus", "promtool"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			t.Fatalf("%s missing from %s=%s: %v", bin, prometheusDirEnv, dir, err)
		}
	}
	return tools{prometheus: filepath.Join(dir, "prometheus"), helm: lines[0], kubeVersion: lines[1]}
}

// renderRules renders the chart's PrometheusRule with the values given and returns its spec
// as a Prometheus rule file.
func renderRules(t *testing.T, tl tools, values map[string]string) []byte {
	t.Helper()
	args := []string{"template", "tailor", filepath.Join(testenv.Root(), "manifests", "charts", "tailor"),
		"--kube-version", tl.kubeVersion, "--show-only", "templates/prometheusrule.yaml", "--set", "prometheusRule.enabled=true"}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "--set-string", "prometheusRule."+k+"="+values[k])
	}
	out, err := exec.CommandContext(t.Context(), tl.helm, args...).Output()
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	var rule struct {
		Kind string         `json:"kind"`
		Spec map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal(out, &rule); err != nil || rule.Kind != "PrometheusRule" {
		t.Fatalf("the chart rendered no PrometheusRule (%v):\n%s", err, out)
	}
	file, err := yaml.Marshal(rule.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return file
}

// prometheus is a running Prometheus and a client of its HTTP API.
type prometheus struct {
	url string
}

// startPrometheus runs Prometheus in dir, scraping the stack's sidecar, scheduler and API
// server every second and evaluating rules every second; it stops with the test.
func startPrometheus(t *testing.T, tl tools, stack *localstack.Stack, dir string, rules []byte) *prometheus {
	t.Helper()
	// The API server authenticates Prometheus by the admin's certificate; the scheduler, which
	// reads no client CA on the local stack, by a ServiceAccount's token, as in a cluster.
	cfg := stack.Config
	token := metricsReaderToken(t, stack)
	for name, data := range map[string][]byte{"rules.yaml": rules, "client.crt": cfg.CertData, "client.key": cfg.KeyData, "ca.crt": cfg.CAData, "token": []byte(token)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tls := map[string]any{"cert_file": filepath.Join(dir, "client.crt"), "key_file": filepath.Join(dir, "client.key")}
	target := func(raw string) (string, string) {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return u.Scheme, u.Host
	}
	provScheme, provHost := target(stack.ProvisionerMetricsURL)
	schedScheme, schedHost := target(stack.SchedulerMetricsURL)
	apiScheme, apiHost := target(cfg.Host)
	config := map[string]any{
		"global":     map[string]any{"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
		"rule_files": []string{filepath.Join(dir, "rules.yaml")},
		"scrape_configs": []any{
			map[string]any{"job_name": "tailor-provisioner", "scheme": provScheme, "static_configs": []any{map[string]any{"targets": []string{provHost}}}},
			map[string]any{"job_name": "tailor-scheduler", "scheme": schedScheme, "static_configs": []any{map[string]any{"targets": []string{schedHost}}},
				"authorization": map[string]any{"credentials_file": filepath.Join(dir, "token")},
				"tls_config":    map[string]any{"insecure_skip_verify": true}},
			map[string]any{"job_name": "kube-apiserver", "scheme": apiScheme, "static_configs": []any{map[string]any{"targets": []string{apiHost}}},
				"tls_config": merge(tls, map[string]any{"ca_file": filepath.Join(dir, "ca.crt")})},
		},
	}
	raw, err := yaml.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tl.prometheus, "--config.file", filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path", filepath.Join(dir, "data"), "--web.listen-address", addr, "--log.level", "warn")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting prometheus: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logFile.Close()
		if t.Failed() {
			if log, err := os.ReadFile(logFile.Name()); err == nil {
				t.Logf("--- prometheus.log ---\n%s", log)
			}
		}
	})
	p := &prometheus{url: "http://" + addr}
	err = wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var targets struct {
			ActiveTargets []struct {
				ScrapePool string `json:"scrapePool"`
				Health     string `json:"health"`
				LastError  string `json:"lastError"`
			} `json:"activeTargets"`
		}
		if err := p.get(ctx, "/api/v1/targets", nil, &targets); err != nil {
			return false, nil
		}
		up := 0
		for _, tg := range targets.ActiveTargets {
			if tg.Health == "up" {
				up++
			}
		}
		return up == 3, nil
	})
	if err != nil {
		var targets any
		_ = p.get(t.Context(), "/api/v1/targets", nil, &targets)
		t.Fatalf("prometheus at %s did not scrape its three targets: %v; targets: %v", p.url, err, targets)
	}
	return p
}

// metricsReaderToken creates a ServiceAccount allowed to GET /metrics and returns a token of it.
func metricsReaderToken(t *testing.T, stack *localstack.Stack) string {
	t.Helper()
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(stack.Config)
	if err != nil {
		t.Fatal(err)
	}
	const ns, name = "tailor", "prometheus"
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

func merge(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// get calls the HTTP API and decodes the data of a successful answer into out.
func (p *prometheus) get(ctx context.Context, path string, query url.Values, out any) error {
	u := p.url + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("decoding the answer to %s: %w", path, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("%s: %s", path, body.Error)
	}
	return json.Unmarshal(body.Data, out)
}

// alert is an alert as /api/v1/alerts lists it.
type alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

// alerts returns the names of the alerts in each state (pending, firing).
func (p *prometheus) alerts(ctx context.Context) (map[string][]string, error) {
	var data struct {
		Alerts []alert `json:"alerts"`
	}
	if err := p.get(ctx, "/api/v1/alerts", nil, &data); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, a := range data.Alerts {
		if !slices.Contains(out[a.State], a.Labels["alertname"]) {
			out[a.State] = append(out[a.State], a.Labels["alertname"])
		}
	}
	for _, names := range out {
		sort.Strings(names)
	}
	return out, nil
}

// selectors parses a PromQL expression with Prometheus' own parser (/api/v1/parse_query) and
// returns each of its series selectors, as {label="value", ...} with the metric name as
// __name__.
func (p *prometheus) selectors(ctx context.Context, expr string) ([]string, error) {
	var ast any
	if err := p.get(ctx, "/api/v1/parse_query", url.Values{"query": {expr}}, &ast); err != nil {
		return nil, err
	}
	var out []string
	var walk func(any)
	walk = func(node any) {
		switch n := node.(type) {
		case map[string]any:
			if n["type"] == "vectorSelector" || n["type"] == "matrixSelector" {
				var matchers []string
				for _, m := range n["matchers"].([]any) {
					m := m.(map[string]any)
					value, err := json.Marshal(m["value"])
					if err != nil {
						continue
					}
					matchers = append(matchers, fmt.Sprintf("%s%s%s", m["name"], m["type"], value))
				}
				out = append(out, "{"+strings.Join(matchers, ",")+"}")
				return
			}
			for _, v := range n {
				walk(v)
			}
		case []any:
			for _, v := range n {
				walk(v)
			}
		}
	}
	walk(ast)
	return out, nil
}

// seriesSince reports how many series match the selector between start and now.
func (p *prometheus) seriesSince(ctx context.Context, selector string, start time.Time) (int, error) {
	var series []map[string]string
	q := url.Values{"match[]": {selector}, "start": {fmt.Sprint(start.Unix())}, "end": {fmt.Sprint(time.Now().Unix())}}
	if err := p.get(ctx, "/api/v1/series", q, &series); err != nil {
		return 0, err
	}
	return len(series), nil
}
