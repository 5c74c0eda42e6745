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
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
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

	"github.com/tailor-autoscaler/tailor/provisioner/leader"
	"github.com/tailor-autoscaler/tailor/test/rejectfilter"
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

// Leader election of a stack with replicas: the scheduler's Lease, and timings short enough
// for a test to watch a hand-over.
const (
	leaseNamespace = "tailor"
	leaseName      = "tailor-scheduler"
	leaseDuration  = 4 * time.Second
	renewDeadline  = 3 * time.Second
	retryPeriod    = 500 * time.Millisecond
)

// Replica names the replica of a tailor-scheduler or tailor-provisioner component: "a" for
// the first pair (tailor-scheduler, tailor-provisioner), "b" for the second
// (tailor-scheduler-b, tailor-provisioner-b), and so on.
func Replica(component string) string {
	for _, base := range []string{Provisioner, Scheduler} {
		if r, ok := strings.CutPrefix(component, base+"-"); ok {
			return r
		}
	}
	return "a"
}

// ProvisionerOf and SchedulerOf name the components of a replica.
func ProvisionerOf(replica string) string { return replicaComponent(Provisioner, replica) }

// SchedulerOf names the scheduler of a replica.
func SchedulerOf(replica string) string { return replicaComponent(Scheduler, replica) }

func replicaComponent(base, replica string) string {
	if replica == "a" {
		return base
	}
	return base + "-" + replica
}

// Defaults.
const (
	DefaultClusterName = "tailor-local"
	region             = "us-east-1"
	// systemNodeName is a static node standing for the node group Tailor itself runs on. Its
	// taint keeps workloads off it, as on EKS; kube-scheduler also needs at least one node to
	// run PostFilter plugins at all.
	systemNodeName = "tailor-system-0"
	// serviceCIDR is the API server's service range, which EKS DescribeCluster reports.
	serviceCIDR = "10.0.0.0/24"
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
	// Replicas is how many pairs of tailor-scheduler and tailor-provisioner run, each pair a
	// pod of the chart's Deployment. With more than one, they elect a leader as in
	// production: the schedulers through their Lease, each sidecar following its scheduler.
	Replicas int
	// ProvisionerArgs are flags every tailor-provisioner gets after the stack's own, e.g. a
	// scenario's --disruption-interval.
	ProvisionerArgs []string
	// CapacityScheduling enables scheduler-plugins' CapacityScheduling in the scheduler's
	// profile, in place of DefaultPreemption, and --elastic-quotas in the sidecar, as the
	// chart's scheduler.capacityScheduling.enabled does.
	CapacityScheduling bool
	// ServerVersion is the Kubernetes release (1.37.2) of the control plane: kube-apiserver,
	// kube-controller-manager and the cluster's default kube-scheduler, from
	// Root/_output/bin/kubernetes-<version> (hack/build-server.sh builds them); the local
	// endpoint then serves that minor (EKS, AMIs). Empty runs the release go.mod pins, from
	// Root/_output/bin, as tailor-scheduler is built from.
	ServerVersion string
	// RejectLaunchedNodes runs tailor-scheduler-rejecting in place of tailor-scheduler: the
	// same scheduler with the RejectLaunchedNodes filter (package rejectfilter) in its
	// profile, which rejects pods labelled rejectfilter.Label on every node Tailor launched.
	RejectLaunchedNodes bool
	// Scale tunes the stack for thousands of nodes and tens of thousands of pods (make
	// bench-scale); see scaleArgs.
	Scale bool
	// Audit makes the API server log every request of Tailor's own users (TailorUsers) to
	// AuditLog, at Metadata level when the request is received: who asked, the verb, the
	// resource, when.
	Audit bool
	// InterruptionQueue, when set, is an SQS queue the local endpoint creates at start and
	// every tailor-provisioner reads interruption events from (--interruption-queue).
	InterruptionQueue string
	// SpotReclaimDelay is how long after an injected spot interruption warning the local
	// endpoint terminates the instance; zero keeps EC2's two minutes.
	SpotReclaimDelay time.Duration
	// Verbosity is the -v of tailor-provisioner and tailor-scheduler, 1 and 2 when zero.
	Verbosity int
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
	// ProvisionerMetricsURL serves the (first) provisioner's Prometheus metrics;
	// ProvisionerMetricsURLs those of every replica.
	ProvisionerMetricsURL  string
	ProvisionerMetricsURLs []string
	// SchedulerMetricsURL serves the (first) tailor-scheduler's Prometheus metrics over HTTPS
	// with a self-signed certificate, to clients the API server authorizes (the admin).
	SchedulerMetricsURL string
	// AuditLog is the API server's audit log when Options.Audit is set.
	AuditLog string
	// order is the start order of this stack's components.
	order []string
}

