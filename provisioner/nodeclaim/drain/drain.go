// Package drain empties a node that is going away: it evicts its pods through the Eviction
// API, so PodDisruptionBudgets hold, in waves (ordinary pods, then ordinary DaemonSet pods,
// then critical pods), and past the NodeClaim's termination grace period deletes what is
// left so the node can go. It also tells whether volumes are still attached to the node.
package drain

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
)

// Wave orders the pods of a node: a wave is evicted only once every earlier one is gone.
type Wave int

// The waves, in order.
const (
	// WaveWorkload holds pods that are neither critical nor DaemonSet pods.
	WaveWorkload Wave = iota
	// WaveDaemon holds DaemonSet pods that are not critical.
	WaveDaemon
	// WaveCritical holds pods of the system-cluster-critical and system-node-critical
	// priority classes, which keep the node working until the end.
	WaveCritical
)

func (w Wave) String() string {
	return [...]string{"workload", "daemon", "critical"}[w]
}

// Result is what one pass over a node found.
type Result struct {
	// Remaining are the pods still to go, by wave.
	Remaining map[Wave]int
	// Blocked names pods whose eviction a PodDisruptionBudget refused, or that carry
	// karpenter.sh/do-not-disrupt, with the reason.
	Blocked map[string]string
	// Forced counts pods deleted because the grace period had passed.
	Forced int
}

// Done reports whether every pod that must leave has left.
func (r Result) Done() bool {
	for _, n := range r.Remaining {
		if n > 0 {
			return false
		}
	}
	return true
}

// Drainer drains nodes.
type Drainer struct {
	kube client.Client
	// api reads the API server itself: a node is empty only once it agrees.
	api client.Reader
	// evictions posts evictions; it is a client of the policy/v1 API.
	evictions rest.Interface
}

// New returns a Drainer. kube lists pods and VolumeAttachments by the indexes of
// nodeclaim.RegisterIndexes, through a cache; api reads the API server without one (a
// manager's APIReader); cs posts evictions.
func New(kube client.Client, api client.Reader, cs kubernetes.Interface) *Drainer {
	return &Drainer{kube: kube, api: api, evictions: cs.PolicyV1().RESTClient()}
}

// Drain makes one pass over the node's pods: it evicts the pods of the first wave that has
// any left and reports what remains. Once deadline has passed (zero: never), the pods left
// are deleted instead, with a grace period that ends at the deadline at the latest. Call it
// again until the result is Done.
//
// Pods are read from the cache, but a node the cache shows empty is read again from the API
// server before the pass says Done: after an API server outage a cache can lag by tens of
// seconds (its watch comes back with backoff), and a pod it does not show yet would be left
// on a node whose instance is then terminated (found by the randomized fault trials).
func (d *Drainer) Drain(ctx context.Context, node string, deadline time.Time, now time.Time) (Result, error) {
	res, err := d.pass(ctx, d.kube, node, deadline, now)
	if err != nil || !res.Done() {
		return res, err
	}
	return d.pass(ctx, d.api, node, deadline, now)
}

// pass is one pass of Drain over the node's pods as reader lists them.
func (d *Drainer) pass(ctx context.Context, reader client.Reader, node string, deadline time.Time, now time.Time) (Result, error) {
	pods := &corev1.PodList{}
	if err := reader.List(ctx, pods, client.MatchingFields{nodeclaim.PodNodeNameIndex: node}); err != nil {
		return Result{}, fmt.Errorf("listing pods of node %s: %w", node, err)
	}
	res := Result{Remaining: map[Wave]int{}, Blocked: map[string]string{}}
	byWave := map[Wave][]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !mustLeave(p) {
			continue
		}
		w := waveOf(p)
		res.Remaining[w]++
		byWave[w] = append(byWave[w], p)
	}
	forced := !deadline.IsZero() && !now.Before(deadline)
	for _, w := range []Wave{WaveWorkload, WaveDaemon, WaveCritical} {
		if len(byWave[w]) == 0 {
			continue
		}
		sort.Slice(byWave[w], func(i, j int) bool { return byWave[w][i].Name < byWave[w][j].Name })
		for _, p := range byWave[w] {
			if p.DeletionTimestamp != nil && !forced {
				continue
			}
			var err error
			if forced {
				err = d.delete(ctx, p)
				res.Forced++
			} else {
				err = d.evict(ctx, p, deadline, now, res.Blocked)
			}
			if err != nil {
				return res, err
			}
		}
		if !forced {
			// Later waves wait until this one is gone.
			break
		}
	}
	return res, nil
}

