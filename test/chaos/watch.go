package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
)

// evictedReason is the reason of the DisruptionTarget condition the Eviction API sets on a
// pod before it deletes it; nothing else sets it, so it tells an eviction from a deletion.
const evictedReason = "EvictionByEvictionAPI"

// eviction is a pod the Eviction API deleted.
type eviction struct {
	pod, deployment, node string
	created, at           time.Time
}

// podWatch records how the trial's pods went: evictions, and deletions by anything else.
type podWatch struct {
	mu       sync.Mutex
	evicted  []eviction
	deleted  []eviction
	unknown  int
	stop     context.CancelFunc
	stopped  chan struct{}
	startsAt time.Time
}

// watchPods watches the pods of the trial's Deployments until stop.
func watchPods(ctx context.Context, cs kubernetes.Interface) (*podWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &podWatch{stop: cancel, stopped: make(chan struct{}), startsAt: time.Now()}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(metav1.NamespaceDefault),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = DeploymentLabel }))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: w.podDeleted}); err != nil {
		cancel()
		return nil, err
	}
	go func() {
		defer close(w.stopped)
		inf.Run(ctx.Done())
	}()
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		return nil, fmt.Errorf("watching pods: %w", ctx.Err())
	}
	return w, nil
}

func (w *podWatch) podDeleted(o any) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		// Deleted while the watch was down (an API server restart): how is unknown.
		w.mu.Lock()
		w.unknown++
		w.mu.Unlock()
		return
	}
	e := eviction{pod: p.Name, deployment: p.Labels[DeploymentLabel], node: p.Spec.NodeName, created: p.CreationTimestamp.Time, at: time.Now()}
	evicted := false
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == evictedReason {
			evicted = true
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if evicted {
		w.evicted = append(w.evicted, e)
	} else {
		w.deleted = append(w.deleted, e)
	}
}

// close stops the watch and returns what it saw.
func (w *podWatch) close() (evicted, deleted []eviction, unknown int) {
	w.stop()
	<-w.stopped
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.evicted, w.deleted, w.unknown
}
