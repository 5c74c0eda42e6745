// Package scenario holds the scenarios run against a local stack, which tailor-dev prints
// and the end-to-end tests assert on: the demo (make demo) and the scale-down that measures
// consolidation (make bench-scaledown).
package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
	"github.com/tailor-autoscaler/tailor/test/localaws"
	"github.com/tailor-autoscaler/tailor/test/localstack"
)

// PodRecord is what happened to one pod.
type PodRecord struct {
	Name string
	UID  types.UID
	// Nominated is the first node the pod was nominated to, before it was bound.
	Nominated string
	// Node is the node the pod was bound to.
	Node string
	// Created and Running are when the pod was created and first seen Running.
	Created, Running time.Time
}

// NodeRecord is one node Tailor launched and what runs on it.
type NodeRecord struct {
	NodeClaim    string
	Node         string
	InstanceType string
	Zone         string
	CapacityType string
	// PricePerHour is the instance's price, as the EC2 endpoint bills it.
	PricePerHour float64
	// Price is what the node costs per hour as the NodeClaim's status.price records it:
	// the instance and what the node pays besides (volumes, public IPv4, monitoring).
	Price *karpv1.Price
	// NodePricePerHour is Price's total, 0 without it.
	NodePricePerHour float64
	// PlannedPods are the pods the NodeClaim was planned for.
	PlannedPods []string
	Pods        []string
}

// DemoResult is the outcome of the demo.
type DemoResult struct {
	Pods  []PodRecord
	Nodes []NodeRecord
	// Running counts pods Running on nodes Tailor launched.
	Running int
	Total   int
	// PricePerHour is the total hourly price of the launched nodes' instances, and
	// NodePricePerHour of the nodes, what they pay besides their instances included.
	PricePerHour, NodePricePerHour float64
}

// Demo applies the example NodePool and a Deployment of 10 pods, waits until they all run,
// and prints what Tailor launched and how long pods waited.
func Demo(ctx context.Context, stack *localstack.Stack, root string, out io.Writer) (*DemoResult, error) {
	cs, err := kubernetes.NewForConfig(stack.Config)
	if err != nil {
		return nil, err
	}
	kube, err := client.New(stack.Config, client.Options{Scheme: apischeme.New()})
	if err != nil {
		return nil, err
	}
	applier, err := localstack.NewApplier(stack.Config)
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(out, "applying the example EC2NodeClass and NodePool (manifests/examples/general.yaml)")
	if err := applier.ApplyFiles(ctx, filepath.Join(root, "manifests", "examples", "general.yaml")); err != nil {
		return nil, err
	}
	if err := waitNodeClassReady(ctx, kube, "default"); err != nil {
		return nil, err
	}
	rec := newRecorder()
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if err := rec.watch(watchCtx, cs, "app=inflate"); err != nil {
		return nil, err
	}
	fmt.Fprintln(out, "applying a Deployment of 10 pods of 1 CPU and 1Gi for tailor-scheduler (manifests/examples/demo.yaml)")
	if err := applier.ApplyFiles(ctx, filepath.Join(root, "manifests", "examples", "demo.yaml")); err != nil {
		return nil, err
	}
	const want = 10
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		return rec.running() >= want, nil
	})
	stopWatch()
	if err != nil {
		return nil, fmt.Errorf("waiting for %d pods to run (%d running): %w", want, rec.running(), err)
	}
	result, err := collect(ctx, kube, stack.AWSEndpoint, rec.records())
	if err != nil {
		return nil, err
	}
	result.Total = want
	printResult(out, result)
	return result, nil
}

func waitNodeClassReady(ctx context.Context, kube client.Client, name string) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		class := &awsv1.EC2NodeClass{}
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, class); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return meta.IsStatusConditionTrue(class.Status.Conditions, awsv1.ConditionTypeReady), nil
	})
}

// recorder follows pods through nomination, binding and Running.
type recorder struct {
	mu   sync.Mutex
	pods map[types.UID]*PodRecord
}

func newRecorder() *recorder { return &recorder{pods: map[types.UID]*PodRecord{}} }

func (r *recorder) watch(ctx context.Context, cs kubernetes.Interface, selector string) error {
	w, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if pod, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted {
				r.observe(pod)
			}
		}
	}()
	return nil
}

func (r *recorder) observe(pod *corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pods[pod.UID]
	if !ok {
		p = &PodRecord{Name: pod.Name, UID: pod.UID, Created: pod.CreationTimestamp.Time}
		r.pods[pod.UID] = p
	}
	if p.Nominated == "" && pod.Spec.NodeName == "" && pod.Status.NominatedNodeName != "" {
		p.Nominated = pod.Status.NominatedNodeName
	}
	if pod.Spec.NodeName != "" {
		p.Node = pod.Spec.NodeName
	}
	if p.Running.IsZero() && pod.Status.Phase == corev1.PodRunning {
		p.Running = time.Now()
	}
}

