package nodeprovisioning

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	provisionerv1 "github.com/tailor-autoscaler/tailor/proto/tailor/provisioner/v1"
)

// maxPodsPerSubmission caps the pods of one SubmitPods call.
const maxPodsPerSubmission = 500

// sidecarOptions configure the connection to the provisioner sidecar.
type sidecarOptions struct {
	socket    string
	timeout   time.Duration
	nodePools *provisionerv1.NodePoolSelector
	// onChange is told about pods whose nomination appeared or was withdrawn.
	onChange func([]types.UID)
	// waiting reports whether a pod still waits for a node: a nomination that arrives for a
	// pod bound or deleted meanwhile would hold its node for good. Nil takes every pod as
	// waiting.
	waiting func(types.UID) bool
}

// sidecar is the plugin's side of the gRPC contract. Submissions queue in memory and are
// sent in the background; nominations stream in and are kept for PostFilter to read. Both
// survive the sidecar going away: the queue is retried and, when the nomination stream
// reconnects, every pod handed over and not yet nominated is handed over again.
type sidecar struct {
	opts   sidecarOptions
	client provisionerv1.ProvisionerClient
	wake   chan struct{}

	mu sync.Mutex
	// queued pods wait to be sent; handedOff pods were sent and wait for a nomination.
	queued, handedOff map[types.UID]*submission
	nominations       map[types.UID]Nomination
	// held counts, per node name, the pods nominated to it.
	held map[string]int
	// nominated is len(nominations), written under mu and read without it: Filter asks
	// about every node for every pod, and most of the time nothing is nominated.
	nominated atomic.Int64
}

type submission struct {
	pod     *provisionerv1.UnschedulablePod
	profile string
}

var _ provisioner = &sidecar{}

// dialSidecar connects lazily to the sidecar's socket and starts the background loops; they
// stop with ctx.
func dialSidecar(ctx context.Context, opts sidecarOptions) (*sidecar, error) {
	conn, err := grpc.NewClient("unix://"+opts.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("connecting to the provisioner at %s: %w", opts.socket, err)
	}
	s := newSidecar(provisionerv1.NewProvisionerClient(conn), opts)
	go func() {
		<-ctx.Done()
		_ = conn.Close()
	}()
	go s.sendLoop(ctx)
	go s.watchLoop(ctx)
	return s, nil
}

func newSidecar(client provisionerv1.ProvisionerClient, opts sidecarOptions) *sidecar {
	return &sidecar{
		opts: opts, client: client, wake: make(chan struct{}, 1),
		queued: map[types.UID]*submission{}, handedOff: map[types.UID]*submission{},
		nominations: map[types.UID]Nomination{}, held: map[string]int{},
	}
}

// Submit queues the pod for the sidecar. It never blocks on the network.
func (s *sidecar) Submit(pod *v1.Pod, rejections []*provisionerv1.Rejection, message string, stale *provisionerv1.Rejection) {
	raw, err := pod.Marshal()
	if err != nil {
		klog.Background().Error(err, "encoding pod for the provisioner", "pod", klog.KObj(pod))
		return
	}
	sub := &provisionerv1.UnschedulablePod{Pod: raw, Rejections: rejections, Message: message}
	if stale != nil && len(stale.Nodes) > 0 {
		sub.StaleNode, sub.StaleNodeRejection = stale.Nodes[0], stale
	}
	s.mu.Lock()
	delete(s.handedOff, pod.UID)
	s.queued[pod.UID] = &submission{pod: sub, profile: pod.Spec.SchedulerName}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Nomination returns the pod's planned node, if known.
func (s *sidecar) Nomination(uid types.UID) (Nomination, bool) {
	if s.nominated.Load() == 0 {
		return Nomination{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nominations[uid]
	return n, ok
}

// Held returns how many pods are nominated to the node and not bound yet.
func (s *sidecar) Held(nodeName string) int {
	// Only nominated pods hold nodes.
	if s.nominated.Load() == 0 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[nodeName]
}

// Forget drops everything known about the pod.
func (s *sidecar) Forget(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.queued, uid)
	delete(s.handedOff, uid)
	s.dropNomination(uid)
}

// setNomination records a pod's nomination; s.mu must be held.
func (s *sidecar) setNomination(uid types.UID, n Nomination) {
	s.dropNomination(uid)
	s.nominations[uid] = n
	s.nominated.Store(int64(len(s.nominations)))
	if n.launched() {
		s.held[n.NodeName]++
	}
}

// dropNomination removes a pod's nomination; s.mu must be held.
func (s *sidecar) dropNomination(uid types.UID) {
	n, ok := s.nominations[uid]
	if !ok {
		return
	}
	delete(s.nominations, uid)
	s.nominated.Store(int64(len(s.nominations)))
	if !n.launched() {
		return
	}
	if s.held[n.NodeName]--; s.held[n.NodeName] <= 0 {
		delete(s.held, n.NodeName)
	}
}

// sendLoop sends queued pods, retrying with backoff while the sidecar is unreachable.
func (s *sidecar) sendLoop(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("socket", s.opts.socket)
	backoff := newBackoff()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		for {
			batch := s.takeQueued()
			if len(batch) == 0 {
				break
			}
			if err := s.send(ctx, batch); err != nil {
				s.requeue(batch)
				delay := backoff.Step()
				logger.V(2).Info("provisioner unreachable; will retry", "pods", len(batch), "retryIn", delay, "err", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(delay):
				}
				continue
			}
			backoff = newBackoff()
		}
	}
}

func newBackoff() *wait.Backoff {
	return &wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 20, Cap: 5 * time.Second}
}

