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

// eviction is a pod the Eviction API deleted, or another deletion.
type eviction struct {
	pod, deployment, node string
	created, at           time.Time
	// tombstone says the watch missed the deletion (it was down: an API server or etcd
	// restart) and saw the pod's last known state; its deletion is judged by that state.
	tombstone bool
}

// podWatch records how the trial's pods went: evictions, and deletions by anything else.
type podWatch struct {
	mu       sync.Mutex
	evicted  []eviction
	deleted  []eviction
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
	tombstone := false
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		// Deleted while the watch was down: the faults restart the API server and etcd.
		o, tombstone = d.Obj, true
	}
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	e := eviction{pod: p.Name, deployment: p.Labels[DeploymentLabel], node: p.Spec.NodeName, created: p.CreationTimestamp.Time, at: time.Now(), tombstone: tombstone}
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
func (w *podWatch) close() (evicted, deleted []eviction) {
	w.stop()
	<-w.stopped
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.evicted, w.deleted
}