func (r *recorder) running() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, p := range r.pods {
		if !p.Running.IsZero() {
			n++
		}
	}
	return n
}

func (r *recorder) records() []PodRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]PodRecord, 0, len(r.pods))
	for _, p := range r.pods {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// collect joins pods with the NodeClaims and instances behind their nodes.
func collect(ctx context.Context, kube client.Client, awsEndpoint string, pods []PodRecord) (*DemoResult, error) {
	claims := &karpv1.NodeClaimList{}
	if err := kube.List(ctx, claims); err != nil {
		return nil, fmt.Errorf("listing NodeClaims: %w", err)
	}
	prices, err := instancePrices(ctx, awsEndpoint)
	if err != nil {
		return nil, err
	}
	result := &DemoResult{Pods: pods}
	for _, nc := range claims.Items {
		planned, err := nomination.DecodePods(nc.Annotations[nomination.PlannedPodsAnnotationKey])
		if err != nil {
			return nil, err
		}
		n := NodeRecord{
			NodeClaim: nc.Name, Node: nc.Status.NodeName,
			InstanceType: nc.Labels[corev1.LabelInstanceTypeStable], Zone: nc.Labels[corev1.LabelTopologyZone],
			CapacityType: nc.Labels[karpv1.CapacityTypeLabelKey],
		}
		if id, err := aws.InstanceIDOf(nc.Status.ProviderID); err == nil {
			n.PricePerHour = prices[id]
		}
		if n.Price = nc.Status.Price; n.Price != nil {
			if n.NodePricePerHour, err = strconv.ParseFloat(n.Price.PerHour, 64); err != nil {
				return nil, fmt.Errorf("NodeClaim %s: status.price.perHour: %w", nc.Name, err)
			}
		}
		for _, p := range planned {
			n.PlannedPods = append(n.PlannedPods, p.Name)
		}
		result.Nodes = append(result.Nodes, n)
		result.PricePerHour += n.PricePerHour
		result.NodePricePerHour += n.NodePricePerHour
	}
	// Indexed once the slice is complete: pointers taken while appending would go stale.
	byNode := map[string]*NodeRecord{}
	for i := range result.Nodes {
		byNode[result.Nodes[i].Node] = &result.Nodes[i]
	}
	for _, p := range pods {
		if n, ok := byNode[p.Node]; ok && !p.Running.IsZero() {
			n.Pods = append(n.Pods, p.Name)
			result.Running++
		}
	}
	sort.Slice(result.Nodes, func(i, j int) bool { return result.Nodes[i].Node < result.Nodes[j].Node })
	return result, nil
}

func instancePrices(ctx context.Context, endpoint string) (map[string]float64, error) {
	all, err := instances(ctx, endpoint)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, i := range all {
		out[i.ID] = i.PricePerHour
	}
	return out, nil
}

// instances lists every instance the local endpoint shows, terminated ones included.
func instances(ctx context.Context, endpoint string) ([]localaws.InstanceSummary, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/_admin/instances", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("listing instances of the local endpoint: %w", err)
	}
	defer resp.Body.Close()
	var out []localaws.InstanceSummary
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("decoding instances: %w", err)
	}
	return out, nil
}

func printResult(out io.Writer, r *DemoResult) {
	waits := map[string][]time.Duration{}
	for _, p := range r.Pods {
		if !p.Running.IsZero() {
			waits[p.Node] = append(waits[p.Node], p.Running.Sub(p.Created))
		}
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tINSTANCE TYPE\tZONE\tCAPACITY\tINSTANCE $/HOUR\tNODE $/HOUR\tPODS\tPENDING→RUNNING (s)")
	for _, n := range r.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.4f\t%.4f\t%d\t%s\n", n.Node, n.InstanceType, n.Zone, n.CapacityType, n.PricePerHour, n.NodePricePerHour, len(n.Pods), span(waits[n.Node]))
	}
	tw.Flush()
	fmt.Fprintln(out)
	fmt.Fprintf(out, "demo: %d/%d pods running on %d nodes, $%.4f/hour, $%.4f of it instances\n",
		r.Running, r.Total, len(r.Nodes), r.NodePricePerHour, r.PricePerHour)
}

// span renders the shortest and longest wait, in seconds.
func span(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	lo, hi := ds[0].Seconds(), ds[len(ds)-1].Seconds()
	if hi-lo < 0.05 {
		return fmt.Sprintf("%.1f", hi)
	}
	return fmt.Sprintf("%.1f–%.1f", lo, hi)
}
