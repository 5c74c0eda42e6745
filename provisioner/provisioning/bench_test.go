package provisioning

import (
	"context"
	"fmt"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	"github.com/tailor-autoscaler/tailor/provisioner/informers"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
	"github.com/tailor-autoscaler/tailor/test/testenv"
	"github.com/tailor-autoscaler/tailor/test/workloads"
)

// BenchmarkClusterInput measures the view of the cluster every disruption pass (twice)
// and every interruption takes: ClusterInput read from the sidecar's cache (package
// informers, with its indexes) holding the webmix workload's 5,000 pods running on 500
// nodes of a NodePool, each with its initialized NodeClaim. It reports time and bytes
// allocated per view.
func BenchmarkClusterInput(b *testing.B) {
	const pods, nodes = 5000, 500
	ctrllog.SetLogger(logr.Discard())
	ctx := context.Background()
	fast := rest.CopyConfig(cfg)
	fast.QPS, fast.Burst = 2000, 4000
	kube, err := client.New(fast, client.Options{Scheme: apischeme.New()})
	if err != nil {
		b.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-"}}
	if err := kube.Create(ctx, ns); err != nil {
		b.Fatal(err)
	}
	onDemand := []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}}}
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "bench"}, Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
		Requirements: onDemand, NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
	}}}}
	if err := kube.Create(ctx, np); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = kube.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns.Name), client.GracePeriodSeconds(0))
		_ = kube.DeleteAllOf(ctx, &corev1.Node{})
		_ = kube.DeleteAllOf(ctx, &karpv1.NodeClaim{})
		_ = kube.Delete(ctx, np)
		_ = kube.Delete(ctx, ns)
	})
	allocatable := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7910m"), corev1.ResourceMemory: resource.MustParse("29850Mi"), corev1.ResourcePods: resource.MustParse("58")}
	nodeName := func(i int) string { return fmt.Sprintf("bench-%04d", i) }
	testenv.Parallel(b, nodes, func(i int) error {
		providerID := fmt.Sprintf("aws:///us-east-1a/i-%017x", i)
		labels := map[string]string{karpv1.NodePoolLabelKey: np.Name, corev1.LabelTopologyZone: "us-east-1a", corev1.LabelInstanceTypeStable: "m7i.2xlarge", karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeOnDemand}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName(i), Labels: labels}, Spec: corev1.NodeSpec{ProviderID: providerID}}
		if err := kube.Create(ctx, node); err != nil {
			return err
		}
		node.Status.Allocatable = allocatable
		if err := kube.Status().Update(ctx, node); err != nil {
			return err
		}
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: nodeName(i), Labels: labels}, Spec: karpv1.NodeClaimSpec{Requirements: onDemand, NodeClassRef: np.Spec.Template.Spec.NodeClassRef}}
		if err := kube.Create(ctx, nc); err != nil {
			return err
		}
		nc.Status = karpv1.NodeClaimStatus{ProviderID: providerID, NodeName: node.Name, Allocatable: allocatable}
		nodeclaim.SetCondition(nc, karpv1.ConditionTypeInitialized, metav1.ConditionTrue, "Initialized", "")
		return kube.Status().Update(ctx, nc)
	})
	in := workloads.Load(b, "webmix", pods)
	testenv.Parallel(b, len(in.Pods), func(i int) error {
		p := in.Pods[i]
		p.Namespace = ns.Name
		p.Spec.NodeName = nodeName(i % nodes)
		if err := kube.Create(ctx, p); err != nil {
			return err
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning}
		return kube.Status().Update(ctx, p)
	})

	cached := cachedClient(b, cfg)
	prov := New(cached, selling(instanceType("m7i.2xlarge", 8, 32, 0.4032)), nomination.NewTracker(clock.RealClock{}), noTrigger{}, record.NewFakeRecorder(100), Options{Clock: clock.RealClock{}})
	var view int
	b.ReportAllocs()
	for b.Loop() {
		got, err := prov.ClusterInput(ctx)
		if err != nil {
			b.Fatal(err)
		}
		view = 0
		for _, n := range got.Nodes {
			view += len(n.Pods)
		}
	}
	if view != pods {
		b.Fatalf("the view holds %d pods on nodes, want %d", view, pods)
	}
}

// cachedClient is a client that reads from a started and synced cache of the kinds the
// provisioner reads, with the sidecar's indexes, and writes through c.
func cachedClient(b *testing.B, c *rest.Config) client.Client {
	b.Helper()
	opts := informers.CacheOptions()
	opts.Scheme = apischeme.New()
	ca, err := cache.New(c, opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	for _, idx := range []struct {
		obj   client.Object
		field string
		index client.IndexerFunc
	}{
		{&corev1.Pod{}, nodeclaim.PodNodeNameIndex, nodeclaim.PodNodeName},
		{&corev1.Node{}, nodeclaim.NodeProviderIDIndex, nodeclaim.NodeProviderID},
		{&karpv1.NodeClaim{}, nodeclaim.NodeClaimProviderIDIndex, nodeclaim.NodeClaimProviderID},
	} {
		if err := ca.IndexField(ctx, idx.obj, idx.field, idx.index); err != nil {
			b.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = ca.Start(ctx) // what Start returns once cancelled says only that it stopped
	}()
	b.Cleanup(func() {
		cancel()
		<-done
	})
	for _, obj := range ReadKinds() {
		if _, err := ca.GetInformer(ctx, obj); err != nil {
			b.Fatal(err)
		}
	}
	if !ca.WaitForCacheSync(ctx) {
		b.Fatal("cache did not sync")
	}
	cached, err := client.New(c, client.Options{Scheme: apischeme.New(), Cache: &client.CacheOptions{Reader: ca}})
	if err != nil {
		b.Fatal(err)
	}
	return cached
}