// mustLeave reports whether a pod has to leave the node before it goes: not finished, not a
// static (mirror) pod, and not tolerating the disruption taint (such pods stay to the end,
// by their own choice).
func mustLeave(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	for _, t := range p.Spec.Tolerations {
		// The disruption taint has no value, so the comparison operators (Gt, Lt) never match it.
		if t.ToleratesTaint(klog.Background(), &karpv1.DisruptedNoScheduleTaint, false) {
			return false
		}
	}
	return true
}

// waveOf places a pod in its wave.
func waveOf(p *corev1.Pod) Wave {
	switch p.Spec.PriorityClassName {
	case "system-cluster-critical", "system-node-critical":
		return WaveCritical
	}
	if nodeclaim.OwnedByDaemonSet(p) {
		return WaveDaemon
	}
	return WaveWorkload
}

// evict asks the Eviction API to evict a pod. A PodDisruptionBudget that refuses, and a pod
// marked do-not-disrupt, are noted in blocked and retried on the next pass.
func (d *Drainer) evict(ctx context.Context, p *corev1.Pod, deadline, now time.Time, blocked map[string]string) error {
	name := p.Namespace + "/" + p.Name
	if p.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" {
		blocked[name] = karpv1.DoNotDisruptAnnotationKey + " is set; the pod leaves when the grace period ends"
		return nil
	}
	eviction := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}, GracePeriodSeconds: gracePeriod(p, deadline, now)},
	}
	// A refusal carries Retry-After, which a client would otherwise wait out (ten times):
	// the drain loop asks again on its own schedule instead.
	err := d.evictions.Post().AbsPath("/api/v1").Namespace(p.Namespace).Resource("pods").Name(p.Name).
		SubResource("eviction").Body(eviction).MaxRetries(0).Do(ctx).Error()
	switch {
	case err == nil:
		log.FromContext(ctx).V(1).Info("evicted pod", "pod", name)
		return nil
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Gone already, or replaced by a pod of the same name.
		return nil
	case apierrors.IsTooManyRequests(err):
		blocked[name] = "a PodDisruptionBudget allows no disruption now"
		return nil
	}
	return fmt.Errorf("evicting pod %s: %w", name, err)
}

// delete deletes a pod whose node's grace period has ended.
func (d *Drainer) delete(ctx context.Context, p *corev1.Pod) error {
	zero := int64(0)
	err := d.kube.Delete(ctx, p, &client.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting pod %s/%s past the grace period: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// gracePeriod is the pod's own termination grace period, shortened so that it ends by the
// deadline; nil leaves the pod's own.
func gracePeriod(p *corev1.Pod, deadline, now time.Time) *int64 {
	if deadline.IsZero() || p.Spec.TerminationGracePeriodSeconds == nil {
		return nil
	}
	left := int64(deadline.Sub(now) / time.Second)
	if left < 0 {
		left = 0
	}
	if *p.Spec.TerminationGracePeriodSeconds <= left {
		return nil
	}
	return &left
}

// VolumesAttached returns the persistent volumes still attached to the node, which must
// detach before its instance is terminated so that their data is flushed. It reads the
// node's VolumeAttachments by index: every pass over every node going away would otherwise
// go through all of the cluster's.
func (d *Drainer) VolumesAttached(ctx context.Context, node string) ([]string, error) {
	list := &storagev1.VolumeAttachmentList{}
	if err := d.kube.List(ctx, list, client.MatchingFields{nodeclaim.VolumeAttachmentNodeNameIndex: node}); err != nil {
		return nil, fmt.Errorf("listing volume attachments of node %s: %w", node, err)
	}
	var out []string
	for _, va := range list.Items {
		if !va.Status.Attached {
			continue
		}
		if pv := va.Spec.Source.PersistentVolumeName; pv != nil {
			out = append(out, *pv)
		}
	}
	sort.Strings(out)
	return out, nil
}
