// Package stacktest starts the local stack for a test (test/localstack) and waits on what
// runs on it: shared by the end-to-end tests and the alerting tests.
package stacktest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	"github.com/tailor-autoscaler/tailor/test/localstack"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

// KeepLogsEnv names a directory where a failed test's complete component logs are copied.
const KeepLogsEnv = "TAILOR_E2E_LOGS"

// stackLogLines is how many of each component's last log lines a failed test logs.
const stackLogLines = 40

// Start starts a fresh local stack for one test, in its temporary directory and from
// the repository root unless opts say otherwise, and stops it when the test ends; on
// failure the last lines of every component's log go to the test log. It returns the stack
// with a clientset and a client with Tailor's scheme.
func Start(t *testing.T, ctx context.Context, opts localstack.Options) (*localstack.Stack, kubernetes.Interface, client.Client) {
	t.Helper()
	if opts.Root == "" {
		opts.Root = testenv.Root()
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	stack, err := localstack.Up(ctx, opts)
	if err != nil {
		t.Fatalf("starting the local stack: %v", err)
	}
	t.Cleanup(func() {
		stack.Down()
		if t.Failed() {
			logStack(t, opts.Dir)
		}
	})
	cs, err := kubernetes.NewForConfig(stack.Config)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := client.New(stack.Config, client.Options{Scheme: apischeme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return stack, cs, kube
}

// logStack logs the last lines of each component's log, and copies every log whole to
// $TAILOR_E2E_LOGS/<test> when that is set.
func logStack(t *testing.T, dir string) {
	keep := os.Getenv(KeepLogsEnv)
	if keep != "" {
		keep = filepath.Join(keep, t.Name())
		if err := os.MkdirAll(keep, 0o755); err != nil {
			t.Logf("keeping logs: %v", err)
			keep = ""
		}
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	for _, l := range logs {
		raw, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		if keep != "" {
			if err := os.WriteFile(filepath.Join(keep, filepath.Base(l)), raw, 0o644); err != nil {
				t.Logf("keeping %s: %v", filepath.Base(l), err)
			}
		}
		lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
		if len(lines) > stackLogLines {
			lines = lines[len(lines)-stackLogLines:]
		}
		t.Logf("--- %s ---\n%s", filepath.Base(l), strings.Join(lines, "\n"))
	}
}

// WaitRunning waits up to timeout for the pod name of the default namespace to run, and
// returns it; the test fails with the pod's last phase and node when it does not.
func WaitRunning(t *testing.T, ctx context.Context, cs kubernetes.Interface, name string, timeout time.Duration) *corev1.Pod {
	t.Helper()
	var got *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = p
		return p.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		if got == nil {
			t.Fatalf("pod %s not Running: %v", name, err)
		}
		t.Fatalf("pod %s not Running (phase %s, node %q): %v", name, got.Status.Phase, got.Spec.NodeName, err)
	}
	return got
}

// SchedulingRound applies the example EC2NodeClass and NodePool (manifests/examples/general.yaml),
// creates a Deployment of replicas small pods for tailor-scheduler, and waits up to timeout
// for all of them to run on the nodes Tailor launches for them. It returns the running pods.
func SchedulingRound(t *testing.T, ctx context.Context, stack *localstack.Stack, cs kubernetes.Interface, name string, replicas int32, timeout time.Duration) []corev1.Pod {
	t.Helper()
	applier, err := localstack.NewApplier(stack.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := applier.ApplyFiles(ctx, filepath.Join(testenv.Root(), "manifests", "examples", "general.yaml")); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": name}
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					SchedulerName: "tailor-scheduler",
					Containers: []corev1.Container{{
						Name: "app", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi"),
						}},
					}},
				},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments(metav1.NamespaceDefault).Create(ctx, deployment, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Deployment %s: %v", name, err)
	}
	var running []corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err
		}
		running = running[:0]
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" {
				running = append(running, p)
			}
		}
		return len(running) == int(replicas), nil
	})
	if err != nil {
		t.Fatalf("%d of the %d pods of Deployment %s running: %v", len(running), replicas, name, err)
	}
	return running
}