// LeaseNamespace and LeaseName locate the schedulers' Lease of a stack with replicas.
func (s *Stack) LeaseNamespace() string { return leaseNamespace }

// LeaseName is the name of the schedulers' Lease.
func (s *Stack) LeaseName() string { return leaseName }

// ClusterName is the name of the simulated EKS cluster, which tags its subnets and
// security groups for discovery (karpenter.sh/discovery).
func (s *Stack) ClusterName() string { return s.opts.ClusterName }

// Dir is the directory of the stack's state and logs.
func (s *Stack) Dir() string { return s.opts.Dir }

// ha reports whether the stack runs replicas that elect a leader.
func (s *Stack) ha() bool { return s.opts.Replicas > 1 }

// SocketOf is the gRPC socket shared by a replica's scheduler and provisioner.
func (s *Stack) SocketOf(replica string) string {
	if replica == "a" {
		return s.SocketPath
	}
	return filepath.Join(s.opts.Dir, "run", "provisioner-"+replica+".sock")
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
	if o.Replicas < 1 {
		o.Replicas = 1
	}
	if o.Replicas > 26 {
		return errors.New("localstack: at most 26 replicas")
	}
	return nil
}

func (o *Options) bin(name string) string { return filepath.Join(o.Root, "_output", "bin", name) }

// controlPlane are the binaries of the control plane's release (Options.ServerVersion).
var controlPlane = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// serverBin is the binary of a control-plane component: of Options.ServerVersion's release
// when set, otherwise bin's.
func (o *Options) serverBin(name string) string {
	if o.ServerVersion == "" {
		return o.bin(name)
	}
	return filepath.Join(o.Root, "_output", "bin", "kubernetes-"+o.ServerVersion, name)
}

// serverMinor is the minor of Options.ServerVersion (1.37), empty when that is.
func (o *Options) serverMinor() string {
	parts := strings.SplitN(o.ServerVersion, ".", 3)
	if len(parts) < 2 {
		return ""
	}
	return parts[0] + "." + parts[1]
}

