package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

// The tests run the built tailorctl, as a user does, against a real API server.
var (
	binary     string
	kubeconfig string
	cs         kubernetes.Interface
	kube       client.Client
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tailorctl-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := testenv.Run(m, func(cfg *rest.Config) error {
		binary = filepath.Join(dir, "tailorctl")
		if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
			return fmt.Errorf("building tailorctl: %w\n%s", err, out)
		}
		kubeconfig = filepath.Join(dir, "kubeconfig")
		if err := writeKubeconfig(kubeconfig, cfg); err != nil {
			return err
		}
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		cs = c
		kube, err = client.New(cfg, client.Options{Scheme: apischeme.New()})
		return err
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

func run(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// TestConvert checks the split of the converted YAML (stdout) from the report (stderr), and
// that bad input fails naming the document.
func TestConvert(t *testing.T) {
	stdout, stderr, err := run(t, "convert", "-f", "../../convert/testdata/v1beta1.in.yaml")
	if err != nil {
		t.Fatalf("convert: %v\n%s", err, stderr)
	}
	want, err := os.ReadFile("../../convert/testdata/v1beta1.out.golden.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if stdout != string(want) {
		t.Errorf("stdout is not the converted YAML:\n%s", stdout)
	}
	if !strings.Contains(stderr, "WhenUnderutilized → WhenEmptyOrUnderutilized") {
		t.Errorf("stderr lacks the report:\n%s", stderr)
	}
	_, stderr, err = run(t, "convert", "-f", "../../convert/testdata/unknown-kind.in.yaml")
	if err == nil || !strings.Contains(stderr, "document 2 (Machine m-1): kind karpenter.sh/v1alpha5 Machine is not convertible") {
		t.Errorf("convert of an unknown kind: err %v, stderr:\n%s", err, stderr)
	}
}

// TestSimulateIsTheProvisionersCommand checks that tailorctl simulate is
// tailor-provisioner simulate.
func TestSimulateIsTheProvisionersCommand(t *testing.T) {
	_, stderr, err := run(t, "simulate", "-h")
	if err != nil || !strings.Contains(stderr, "Plans capacity for the pending pods") {
		t.Errorf("simulate -h: err %v, stderr:\n%s", err, stderr)
	}
}

// TestExplain explains a pending pod with a FailedProvisioning event.
func TestExplain(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, "explain")
	pod := createPod(t, ns, "big", "", "64", "1Gi")
	t.Cleanup(func() {
		// Other tests count pending pods, and there is no namespace controller to delete it.
		_ = cs.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{})
	})
	_, err := cs.CoreV1().Events(ns).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "big."},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name, UID: pod.UID},
		Reason:         "FailedProvisioning", Type: corev1.EventTypeWarning, Count: 1,
		Message:       `cannot provision a node for this pod: NodePool "general": no instance type has room for the pod's requests (cpu=64)`,
		LastTimestamp: metav1.Now(),
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := run(t, "explain", "big", "-n", ns, "--kubeconfig", kubeconfig)
	if err != nil {
		t.Fatalf("explain: %v\n%s", err, stderr)
	}
	for _, want := range []string{
		"Pod " + ns + "/big: pending: no NodePool can launch a node for it",
		"  NodePool general: no instance type has room for the pod's requests (cpu=64)",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("explain output lacks %q:\n%s", want, stdout)
		}
	}
	_, stderr, err = run(t, "explain", "nope", "-n", ns, "--kubeconfig", kubeconfig)
	if err == nil || !strings.Contains(stderr, "pod "+ns+"/nope not found") {
		t.Errorf("explain of a missing pod: err %v, stderr:\n%s", err, stderr)
	}
}

