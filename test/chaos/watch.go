package chaos

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/tailor-autoscaler/tailor/provisioner/deletioncost"
	"github.com/tailor-autoscaler/tailor/provisioner/surge"
)

// evictedReason is the reason of the DisruptionTarget condition the Eviction API sets on a
// pod before it deletes it; nothing else sets it, so it tells an eviction from a deletion.
const evictedReason = "EvictionByEvictionAPI"

// handedOverCost is the deletion cost surge.Release gives a pod replaced before its
// eviction, so that its ReplicaSet deletes it rather than its copy.
var handedOverCost = strconv.Itoa(math.MinInt32)

// eviction is a pod the Eviction API deleted, another deletion, or a copy created.
type eviction struct {
	pod, deployment, node string
	created, at           time.Time
	// tombstone says the watch missed the deletion (it was down: an API server or etcd
	// restart) and saw the pod's last known state; its deletion is judged by that state.
	tombstone bool
	// copy says the pod was a copy not handed to its ReplicaSet yet (surge.IsCopy): a surge
	// beyond its Deployment's replicas, which no budget counts.
	copy bool
	// replaced says the pod was handed over to a copy: its deletion cost is the one
	// surge.Release gives, or the watch saw a copy that replaces it handed to its
	// ReplicaSet. servedBy is a pod of its Deployment that was Ready, not a copy, when it
	// went; "" when none was.
	replaced bool
	servedBy string
}

// podState is what the watch keeps of a live pod, to tell whether another pod of its
// Deployment served when one went.
type podState struct {
	name, deployment string
	ready, copy      bool
}

// podWatch records how the trial's pods went: evictions, deletions by anything else, and
// the copies made to replace pods before their eviction.
type podWatch struct {
	mu      sync.Mutex
	evicted []eviction
	deleted []eviction
	copies  []eviction
	// pods are the live pods as last seen; replacedBy the copy that replaces a pod, by
	// the UIDs of both.
	pods       map[types.UID]podState
	replacedBy map[types.UID]types.UID
	stop       context.CancelFunc
	stopped    chan struct{}
	startsAt   time.Time
}

// watchPods watches the pods of the trial's Deployments until stop.
func watchPods(ctx context.Context, cs kubernetes.Interface) (*podWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &podWatch{stop: cancel, stopped: make(chan struct{}), startsAt: time.Now()}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(metav1.NamespaceDefault),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = DeploymentLabel }))
	inf := factory.Core().V1().Pods().Informer()
	handlers := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    w.podSeen,
		UpdateFunc: func(_, o any) { w.podSeen(o) },
		DeleteFunc: w.podDeleted,
	}
	if _, err := inf.AddEventHandler(handlers); err != nil {
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

// podSeen keeps a pod's state, and records a copy the first time it is seen. A handler's
// events come in order, so a copy is Ready here before the pod it replaces is deleted.
func (w *podWatch) podSeen(o any) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.init()
	_, known := w.pods[p.UID]
	w.pods[p.UID] = podState{name: p.Name, deployment: p.Labels[DeploymentLabel], ready: surge.Ready(p), copy: surge.IsCopy(p)}
	old, isCopy := p.Labels[surge.ReplacesLabelKey]
	if !isCopy {
		return
	}
	w.replacedBy[types.UID(old)] = p.UID
	if !known {
		w.copies = append(w.copies, eviction{pod: p.Name, deployment: p.Labels[DeploymentLabel], node: p.Spec.NodeName, created: p.CreationTimestamp.Time, at: time.Now(), copy: true})
	}
}

func (w *podWatch) init() {
	if w.pods == nil {
		w.pods, w.replacedBy = map[types.UID]podState{}, map[types.UID]types.UID{}
	}
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
	e := eviction{
		pod: p.Name, deployment: p.Labels[DeploymentLabel], node: p.Spec.NodeName, created: p.CreationTimestamp.Time, at: time.Now(),
		tombstone: tombstone, copy: surge.IsCopy(p),
	}
	evicted := false
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == evictedReason {
			evicted = true
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.init()
	delete(w.pods, p.UID)
	e.replaced = p.Annotations[deletioncost.PodDeletionCostAnnotationKey] == handedOverCost
	if c, ok := w.pods[w.replacedBy[p.UID]]; ok && !c.copy {
		e.replaced = true
	}
	if e.replaced {
		for _, s := range w.pods {
			if s.deployment == e.deployment && s.ready && !s.copy && (e.servedBy == "" || s.name < e.servedBy) {
				e.servedBy = s.name
			}
		}
	}
	if evicted {
		w.evicted = append(w.evicted, e)
	} else {
		w.deleted = append(w.deleted, e)
	}
}

// history is what a pod watch saw: the evictions, the other deletions, and the copies made.
type history struct {
	evicted, deleted, copies []eviction
}

// close stops the watch and returns what it saw.
func (w *podWatch) close() history {
	w.stop()
	<-w.stopped
	w.mu.Lock()
	defer w.mu.Unlock()
	return history{evicted: w.evicted, deleted: w.deleted, copies: w.copies}
}
