// Package localstack runs Tailor's whole system on one machine: etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler on loopback with RBAC, kwok for simulated node
// and pod status, the local AWS endpoint, the provisioner sidecar and tailor-scheduler. make up, make demo
// and the end-to-end tests all start it through this package.
package localstack

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// Component names, in start order.
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	// KubeScheduler is the cluster's default scheduler, which places pods that do not ask for
	// tailor-scheduler, DaemonSet pods among them, as on any real cluster.
	KubeScheduler = "kube-scheduler"
	Kwok          = "kwok"
	LocalAWS      = "local-aws"
	Provisioner   = "tailor-provisioner"
	Scheduler     = "tailor-scheduler"
)

var startOrder = []string{Etcd, APIServer, ControllerManager, KubeScheduler, Kwok, LocalAWS, Provisioner, Scheduler}

// Defaults.
const (
	DefaultClusterName = "tailor-local"
	region             = "us-east-1"
	// systemNodeName is a static node standing for the node group Tailor itself runs on. Its
	// taint keeps workloads off it, as on EKS; kube-scheduler also needs at least one node to
	// run PostFilter plugins at all.
	systemNodeName = "tailor-system-0"
)

// Options configure a stack.
type Options struct {
	// Root is the repository root: binaries are in Root/_output/bin, manifests in Root/manifests.
	Root string
	// Dir holds the stack's state: certificates, kubeconfigs, logs, pid files, the socket.
	Dir string
	// ClusterName names the simulated EKS cluster (tailor-local by default).
	ClusterName string
	// LaunchDelay is how long an instance stays pending; BootDelay how long a running
	// instance takes to register its node.
	LaunchDelay, BootDelay time.Duration
	// Detach lets the processes outlive the caller (make up).
	Detach bool
	// Progress receives a line per step; nil discards.
	Progress io.Writer
}

// Stack is a running local system.
type Stack struct {
	opts  Options
	procs map[string]*process
	ports map[string]int
	// Kubeconfig is the admin kubeconfig.
	Kubeconfig string
	// Config is the admin client configuration.
	Config *rest.Config
	// AWSEndpoint is the URL of the local AWS endpoint.
	AWSEndpoint string
	// SocketPath is the provisioner's gRPC socket.
	SocketPath string
	// ProvisionerMetricsURL serves the provisioner's Prometheus metrics.
	ProvisionerMetricsURL string
}