// TestTop runs tailorctl top under a pseudo-terminal: the screen shows a row per node and
// the totals, and a new pod shows up in the next frame. --once prints the same frame.
func TestTop(t *testing.T) {
	ns := createNamespace(t, "top")
	createNode(t, "ip-10-0-1-17.ec2.internal", "general", "m5.large", "us-east-1a", "spot", "1930m", "7187Mi")
	createNode(t, "ip-10-0-2-4.ec2.internal", "general", "c5.xlarge", "us-east-1b", "on-demand", "3920m", "6803Mi")
	createNode(t, "system-a", "", "m5.large", "us-east-1a", "on-demand", "1930m", "7187Mi")
	createPod(t, ns, "web-1", "ip-10-0-1-17.ec2.internal", "1", "2Gi")
	createPod(t, ns, "api-1", "ip-10-0-2-4.ec2.internal", "3", "4Gi")
	// The spot node's NodeClaim adds its root volume and public address to its price.
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "general-top"},
		Spec: karpv1.NodeClaimSpec{
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}},
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
		},
	}
	if err := kube.Create(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	nc.Status.NodeName = "ip-10-0-1-17.ec2.internal"
	nc.Status.Price = &karpv1.Price{PerHour: "0.04", Instance: "0.032808", Volumes: "0.002192", PublicIPv4: "0.005"}
	if err := kube.Status().Update(context.Background(), nc); err != nil {
		t.Fatal(err)
	}

	stdout, stderr, err := run(t, "top", "--once", "--kubeconfig", kubeconfig)
	if err != nil {
		t.Fatalf("top --once: %v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "Cluster: 3 node(s), $0.3282/hour, cpu  51% 4/7.78") {
		t.Errorf("top --once lacks the cluster totals:\n%s", stdout)
	}

	cmd := exec.Command(binary, "top", "--kubeconfig", kubeconfig)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 30, Cols: 150})
	if err != nil {
		t.Fatalf("starting tailorctl top in a pseudo-terminal: %v", err)
	}
	defer tty.Close()
	exited := false
	t.Cleanup(func() {
		if !exited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	var mu sync.Mutex
	var screen bytes.Buffer
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			mu.Lock()
			screen.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	frame := func() string {
		mu.Lock()
		defer mu.Unlock()
		return lastFrame(screen.String())
	}
	waitFor := func(wants ...string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			f := frame()
			missing := ""
			for _, w := range wants {
				if !strings.Contains(f, w) {
					missing = w
					break
				}
			}
			if missing == "" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the screen never showed %q; last frame:\n%s", missing, f)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor(
		"3 node(s), $0.3282/hour ($239.59/month), 2 pod(s) bound, 0 pending",
		"── NodePool general: 2 node(s), $0.2322/hour, cpu  68% 4/5.85, memory  44% 6.0Gi/13.7Gi, 2 pod(s)",
		"ip-10-0-1-17.ec2.internal  m5.large   us-east-1a  spot         0.0622  [",
		"ip-10-0-2-4.ec2.internal   c5.xlarge  us-east-1b  on-demand    0.1700  [",
		"── no NodePool: 1 node(s), $0.0960/hour",
		"system-a ",
		"Cluster: 3 node(s), $0.3282/hour, cpu  51% 4/7.78",
	)
	for _, line := range strings.Split(frame(), "\n") {
		if n := len([]rune(line)); n > 150 {
			t.Errorf("line of %d columns on a 150-column terminal: %q", n, line)
		}
	}
	createPod(t, ns, "web-2", "system-a", "500m", "1Gi")
	waitFor("3 node(s), $0.3282/hour ($239.59/month), 3 pod(s) bound, 0 pending", "Cluster: 3 node(s), $0.3282/hour, cpu  58% 4.5/7.78")

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited = true
	if err := cmd.Wait(); err != nil {
		t.Errorf("tailorctl top did not exit cleanly on SIGTERM: %v", err)
	}
}

var csi = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

// lastFrame is the text of the last full frame on the terminal: what follows the last
// clear-screen, without control sequences and carriage returns.
func lastFrame(out string) string {
	const clear = "\x1b[H\x1b[2J"
	i := strings.LastIndex(out, clear)
	if i < 0 {
		return ""
	}
	return strings.ReplaceAll(csi.ReplaceAllString(out[i+len(clear):], ""), "\r", "")
}

func createNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func createNode(t *testing.T, name, pool, typ, zone, capacityType, cpu, memory string) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{corev1.LabelInstanceTypeStable: typ, corev1.LabelTopologyZone: zone, "karpenter.sh/capacity-type": capacityType}
	if pool != "" {
		labels["karpenter.sh/nodepool"] = pool
	}
	node, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory), corev1.ResourcePods: resource.MustParse("110")}
	node.Status.Capacity = node.Status.Allocatable
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createPod(t *testing.T, ns, name, node, cpu, memory string) *corev1.Pod {
	t.Helper()
	pod, err := cs.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeName:      node,
			SchedulerName: "tailor-scheduler",
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}