func (s *sidecar) takeQueued() map[types.UID]*submission {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[types.UID]*submission{}
	for uid, sub := range s.queued {
		if len(out) == maxPodsPerSubmission {
			break
		}
		out[uid] = sub
		delete(s.queued, uid)
	}
	return out
}

func (s *sidecar) requeue(batch map[types.UID]*submission) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid, sub := range batch {
		if _, newer := s.queued[uid]; !newer {
			s.queued[uid] = sub
		}
	}
}

// send submits a batch, one request per scheduler profile.
func (s *sidecar) send(ctx context.Context, batch map[types.UID]*submission) error {
	byProfile := map[string][]*provisionerv1.UnschedulablePod{}
	for _, sub := range batch {
		byProfile[sub.profile] = append(byProfile[sub.profile], sub.pod)
	}
	for profile, pods := range byProfile {
		callCtx, cancel := context.WithTimeout(ctx, s.opts.timeout)
		_, err := s.client.SubmitPods(callCtx, &provisionerv1.SubmitPodsRequest{Profile: profile, NodePools: s.opts.nodePools, Pods: pods})
		cancel()
		if err != nil {
			return fmt.Errorf("submitting pods: %w", err)
		}
	}
	s.mu.Lock()
	for uid, sub := range batch {
		if _, requeued := s.queued[uid]; !requeued {
			s.handedOff[uid] = sub
		}
	}
	s.mu.Unlock()
	return nil
}

// watchLoop follows the nomination stream, reconnecting with backoff.
func (s *sidecar) watchLoop(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("socket", s.opts.socket)
	backoff := newBackoff()
	for ctx.Err() == nil {
		received, err := s.watch(ctx)
		if ctx.Err() != nil {
			return
		}
		if received {
			backoff = newBackoff()
		}
		delay := backoff.Step()
		logger.V(2).Info("nomination stream ended; reconnecting", "retryIn", delay, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// watch reads one nomination stream until it ends, and reports whether anything arrived.
func (s *sidecar) watch(ctx context.Context) (bool, error) {
	stream, err := s.client.WatchNominations(ctx, &provisionerv1.WatchNominationsRequest{})
	if err != nil {
		return false, fmt.Errorf("opening nomination stream: %w", err)
	}
	received := false
	for {
		resp, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return received, nil
			}
			return received, fmt.Errorf("reading nomination stream: %w", err)
		}
		received = true
		s.opts.onChange(s.apply(resp))
	}
}

// apply records a stream response and returns the pods whose nomination changed. A
// snapshot replaces every nomination and hands over again every pod it does not cover:
// the sidecar may have restarted and lost them.
func (s *sidecar) apply(resp *provisionerv1.WatchNominationsResponse) []types.UID {
	s.mu.Lock()
	defer s.mu.Unlock()
	var changed []types.UID
	if resp.GetSnapshot() {
		for uid := range s.nominations {
			changed = append(changed, uid)
		}
		s.nominations, s.held = map[types.UID]Nomination{}, map[string]int{}
		s.nominated.Store(0)
	}
	for _, n := range resp.GetNominations() {
		uid := types.UID(n.GetPod().GetUid())
		if s.opts.waiting != nil && !s.opts.waiting(uid) {
			s.dropNomination(uid)
			continue
		}
		s.setNomination(uid, Nomination{NodeName: n.GetNodeName(), NodeClaim: n.GetNodeClaim()})
		delete(s.handedOff, uid)
		changed = append(changed, uid)
	}
	for _, p := range resp.GetWithdrawn() {
		uid := types.UID(p.GetUid())
		s.dropNomination(uid)
		changed = append(changed, uid)
	}
	if resp.GetSnapshot() && len(s.handedOff) > 0 {
		for uid, sub := range s.handedOff {
			if _, ok := s.queued[uid]; !ok {
				s.queued[uid] = sub
			}
		}
		s.handedOff = map[types.UID]*submission{}
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return changed
}