// Up starts every component and returns once tailor-scheduler is serving. On error it
// stops what it started.
func Up(ctx context.Context, opts Options) (_ *Stack, err error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	scheduler := "tailor-scheduler"
	if opts.RejectLaunchedNodes {
		scheduler = "tailor-scheduler-rejecting"
	}
	for _, name := range []string{"etcd", "kwok", "tailor-local-aws", "tailor-provisioner", scheduler} {
		if _, err := os.Stat(opts.bin(name)); err != nil {
			return nil, fmt.Errorf("missing %s: run `make binaries` (hack/build.sh) first: %w", opts.bin(name), err)
		}
	}
	for _, name := range controlPlane {
		if _, err := os.Stat(opts.serverBin(name)); err != nil {
			build := "`make binaries` (hack/build.sh)"
			if opts.ServerVersion != "" {
				build = "hack/build-server.sh " + opts.ServerVersion
			}
			return nil, fmt.Errorf("missing %s: run %s first: %w", opts.serverBin(name), build, err)
		}
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	s := &Stack{opts: opts, procs: map[string]*process{}, ports: map[string]int{}, SocketPath: filepath.Join(opts.Dir, "run", "provisioner.sock")}
	if opts.Audit {
		s.AuditLog = filepath.Join(opts.Dir, "logs", "audit.log")
	}
	defer func() {
		if err != nil {
			s.Down()
		}
	}()
	s.order = append([]string{}, startOrder...)
	for i := 1; i < opts.Replicas; i++ {
		r := string(rune('a' + i))
		s.order = append(s.order, ProvisionerOf(r), SchedulerOf(r))
	}
	ports := []string{"etcd-client", "etcd-peer", "apiserver", "kube-scheduler", "kwok"}
	for i := 0; i < opts.Replicas; i++ {
		r := string(rune('a' + i))
		ports = append(ports, "scheduler-"+r, "provisioner-metrics-"+r, "provisioner-health-"+r)
	}
	picked := map[int]bool{}
	for _, p := range ports {
		if s.ports[p], err = freePort(picked); err != nil {
			return nil, err
		}
		picked[s.ports[p]] = true
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
	for _, name := range s.order {
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
	case ProvisionerOf(Replica(name)):
		err = s.startProvisioner(ctx, Replica(name))
	case SchedulerOf(Replica(name)):
		err = s.startScheduler(ctx, Replica(name))
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

// Kill kills one component at once, as a crash or a lost machine would: it gets no chance to
// release what it holds.
func (s *Stack) Kill(name string) {
	if p, ok := s.procs[name]; ok {
		p.stop(s.opts.Dir, 0)
		delete(s.procs, name)
	}
}

// Running reports whether a component the stack started is still running; when it ended on
// its own (a crash), err says how. A component stopped or killed through the stack is not
// running and has no error.
func (s *Stack) Running(name string) (running bool, err error) {
	p, ok := s.procs[name]
	if !ok {
		return false, nil
	}
	exited, err := p.exited()
	if exited && err == nil {
		err = errors.New("exited with status 0")
	}
	return !exited, err
}

// PID is the process id of a running component, 0 when it does not run.
func (s *Stack) PID(name string) int {
	if p, ok := s.procs[name]; ok {
		return p.cmd.Process.Pid
	}
	return 0
}

// Components are the names of the stack's components, in start order.
func (s *Stack) Components() []string { return slices.Clone(s.order) }

// Down stops every component, newest first.
func (s *Stack) Down() {
	order := s.order
	if order == nil {
		order = startOrder
	}
	for i := len(order) - 1; i >= 0; i-- {
		s.Stop(order[i])
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
	args := []string{
		"--etcd-servers", fmt.Sprintf("http://127.0.0.1:%d", s.ports["etcd-client"]),
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(s.ports["apiserver"]),
		"--tls-cert-file", pki("apiserver.crt"), "--tls-private-key-file", pki("apiserver.key"),
		"--client-ca-file", pki("ca.crt"),
		"--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", pki("sa.pub"), "--service-account-signing-key-file", pki("sa.key"),
		"--service-cluster-ip-range", serviceCIDR,
		"--allow-privileged",
		"--profiling=false",
		// A loopback address cannot back the kubernetes Service's endpoints.
		"--endpoint-reconciler-type", "none",
	}
	if s.AuditLog != "" {
		policy, err := writeAuditPolicy(s.opts.Dir)
		if err != nil {
			return err
		}
		args = append(args, "--audit-policy-file", policy, "--audit-log-path", s.AuditLog, "--audit-log-format", "json")
	}
	if err := s.run(APIServer, s.opts.serverBin("kube-apiserver"), append(args, s.scaleArgs(APIServer)...)); err != nil {
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
	files := slices.Concat(crds, []string{m("rbac/namespace.yaml"), m("rbac/scheduler.yaml"), m("rbac/provisioner.yaml")})
	return applier.ApplyFiles(ctx, files...)
}

func (s *Stack) startControllerManager(ctx context.Context) error {
	kc := kubeconfigPath(s.opts.Dir, "kube-controller-manager")
	err := s.run(ControllerManager, s.opts.serverBin("kube-controller-manager"), append([]string{
		"--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--service-account-private-key-file", filepath.Join(s.opts.Dir, "pki", "sa.key"),
		"--root-ca-file", filepath.Join(s.opts.Dir, "pki", "ca.crt"),
		"--use-service-account-credentials",
		"--leader-elect=false",
		"--secure-port=0",
		"--controllers", "*,-csrsigning,-csrapproving,-csrcleaner",
		"--node-monitor-period", "2s",
	}, s.scaleArgs(ControllerManager)...))
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
	err = s.run(KubeScheduler, s.opts.serverBin("kube-scheduler"), []string{
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
	lease := "40"
	var scaleConfig []string
	if s.opts.Scale {
		lease = strconv.Itoa(int(scaleNodeLease.Seconds()))
		path, err := writeKwokScaleConfig(s.opts.Dir)
		if err != nil {
			return err
		}
		scaleConfig = []string{"--config", path}
	}
	err := s.run(Kwok, s.opts.bin("kwok"), append([]string{
		"--kubeconfig", kubeconfigPath(s.opts.Dir, "kwok"),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector", "kwok.x-k8s.io/node=fake",
		"--config", filepath.Join(s.opts.Root, "_output", "etc", "kwok-stages.yaml"),
		"--node-lease-duration-seconds", lease,
		"--server-address", fmt.Sprintf("127.0.0.1:%d", s.ports["kwok"]),
		"--cidr", "10.244.0.0/16",
	}, scaleConfig...))
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
	var version []string
	if minor := s.opts.serverMinor(); minor != "" {
		// The cluster's minor, as EKS answers it and as its AMIs are built for.
		version = []string{"--kubernetes-version", minor}
	}
	err := s.run(LocalAWS, s.opts.bin("tailor-local-aws"), append([]string{
		"--listen", "127.0.0.1:0", "--address-file", addrFile,
		"--cluster-name", s.opts.ClusterName,
		"--kubeconfig", kubeconfigPath(s.opts.Dir, "local-aws"),
		"--launch-delay", s.opts.LaunchDelay.String(), "--boot-delay", s.opts.BootDelay.String(),
		// EKS DescribeCluster tells the provisioner what nodes join, as on EKS.
		"--cluster-endpoint", s.Config.Host, "--cluster-ca-file", filepath.Join(s.opts.Dir, "pki", "ca.crt"),
		"--service-cidr", serviceCIDR,
		"--queues", s.opts.InterruptionQueue,
		"--spot-reclaim-delay", s.spotReclaimDelay().String(),
	}, version...))
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

func (s *Stack) spotReclaimDelay() time.Duration {
	if s.opts.SpotReclaimDelay > 0 {
		return s.opts.SpotReclaimDelay
	}
	return 2 * time.Minute
}

// localSecretAccessKey is the stack's AWS secret access key: the local endpoint accepts any,
// and this one appears nowhere else, so a test can tell it leaked into a log.
const localSecretAccessKey = "tailor-local-secret-access-key"

// AWSEnv is the environment that points AWS SDKs and CLIs at the local endpoint.
func (s *Stack) AWSEnv() []string {
	env := []string{
		"AWS_REGION=" + region, "AWS_ACCESS_KEY_ID=tailor-local", "AWS_SECRET_ACCESS_KEY=" + localSecretAccessKey,
		"AWS_EC2_METADATA_DISABLED=true", "AWS_ENDPOINT_URL=" + s.AWSEndpoint,
	}
	for _, svc := range []string{"EC2", "SSM", "PRICING", "IAM", "SQS", "EKS"} {
		env = append(env, "AWS_ENDPOINT_URL_"+svc+"="+s.AWSEndpoint)
	}
	return env
}

func (s *Stack) startProvisioner(ctx context.Context, replica string) error {
	name := ProvisionerOf(replica)
	health := fmt.Sprintf("127.0.0.1:%d", s.ports["provisioner-health-"+replica])
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", s.ports["provisioner-metrics-"+replica])
	if replica == "a" {
		s.ProvisionerMetricsURL = metricsURL
	}
	if !slices.Contains(s.ProvisionerMetricsURLs, metricsURL) {
		s.ProvisionerMetricsURLs = append(s.ProvisionerMetricsURLs, metricsURL)
	}
	socket := s.SocketOf(replica)
	args := []string{
		"--kubeconfig", kubeconfigPath(s.opts.Dir, "tailor-provisioner"),
		"--socket", socket,
		"--cluster-name", s.opts.ClusterName,
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", s.ports["provisioner-metrics-"+replica]),
		"--health-probe-bind-address", health,
		"-v", s.verbosity(1),
	}
	env := s.AWSEnv()
	if s.ha() {
		args = append(args, "--leader-elect", "--leader-election-namespace", leaseNamespace, "--scheduler-lease-name", leaseName,
			"--leader-election-lease-duration", leaseDuration.String(), "--leader-election-renew-deadline", renewDeadline.String(),
			"--leader-election-retry-period", retryPeriod.String())
		env = append(env, leader.ReplicaEnv+"="+replica)
	}
	if s.opts.CapacityScheduling {
		args = append(args, "--elastic-quotas")
	}
	if s.opts.InterruptionQueue != "" {
		args = append(args, "--interruption-queue", s.opts.InterruptionQueue)
	}
	args = append(args, s.opts.ProvisionerArgs...)
	if err := s.run(name, s.opts.bin("tailor-provisioner"), args, env...); err != nil {
		return err
	}
	return s.waitFor(ctx, name, 60*time.Second, func(ctx context.Context) error {
		if _, err := os.Stat(socket); err != nil {
			return err
		}
		return httpOK("http://"+health+"/readyz", nil)(ctx)
	})
}

func (s *Stack) startScheduler(ctx context.Context, replica string) error {
	name := SchedulerOf(replica)
	kc := kubeconfigPath(s.opts.Dir, "tailor-scheduler")
	cfgPath := filepath.Join(s.opts.Dir, name+"-config.yaml")
	if err := s.writeSchedulerConfig(cfgPath, kc, s.SocketOf(replica)); err != nil {
		return err
	}
	port := s.ports["scheduler-"+replica]
	if replica == "a" {
		s.SchedulerMetricsURL = fmt.Sprintf("https://127.0.0.1:%d/metrics", port)
	}
	var env []string
	if s.ha() {
		env = append(env, leader.ReplicaEnv+"="+replica)
	}
	err := s.run(name, s.opts.bin(s.schedulerBinary()), append([]string{
		"--config", cfgPath,
		"--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		// The local API server runs no front proxy, so there is no request-header CA to read.
		"--authentication-skip-lookup",
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
		"-v", s.verbosity(2),
	}, s.scaleArgs(Scheduler)...), env...)
	if err != nil {
		return err
	}
	return s.waitFor(ctx, name, 60*time.Second, httpOK(fmt.Sprintf("https://127.0.0.1:%d/healthz", port), insecureLoopback()))
}

// schedulerBinary is the binary of tailor-scheduler the stack runs.
func (s *Stack) schedulerBinary() string {
	if s.opts.RejectLaunchedNodes {
		return "tailor-scheduler-rejecting"
	}
	return "tailor-scheduler"
}

// verbosity is the -v of Tailor's binaries: Options.Verbosity, or def when that is zero.
func (s *Stack) verbosity(def int) string {
	if s.opts.Verbosity > 0 {
		return strconv.Itoa(s.opts.Verbosity)
	}
	return strconv.Itoa(def)
}

// insecureLoopback checks the health of servers on loopback that serve self-signed certificates.
func insecureLoopback() *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed loopback health check
}

// writeSchedulerConfig renders manifests/scheduler/config.yaml for the local stack: the
// scheduler's kubeconfig (its request rate kept), the stack's socket, and no leader election.
func (s *Stack) writeSchedulerConfig(path, kubeconfig, socket string) error {
	raw, err := os.ReadFile(filepath.Join(s.opts.Root, "manifests", "scheduler", "config.yaml"))
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("parsing scheduler config: %w", err)
	}
	conn, _ := cfg["clientConnection"].(map[string]any)
	if conn == nil {
		conn = map[string]any{}
	}
	conn["kubeconfig"] = kubeconfig
	if s.opts.Scale {
		conn["qps"], conn["burst"] = scaleQPS, 2*scaleQPS
	}
	cfg["clientConnection"] = conn
	cfg["leaderElection"] = map[string]any{"leaderElect": false}
	if s.ha() {
		cfg["leaderElection"] = map[string]any{
			"leaderElect": true, "resourceLock": "leases", "resourceNamespace": leaseNamespace, "resourceName": leaseName,
			"leaseDuration": leaseDuration.String(), "renewDeadline": renewDeadline.String(), "retryPeriod": retryPeriod.String(),
		}
	}
	for _, p := range cfg["profiles"].([]any) {
		if s.opts.CapacityScheduling {
			enableCapacityScheduling(p.(map[string]any))
		}
		if s.opts.RejectLaunchedNodes {
			enablePlugin(p.(map[string]any), "filter", rejectfilter.Name)
		}
		for _, pc := range p.(map[string]any)["pluginConfig"].([]any) {
			entry := pc.(map[string]any)
			if entry["name"] == "NodeProvisioning" {
				entry["args"].(map[string]any)["provisionerSocket"] = socket
			}
		}
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

// enablePlugin enables a plugin at one extension point of a profile, after those enabled.
func enablePlugin(profile map[string]any, point, name string) {
	plugins, _ := profile["plugins"].(map[string]any)
	if plugins == nil {
		plugins = map[string]any{}
		profile["plugins"] = plugins
	}
	set, _ := plugins[point].(map[string]any)
	if set == nil {
		set = map[string]any{}
		plugins[point] = set
	}
	enabled, _ := set["enabled"].([]any)
	set["enabled"] = append(enabled, map[string]any{"name": name})
}

// enableCapacityScheduling enables CapacityScheduling in a profile of the scheduler's
// configuration: at preFilter and reserve, and first at postFilter, where it preempts in
// place of DefaultPreemption.
func enableCapacityScheduling(profile map[string]any) {
	plugins, _ := profile["plugins"].(map[string]any)
	if plugins == nil {
		plugins = map[string]any{}
		profile["plugins"] = plugins
	}
	plugin := map[string]any{"name": "CapacityScheduling"}
	for _, point := range []string{"preFilter", "postFilter", "reserve"} {
		set, _ := plugins[point].(map[string]any)
		if set == nil {
			set = map[string]any{}
			plugins[point] = set
		}
		enabled, _ := set["enabled"].([]any)
		if point == "postFilter" {
			set["enabled"] = append([]any{plugin}, enabled...)
			set["disabled"] = []any{map[string]any{"name": "DefaultPreemption"}}
			continue
		}
		set["enabled"] = append(enabled, plugin)
	}
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

// Listen ports of a stack are picked below Linux's ephemeral range (32768–60999): a port the
// kernel handed out for listening is also one it hands out as the source port of outgoing
// connections, so between this check and a component binding it, any client on the machine
// could take it.
const (
	firstListenPort = 20000
	lastListenPort  = 32767
)

// freePort returns a port no one listens on, picked at random below the ephemeral range,
// other than the ports already picked for the stack: none of those listens yet either.
func freePort(picked map[int]bool) (int, error) {
	for range 100 {
		port := firstListenPort + rand.IntN(lastListenPort-firstListenPort+1)
		if picked[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		_ = l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("finding a free port from %d to %d: none of 100 tried was free", firstListenPort, lastListenPort)
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
