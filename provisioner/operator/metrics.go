package operator

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/metrics"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/lifecycle"
	"github.com/tailor-autoscaler/tailor/provisioner/nodepool"
)

// clusterMetrics serves the NodePool, cluster-state and NodeClaim-wait metrics from the
// caches, and times pods' binding and startup from the pod informer.
func clusterMetrics(ctx context.Context, mgr ctrl.Manager, clk clock.PassiveClock) error {
	var informers []crcache.Informer
	for _, obj := range []client.Object{&corev1.Pod{}, &corev1.Node{}, &karpv1.NodeClaim{}} {
		informer, err := mgr.GetCache().GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("getting the informer of %T: %w", obj, err)
		}
		informers = append(informers, informer)
	}
	synced := func() bool {
		for _, i := range informers {
			if !i.HasSynced() {
				return false
			}
		}
		return true
	}
	leading := func() bool {
		select {
		case <-mgr.Elected():
			return true
		default:
			return false
		}
	}
	if _, err := informers[0].AddEventHandler(metrics.NewPodTimings(clk, leading).Handler()); err != nil {
		return fmt.Errorf("timing pods: %w", err)
	}
	for _, c := range []prometheus.Collector{
		nodepool.NewCollector(mgr.GetClient()), metrics.NewClusterCollector(mgr.GetClient(), synced, clk),
		lifecycle.NewWaitingCollector(mgr.GetClient(), clk),
	} {
		if err := crmetrics.Registry.Register(c); err != nil {
			return fmt.Errorf("registering cluster metrics: %w", err)
		}
	}
	return nil
}
