// Package handoff serves the gRPC contract (tailor.provisioner.v1) on which the scheduler
// plugin hands unschedulable pods to the provisioner and learns where they will land.
package handoff

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/log"

	provisionerv1 "github.com/tailor-autoscaler/tailor/proto/tailor/provisioner/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/metrics"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
	"github.com/tailor-autoscaler/tailor/provisioner/provisioning"
)

// Submitter queues pods for provisioning.
type Submitter interface {
	// Submit queues subs and returns how many were queued.
	Submit(subs []provisioning.Submission) int
	// Pending returns how many pods are queued for the next batch.
	Pending() int
}

// Nominations is where planned pods will land.
type Nominations interface {
	Subscribe() (snapshot []nomination.Nomination, updates <-chan nomination.Update, cancel func())
}

// DefaultMaxQueuedPods is the --max-queued-pods default: a scale-up of 5,000 nodes' pods
// several times over, while their decoded objects (a few KiB each) stay within a few
// hundred MiB.
const DefaultMaxQueuedPods = 50000

// Options configure a Server.
type Options struct {
	// MaxQueuedPods bounds the pods queued for the next batch (--max-queued-pods): a
	// submission that would take the queue past it is refused with ResourceExhausted.
	// 0 is DefaultMaxQueuedPods.
	MaxQueuedPods int
}

// Server implements the Provisioner service.
type Server struct {
	provisionerv1.UnimplementedProvisionerServer
	submitter     Submitter
	nominations   Nominations
	maxQueuedPods int
	// submitting makes checking the queue's length and queueing one step, so concurrent
	// submissions cannot together pass the bound.
	submitting sync.Mutex
	// closing ends nomination streams when the server stops: they would otherwise keep a
	// graceful stop waiting for as long as the scheduler stays connected.
	closing   chan struct{}
	closeOnce sync.Once
}

// NewServer returns a Server.
func NewServer(submitter Submitter, nominations Nominations, opts Options) *Server {
	if opts.MaxQueuedPods <= 0 {
		opts.MaxQueuedPods = DefaultMaxQueuedPods
	}
	return &Server{submitter: submitter, nominations: nominations, maxQueuedPods: opts.MaxQueuedPods, closing: make(chan struct{})}
}

// SubmitPods decodes the pods and queues them, unless they would take the queue past its
// bound.
func (s *Server) SubmitPods(ctx context.Context, req *provisionerv1.SubmitPodsRequest) (*provisionerv1.SubmitPodsResponse, error) {
	subs, err := submissions(req)
	if err != nil {
		return nil, err
	}
	s.submitting.Lock()
	queued := s.submitter.Pending()
	if queued+len(subs) > s.maxQueuedPods {
		s.submitting.Unlock()
		return nil, status.Errorf(codes.ResourceExhausted,
			"%d pods are queued and %d more would pass the limit of %d (--max-queued-pods); submit them again after the next batch", queued, len(subs), s.maxQueuedPods)
	}
	accepted := s.submitter.Submit(subs)
	s.submitting.Unlock()
	log.FromContext(ctx).V(1).Info("pods submitted", "profile", req.GetProfile(), "pods", len(subs), "accepted", accepted)
	return &provisionerv1.SubmitPodsResponse{Accepted: int32(accepted)}, nil
}

// WatchNominations streams a snapshot of the nominations, then changes, until the client
// leaves. A client that falls behind is cut off with Unavailable and must reconnect.
func (s *Server) WatchNominations(_ *provisionerv1.WatchNominationsRequest, stream grpc.ServerStreamingServer[provisionerv1.WatchNominationsResponse]) error {
	snapshot, updates, cancel := s.nominations.Subscribe()
	defer cancel()
	if err := stream.Send(&provisionerv1.WatchNominationsResponse{Snapshot: true, Nominations: toProto(snapshot)}); err != nil {
		return err
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case <-s.closing:
			return status.Error(codes.Unavailable, "the provisioner is shutting down; reconnect")
		case u, ok := <-updates:
			if !ok {
				return status.Error(codes.Unavailable, "nomination stream fell behind; reconnect for a fresh snapshot")
			}
			resp := &provisionerv1.WatchNominationsResponse{Nominations: toProto(u.Nominated)}
			for _, p := range u.Withdrawn {
				resp.Withdrawn = append(resp.Withdrawn, podRef(p))
			}
			if err := stream.Send(resp); err != nil {
				return err
			}
		}
	}
}

// submissions decodes a request into what the provisioner queues. A request it cannot use
// is an InvalidArgument error naming the field.
func submissions(req *provisionerv1.SubmitPodsRequest) ([]provisioning.Submission, error) {
	sel := provisioning.NodePoolSelector{Names: req.GetNodePools().GetNames()}
	if expr := req.GetNodePools().GetLabelSelector(); expr != "" {
		parsed, err := labels.Parse(expr)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "node_pools.label_selector %q is not a label selector: %v", expr, err)
		}
		sel.Labels = parsed
	}
	subs := make([]provisioning.Submission, 0, len(req.GetPods()))
	for i, p := range req.GetPods() {
		pod := &corev1.Pod{}
		if err := pod.Unmarshal(p.GetPod()); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "pods[%d].pod is not a protobuf-encoded v1 Pod: %v", i, err)
		}
		if pod.UID == "" || pod.Name == "" {
			return nil, status.Errorf(codes.InvalidArgument, "pods[%d].pod has no name or uid", i)
		}
		subs = append(subs, provisioning.Submission{
			Pod: pod, Profile: req.GetProfile(), NodePools: sel, StaleNode: p.GetStaleNode(), SchedulerMessage: p.GetMessage(),
			StaleRejection: provisioning.StaleRejection{Plugin: p.GetStaleNodeRejection().GetPlugin(), Reason: p.GetStaleNodeRejection().GetReason()},
		})
	}
	return subs, nil
}

func toProto(ns []nomination.Nomination) []*provisionerv1.Nomination {
	out := make([]*provisionerv1.Nomination, len(ns))
	for i, n := range ns {
		out[i] = &provisionerv1.Nomination{Pod: podRef(n.Pod), NodeName: n.NodeName, NodeClaim: n.NodeClaim}
	}
	return out
}

func podRef(p nomination.Pod) *provisionerv1.PodReference {
	return &provisionerv1.PodReference{Namespace: p.Namespace, Name: p.Name, Uid: string(p.UID)}
}

// Serve serves srv on a unix socket at path until ctx ends. A socket file left by an earlier
// run is replaced. Only the owner may connect (0600): the scheduler runs in the same pod as
// the same user.
func Serve(ctx context.Context, path string, srv *Server) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("creating socket directory: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing stale socket %s: %w", path, err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return fmt.Errorf("setting socket permissions: %w", err)
	}
	g := grpc.NewServer(
		grpc.ChainUnaryInterceptor(metrics.GRPC.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(metrics.GRPC.StreamServerInterceptor()),
	)
	provisionerv1.RegisterProvisionerServer(g, srv)
	metrics.GRPC.InitializeMetrics(g)
	go func() {
		<-ctx.Done()
		srv.closeOnce.Do(func() { close(srv.closing) })
		g.GracefulStop()
	}()
	log.FromContext(ctx).Info("serving the provisioner API", "socket", path)
	if err := g.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("serving gRPC: %w", err)
	}
	return nil
}