func (o *Options) defaults() error {
	if o.Root == "" || o.Dir == "" {
		return errors.New("localstack: Root and Dir must be set")
	}
	if o.ClusterName == "" {
		o.ClusterName = DefaultClusterName
	}
	if o.BootDelay == 0 {
		o.BootDelay = time.Second
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return nil
}

func (o *Options) bin(name string) string { return filepath.Join(o.Root, "_output", "bin", name) }

// Up starts every component and returns once tailor-scheduler is serving. On error it
// stops what it started.
func Up(ctx context.Context, opts Options) (_ *Stack, err error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "tailor-local-aws", "tailor-provisioner", "tailor-scheduler"} {
		if _, err := os.Stat(opts.bin(name)); err != nil {
			return nil, fmt.Errorf("missing %s: run `make binaries` (hack/build.sh) first: %w", opts.bin(name), err)
		}
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	s := &Stack{opts: opts, procs: map[string]*process{}, ports: map[string]int{}, SocketPath: filepath.Join(opts.Dir, "run", "provisioner.sock")}
	defer func() {
		if err != nil {
			s.Down()
		}
	}()
	for _, p := range []string{"etcd-client", "etcd-peer", "apiserver", "kube-scheduler", "scheduler", "provisioner-metrics", "provisioner-health", "kwok"} {
		if s.ports[p], err = freePort(); err != nil {
			return nil, err
		}
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", s.ports["apiserver"])
	s.progress("generating certificates and kubeconfigs in %s", opts.Dir)
	if err := writePKI(opts.Dir, server); err != nil {
		return nil, err
	}
	s.Kubeconfig = kubeconfigPath(opts.Dir, "admin")
	if s.Config, err = clientcmd.BuildConfigFromFlags("", s.Kubeconfig); err != nil {
		return nil, err
	}
	for _, name := range startOrder {
		if err := s.Start(ctx, name); err != nil {
			return nil, err
		}
	}
	return s, s.writeState()
}

// Start starts one component (again) and waits until it is ready.
func (s *Stack) Start(ctx context.Context, name string) error {
	start := time.Now()
	var err error
	switch name {
	case Etcd:
		err = s.startEtcd(ctx)
	case APIServer:
		err = s.startAPIServer(ctx)
	case ControllerManager:
		err = s.startControllerManager(ctx)
	case KubeScheduler:
		err = s.startKubeScheduler(ctx)
	case Kwok:
		err = s.startKwok(ctx)
	case LocalAWS:
		err = s.startLocalAWS(ctx)
	case Provisioner:
		err = s.startProvisioner(ctx)
	case Scheduler:
		err = s.startScheduler(ctx)
	default:
		err = fmt.Errorf("unknown component %q", name)
	}
	if err != nil {
		return fmt.Errorf("starting %s: %w\n--- last lines of %s ---\n%s", name, err, filepath.Join(s.opts.Dir, "logs", name+".log"), tail(s.opts.Dir, name, 20))
	}
	s.progress("%-24s ready in %.1fs", name, time.Since(start).Seconds())
	return nil
}

// Stop stops one component.
func (s *Stack) Stop(name string) {
	if p, ok := s.procs[name]; ok {
		p.stop(s.opts.Dir, 10*time.Second)
		delete(s.procs, name)
	}
}

// Down stops every component, newest first.
func (s *Stack) Down() {
	for i := len(startOrder) - 1; i >= 0; i-- {
		s.Stop(startOrder[i])
	}
}

// DownDetached stops a stack started by another process, from its state directory.
func DownDetached(dir string) error {
	return stopRecorded(dir, startOrder, 10*time.Second)
}

func (s *Stack) progress(format string, args ...any) {
	fmt.Fprintf(s.opts.Progress, "  "+format+"\n", args...)
}

func (s *Stack) run(name, binary string, args []string, env ...string) error {
	p, err := startProcess(s.opts.Dir, name, binary, args, env, s.opts.Detach)
	if err != nil {
		return err
	}
	s.procs[name] = p
	return nil
}

// waitFor polls ready until it succeeds, the process exits or the timeout passes.
func (s *Stack) waitFor(ctx context.Context, name string, timeout time.Duration, ready func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if exited, err := s.procs[name].exited(); exited {
			return false, fmt.Errorf("exited: %v", err)
		}
		last = ready(ctx)
		return last == nil, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w (last check: %v)", err, last)
	}
	return err
}

func (s *Stack) startEtcd(ctx context.Context) error {
	client := fmt.Sprintf("http://127.0.0.1:%d", s.ports["etcd-client"])
	peer := fmt.Sprintf("http://127.0.0.1:%d", s.ports["etcd-peer"])
	err := s.run(Etcd, s.opts.bin("etcd"), []string{
		"--data-dir", filepath.Join(s.opts.Dir, "etcd"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "default=" + peer,
		"--unsafe-no-fsync", "--log-level", "warn",
	})
	if err != nil {
		return err
	}
	return s.waitFor(ctx, Etcd, 30*time.Second, httpOK(client+"/health", nil))
}

func (s *Stack) startAPIServer(ctx context.Context) error {
	pki := func(f string) string { return filepath.Join(s.opts.Dir, "pki", f) }
	err := s.run(APIServer, s.opts.bin("kube-apiserver"), []string{
		"--etcd-servers", fmt.Sprintf("http://127.0.0.1:%d", s.ports["etcd-client"]),
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(s.ports["apiserver"]),
		"--tls-cert-file", pki("apiserver.crt"), "--tls-private-key-file", pki("apiserver.key"),
		"--client-ca-file", pki("ca.crt"),
		"--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", pki("sa.pub"), "--service-account-signing-key-file", pki("sa.key"),
		"--service-cluster-ip-range", "10.0.0.0/24",
		"--allow-privileged",
		"--profiling=false",
		// A loopback address cannot back the kubernetes Service's endpoints.
		"--endpoint-reconciler-type", "none",
	})
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		return err
	}
	if err := s.waitFor(ctx, APIServer, 90*time.Second, func(ctx context.Context) error {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}); err != nil {
		return err
	}
	applier, err := NewApplier(s.Config)
	if err != nil {
		return err
	}
	m := func(f string) string { return filepath.Join(s.opts.Root, "manifests", f) }
	crds, err := filepath.Glob(m("crds/*.yaml"))
	if err != nil {
		return err
	}
	files := append(crds, m("rbac/namespace.yaml"), m("rbac/scheduler.yaml"), m("rbac/provisioner.yaml"))
	return applier.ApplyFiles(ctx, files...)
}

func (s *Stack) startControllerManager(ctx context.Context) error {
	kc := kubeconfigPath(s.opts.Dir, "kube-controller-manager")
	err := s.run(ControllerManager, s.opts.bin("kube-controller-manager"), []string{
		"--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--service-account-private-key-file", filepath.Join(s.opts.Dir, "pki", "sa.key"),
		"--root-ca-file", filepath.Join(s.opts.Dir, "pki", "ca.crt"),
		"--use-service-account-credentials",
		"--leader-elect=false",
		"--secure-port=0",
		"--controllers", "*,-csrsigning,-csrapproving,-csrcleaner",
		"--node-monitor-period", "2s",
	})
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		return err
	}
	// The service account controller creates "default" in every namespace: a sign of life.
	return s.waitFor(ctx, ControllerManager, 60*time.Second, func(ctx context.Context) error {
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

// startKubeScheduler runs the upstream kube-scheduler with its default profile
// (default-scheduler) under the control plane's own identity.
func (s *Stack) startKubeScheduler(ctx context.Context) error {
	kc := kubeconfigPath(s.opts.Dir, "kube-scheduler")
	cfgPath := filepath.Join(s.opts.Dir, "kube-scheduler-config.yaml")
	cfg, err := yaml.Marshal(map[string]any{
		"apiVersion":       "kubescheduler.config.k8s.io/v1",
		"kind":             "KubeSchedulerConfiguration",
		"clientConnection": map[string]any{"kubeconfig": kc},
		"leaderElection":   map[string]any{"leaderElect": false},
	})
	if err != nil {
		return err
	}
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		return err
	}
	port := s.ports["kube-scheduler"]
	err = s.run(KubeScheduler, s.opts.bin("kube-scheduler"), []string{
		"--config", cfgPath,
		"--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--authentication-skip-lookup",
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
	})
	if err != nil {
		return err
	}
	return s.waitFor(ctx, KubeScheduler, 60*time.Second, httpOK(fmt.Sprintf("https://127.0.0.1:%d/healthz", port), insecureLoopback()))
}

func (s *Stack) startKwok(ctx context.Context) error {
	err := s.run(Kwok, s.opts.bin("kwok"), []string{
		"--kubeconfig", kubeconfigPath(s.opts.Dir, "kwok"),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector", "kwok.x-k8s.io/node=fake",
		"--config", filepath.Join(s.opts.Root, "_output", "etc", "kwok-stages.yaml"),
		"--node-lease-duration-seconds", "40",
		"--server-address", fmt.Sprintf("127.0.0.1:%d", s.ports["kwok"]),
		"--cidr", "10.244.0.0/16",
	})
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		return err
	}
	if err := createSystemNode(ctx, cs); err != nil {
		return err
	}
	return s.waitFor(ctx, Kwok, 60*time.Second, func(ctx context.Context) error {
		node, err := cs.CoreV1().Nodes().Get(ctx, systemNodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return errors.New("system node is not Ready yet")
	})
}

// createSystemNode registers the static, tainted node Tailor itself would run on.
func createSystemNode(ctx context.Context, cs kubernetes.Interface) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        systemNodeName,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels: map[string]string{
				corev1.LabelHostname: systemNodeName, corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux",
				corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelTopologyZone: region + "a", "node-role.tailor.sh/system": "true",
			},
		},
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: "CriticalAddonsOnly", Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating system node: %w", err)
	}
	return nil
}

