// Package integration runs the real kube-scheduler in-process, with the NodeProvisioning
// plugin, against a real API server (envtest), and the provisioner's real gRPC server and
// nomination tracker on a unix socket in place of the sidecar's planning.
package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/component-base/configz"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"

	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/tailor-autoscaler/tailor/plugin/apis/config/scheme"
	"github.com/tailor-autoscaler/tailor/plugin/nodeprovisioning"
	"github.com/tailor-autoscaler/tailor/provisioner/handoff"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
	"github.com/tailor-autoscaler/tailor/provisioner/provisioning"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

var (
	cfg        *rest.Config
	kubeconfig string
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(klog.Background())
	scheme.AddToScheduler()
	dir, err := os.MkdirTemp("", "tailor-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := testenv.Run(m, func(c *rest.Config) error {
		cfg = c
		kubeconfig = filepath.Join(dir, "kubeconfig")
		return writeKubeconfig(kubeconfig, c)
	})
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func writeKubeconfig(path string, c *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.CertData, ClientKeyData: c.KeyData}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	return clientcmd.WriteToFile(*kc, path)
}

// sidecar is the provisioner's real gRPC server and nomination tracker, with submissions
// recorded instead of planned.
type sidecar struct {
	tracker   *nomination.Tracker
	submitted chan provisioning.Submission
	stop      context.CancelFunc
	done      chan struct{}
}

type recordingSubmitter struct{ ch chan provisioning.Submission }

func (r recordingSubmitter) Submit(subs []provisioning.Submission) int {
	for _, s := range subs {
		r.ch <- s
	}
	return len(subs)
}

func (recordingSubmitter) Pending() int { return 0 }

func startSidecar(t *testing.T, socket string, tracker *nomination.Tracker, submitted chan provisioning.Submission) *sidecar {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &sidecar{tracker: tracker, submitted: submitted, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		if err := handoff.Serve(ctx, socket, handoff.NewServer(recordingSubmitter{submitted}, tracker, handoff.Options{})); err != nil {
			t.Errorf("serving: %v", err)
		}
	}()
	t.Cleanup(s.shutdown)
	return s
}

func (s *sidecar) shutdown() {
	s.stop()
	<-s.done
}

// startScheduler runs tailor-scheduler in-process with two profiles: tailor-scheduler (any
// NodePool, with the plugin's Score as shipped) and tailor-batch (only the batch NodePool).
func startScheduler(t *testing.T, socket string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "scheduler.yaml")
	err := os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: %q}
leaderElection: {leaderElect: false}
profiles:
- schedulerName: tailor-scheduler
  plugins:
    filter: {enabled: [{name: NodeProvisioning}]}
    postFilter: {enabled: [{name: NodeProvisioning}]}
    preScore: {enabled: [{name: NodeProvisioning}]}
    score: {enabled: [{name: NodeProvisioning, weight: 20}]}
  pluginConfig:
  - {name: NodeProvisioning, args: {provisionerSocket: %q, requestTimeout: 2s}}
- schedulerName: tailor-batch
  plugins: {filter: {enabled: [{name: NodeProvisioning}]}, postFilter: {enabled: [{name: NodeProvisioning}]}}
  pluginConfig:
  - {name: NodeProvisioning, args: {provisionerSocket: %q, nodePools: [batch]}}
`, kubeconfig, socket, socket)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	opts := options.NewOptions()
	opts.ConfigFile = path
	opts.SecureServing.BindPort = 0
	ctx, cancel := context.WithCancel(context.Background())
	cc, sched, err := app.Setup(ctx, opts, app.WithPlugin(nodeprovisioning.Name, nodeprovisioning.New))
	if err != nil {
		cancel()
		t.Fatalf("setting up the scheduler: %v", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := app.Run(ctx, cc, sched); err != nil && ctx.Err() == nil {
			t.Errorf("scheduler stopped: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		// The scheduler registers its configuration in a process-wide registry.
		configz.Delete("componentconfig")
	})
}

func clientset(t *testing.T) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// createNode registers a Ready node, as kubelet and node lifecycle controller would leave it.
func createNode(t *testing.T, cs kubernetes.Interface, name, cpu string, taints ...corev1.Taint) {
	t.Helper()
	ctx := context.Background()
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
	node, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	node.Status = corev1.NodeStatus{
		Capacity: capacity, Allocatable: capacity,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
	}
	if node, err = cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Admission taints new nodes not-ready; the node lifecycle controller, absent here, lifts it.
	node.Spec.Taints = taints
	if _, err := cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createPod(t *testing.T, cs kubernetes.Interface, ns, name, scheduler, cpu, priorityClass string, owners ...metav1.OwnerReference) *corev1.Pod {
	t.Helper()
	zero := int64(0)
	pod, err := cs.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: owners},
		Spec: corev1.PodSpec{
			SchedulerName: scheduler, PriorityClassName: priorityClass, TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{Name: "app", Image: "pause", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)},
			}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

func priorityClass(t *testing.T, cs kubernetes.Interface, name string, value int32) {
	t.Helper()
	_, err := cs.SchedulingV1().PriorityClasses().Create(context.Background(), &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

func namespace(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "it-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// envtest runs no namespace controller: delete the pods, or the next test's scheduler
		// keeps trying to place them.
		ctx := context.Background()
		_ = cs.CoreV1().Pods(ns.Name).DeleteCollection(ctx, *metav1.NewDeleteOptions(0), metav1.ListOptions{})
		_ = cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

func waitPod(t *testing.T, cs kubernetes.Interface, ns, name string, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var got *corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = p
		return cond(p), nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s never %s (node %q, nominated %q): %v", ns, name, what, got.Spec.NodeName, got.Status.NominatedNodeName, err)
	}
	return got
}

func nextSubmission(t *testing.T, ch chan provisioning.Submission, timeout time.Duration) provisioning.Submission {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(timeout):
		t.Fatalf("no pod was submitted to the provisioner within %s", timeout)
		return provisioning.Submission{}
	}
}