func (s *Stack) startLocalAWS(ctx context.Context) error {
	addrFile := filepath.Join(s.opts.Dir, "run", "local-aws.address")
	_ = os.Remove(addrFile)
	if err := os.MkdirAll(filepath.Dir(addrFile), 0o755); err != nil {
		return err
	}
	err := s.run(LocalAWS, s.opts.bin("tailor-local-aws"), []string{
		"--listen", "127.0.0.1:0", "--address-file", addrFile,
		"--cluster-name", s.opts.ClusterName,
		"--kubeconfig", kubeconfigPath(s.opts.Dir, "local-aws"),
		"--launch-delay", s.opts.LaunchDelay.String(), "--boot-delay", s.opts.BootDelay.String(),
	})
	if err != nil {
		return err
	}
	return s.waitFor(ctx, LocalAWS, 30*time.Second, func(context.Context) error {
		raw, err := os.ReadFile(addrFile)
		if err != nil {
			return err
		}
		addr := strings.TrimSpace(string(raw))
		if !strings.HasPrefix(addr, "http") {
			addr = "http://" + addr
		}
		if err := httpOK(addr+"/_admin/healthz", nil)(ctx); err != nil {
			return err
		}
		s.AWSEndpoint = addr
		return nil
	})
}

// AWSEnv is the environment that points AWS SDKs and CLIs at the local endpoint.
func (s *Stack) AWSEnv() []string {
	env := []string{
		"AWS_REGION=" + region, "AWS_ACCESS_KEY_ID=tailor-local", "AWS_SECRET_ACCESS_KEY=tailor-local",
		"AWS_EC2_METADATA_DISABLED=true", "AWS_ENDPOINT_URL=" + s.AWSEndpoint,
	}
	for _, svc := range []string{"EC2", "SSM", "PRICING", "IAM", "SQS", "EKS"} {
		env = append(env, "AWS_ENDPOINT_URL_"+svc+"="+s.AWSEndpoint)
	}
	return env
}

func (s *Stack) startProvisioner(ctx context.Context) error {
	health := fmt.Sprintf("127.0.0.1:%d", s.ports["provisioner-health"])
	s.ProvisionerMetricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", s.ports["provisioner-metrics"])
	err := s.run(Provisioner, s.opts.bin("tailor-provisioner"), []string{
		"--kubeconfig", kubeconfigPath(s.opts.Dir, "tailor-provisioner"),
		"--socket", s.SocketPath,
		"--cluster-name", s.opts.ClusterName,
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", s.ports["provisioner-metrics"]),
		"--health-probe-bind-address", health,
		"-v", "1",
	}, s.AWSEnv()...)
	if err != nil {
		return err
	}
	return s.waitFor(ctx, Provisioner, 60*time.Second, func(ctx context.Context) error {
		if _, err := os.Stat(s.SocketPath); err != nil {
			return err
		}
		return httpOK("http://"+health+"/readyz", nil)(ctx)
	})
}

func (s *Stack) startScheduler(ctx context.Context) error {
	kc := kubeconfigPath(s.opts.Dir, "tailor-scheduler")
	cfgPath := filepath.Join(s.opts.Dir, "scheduler-config.yaml")
	if err := s.writeSchedulerConfig(cfgPath, kc); err != nil {
		return err
	}
	port := s.ports["scheduler"]
	err := s.run(Scheduler, s.opts.bin("tailor-scheduler"), []string{
		"--config", cfgPath,
		"--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		// The local API server runs no front proxy, so there is no request-header CA to read.
		"--authentication-skip-lookup",
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
		"-v", "2",
	})
	if err != nil {
		return err
	}
	return s.waitFor(ctx, Scheduler, 60*time.Second, httpOK(fmt.Sprintf("https://127.0.0.1:%d/healthz", port), insecureLoopback()))
}

// insecureLoopback checks the health of servers on loopback that serve self-signed certificates.
func insecureLoopback() *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed loopback health check
}

// writeSchedulerConfig renders manifests/scheduler/config.yaml for the local stack: the
// scheduler's kubeconfig, the stack's socket, and no leader election.
func (s *Stack) writeSchedulerConfig(path, kubeconfig string) error {
	raw, err := os.ReadFile(filepath.Join(s.opts.Root, "manifests", "scheduler", "config.yaml"))
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("parsing scheduler config: %w", err)
	}
	cfg["clientConnection"] = map[string]any{"kubeconfig": kubeconfig}
	cfg["leaderElection"] = map[string]any{"leaderElect": false}
	for _, p := range cfg["profiles"].([]any) {
		for _, pc := range p.(map[string]any)["pluginConfig"].([]any) {
			entry := pc.(map[string]any)
			if entry["name"] == "NodeProvisioning" {
				entry["args"].(map[string]any)["provisionerSocket"] = s.SocketPath
			}
		}
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

func httpOK(url string, client *http.Client) func(context.Context) error {
	if client == nil {
		client = http.DefaultClient
	}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %s", url, resp.Status)
		}
		return nil
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// state is what `tailor-dev down` and `env` need to find a detached stack.
type state struct {
	Kubeconfig  string   `json:"kubeconfig"`
	AWSEndpoint string   `json:"awsEndpoint"`
	Env         []string `json:"env"`
}

func (s *Stack) writeState() error {
	b, err := json.MarshalIndent(state{Kubeconfig: s.Kubeconfig, AWSEndpoint: s.AWSEndpoint, Env: s.Exports()}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.opts.Dir, "state.json"), b, 0o644)
}

// Exports are the variables a user exports to reach the stack with kubectl and AWS tools.
func (s *Stack) Exports() []string {
	return append([]string{"KUBECONFIG=" + s.Kubeconfig}, s.AWSEnv()...)
}

// ReadExports returns the exports of a stack started in dir.
func ReadExports(dir string) ([]string, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return nil, fmt.Errorf("no local stack in %s (run make up): %w", dir, err)
	}
	var st state
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, err
	}
	return st.Env, nil
}
