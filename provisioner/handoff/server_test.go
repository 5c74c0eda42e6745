package handoff

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	provisionerv1 "github.com/tailor-autoscaler/tailor/proto/tailor/provisioner/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/nomination"
	"github.com/tailor-autoscaler/tailor/provisioner/provisioning"
)

// fakeSubmitter queues submissions by pod UID, as the provisioner does, until drained.
type fakeSubmitter struct {
	mu     sync.Mutex
	queued map[types.UID]provisioning.Submission
}

func newFakeSubmitter() *fakeSubmitter {
	return &fakeSubmitter{queued: map[types.UID]provisioning.Submission{}}
}

func (f *fakeSubmitter) Submit(subs []provisioning.Submission) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range subs {
		f.queued[s.Pod.UID] = s
	}
	return len(subs)
}

func (f *fakeSubmitter) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queued)
}

// drain empties the queue, as a batch does.
func (f *fakeSubmitter) drain() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.queued)
}

func encodedPod(t testing.TB, name string) []byte {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	b, err := pod.Marshal()
	require.NoError(t, err)
	return b
}

func request(t testing.TB, prefix string, n int) *provisionerv1.SubmitPodsRequest {
	t.Helper()
	req := &provisionerv1.SubmitPodsRequest{Profile: "tailor"}
	for i := range n {
		req.Pods = append(req.Pods, &provisionerv1.UnschedulablePod{Pod: encodedPod(t, fmt.Sprintf("%s-%d", prefix, i))})
	}
	return req
}

// serve serves srv on a socket in a temporary directory until the test ends and returns the
// socket's path and a client connected to it.
func serve(t *testing.T, srv *Server) (string, provisionerv1.ProvisionerClient) {
	t.Helper()
	dir, err := os.MkdirTemp("", "handoff")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	socket := filepath.Join(dir, "provisioner.sock")
	ctx, cancel := context.WithCancel(ctrllog.IntoContext(context.Background(), logr.Discard()))
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, socket, srv) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	client := provisionerv1.NewProvisionerClient(conn)
	// WaitForReady rides over the moment before the server listens.
	_, err = client.SubmitPods(ctx, &provisionerv1.SubmitPodsRequest{}, grpc.WaitForReady(true))
	require.NoError(t, err)
	return socket, client
}

func TestServeCreatesAnOwnerOnlySocket(t *testing.T) {
	socket, _ := serve(t, NewServer(newFakeSubmitter(), nomination.NewTracker(clock.RealClock{}), Options{}))
	info, err := os.Stat(socket)
	require.NoError(t, err)
	if diff := cmp.Diff(os.FileMode(0o600), info.Mode().Perm()); diff != "" {
		t.Errorf("socket permissions (-want +got):\n%s", diff)
	}
}

// TestSubmitPodsBoundsTheQueue floods the server from many goroutines: it queues pods up to
// its limit, refuses the rest with ResourceExhausted, and takes normal traffic again once a
// batch has emptied the queue.
func TestSubmitPodsBoundsTheQueue(t *testing.T) {
	const limit, perRequest, clients, requestsEach = 100, 7, 8, 10
	submitter := newFakeSubmitter()
	_, client := serve(t, NewServer(submitter, nomination.NewTracker(clock.RealClock{}), Options{MaxQueuedPods: limit}))
	ctx := context.Background()

	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted, refusals := 0, map[string]int{}
	for c := range clients {
		wg.Go(func() {
			for r := range requestsEach {
				resp, err := client.SubmitPods(ctx, request(t, fmt.Sprintf("flood-%d-%d", c, r), perRequest))
				mu.Lock()
				if err != nil {
					msg := status.Convert(err).Message()
					// A refusal that does not say how many more would pass counts under its
					// whole message, which the comparison below then names.
					if i := strings.Index(msg, " more would pass"); i >= 0 {
						msg = msg[i:]
					}
					refusals[status.Code(err).String()+": "+msg]++
				} else {
					accepted += int(resp.GetAccepted())
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	// 14 requests of 7 fit in 100; the other 66 of the 80 are refused.
	require.Equal(t, limit/perRequest*perRequest, accepted)
	require.Equal(t, accepted, submitter.Pending())
	want := map[string]int{"ResourceExhausted: " + " more would pass the limit of 100 (--max-queued-pods); submit them again after the next batch": clients*requestsEach - limit/perRequest}
	if diff := cmp.Diff(want, refusals); diff != "" {
		t.Errorf("refusals (-want +got):\n%s", diff)
	}

	_, err := client.SubmitPods(ctx, request(t, "one-more", 3))
	require.Equal(t, codes.ResourceExhausted, status.Code(err))
	require.Equal(t, "98 pods are queued and 3 more would pass the limit of 100 (--max-queued-pods); submit them again after the next batch", status.Convert(err).Message())

	submitter.drain()
	resp, err := client.SubmitPods(ctx, request(t, "after-batch", perRequest))
	require.NoError(t, err)
	require.Equal(t, int32(perRequest), resp.GetAccepted())
}

func TestSubmitPodsRefusesWhatItCannotDecode(t *testing.T) {
	tests := []struct {
		name string
		req  *provisionerv1.SubmitPodsRequest
		want string
	}{
		{name: "a bad label selector",
			req:  &provisionerv1.SubmitPodsRequest{NodePools: &provisionerv1.NodePoolSelector{LabelSelector: "team in (("}},
			want: `node_pools.label_selector "team in ((" is not a label selector`},
		{name: "bytes that are not a pod",
			req:  &provisionerv1.SubmitPodsRequest{Pods: []*provisionerv1.UnschedulablePod{{Pod: []byte{0xff, 0xff}}}},
			want: "pods[0].pod is not a protobuf-encoded v1 Pod"},
		{name: "a pod with no uid",
			req:  &provisionerv1.SubmitPodsRequest{Pods: []*provisionerv1.UnschedulablePod{{Pod: mustMarshal(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}})}}},
			want: "pods[0].pod has no name or uid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			subs, err := submissions(tt.req)
			require.Nil(t, subs)
			require.Equal(t, codes.InvalidArgument, status.Code(err))
			require.True(t, strings.HasPrefix(status.Convert(err).Message(), tt.want), "message %q does not start with %q", status.Convert(err).Message(), tt.want)
		})
	}
}

func mustMarshal(t testing.TB, pod *corev1.Pod) []byte {
	t.Helper()
	b, err := pod.Marshal()
	require.NoError(t, err)
	return b
}

// FuzzSubmissions decodes what a misbehaving client may send, as the gRPC server receives it
// (the request's wire bytes): either an InvalidArgument error that names the field, or one
// submission per pod, each with a name and uid, that encodes back to an equal pod.
func FuzzSubmissions(f *testing.F) {
	seeds := []*provisionerv1.SubmitPodsRequest{
		request(f, "typical", 2),
		{},
		{Profile: "p", NodePools: &provisionerv1.NodePoolSelector{Names: []string{"a", ""}, LabelSelector: "team=batch,tier notin (x)"}, Pods: request(f, "sel", 1).Pods},
		{NodePools: &provisionerv1.NodePoolSelector{LabelSelector: "!!=="}},
		{Pods: []*provisionerv1.UnschedulablePod{{}}},
		{Pods: []*provisionerv1.UnschedulablePod{{Pod: []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}}}},
		{Pods: []*provisionerv1.UnschedulablePod{{Pod: mustMarshal(f, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u"}})}}},
		{Pods: []*provisionerv1.UnschedulablePod{{Pod: hugePod(f), StaleNode: "ip-10-0-0-1", Message: strings.Repeat("x", 1<<10),
			Rejections: []*provisionerv1.Rejection{{Plugin: "NodeResourcesFit", NodeCount: -1}}}}},
	}
	for _, s := range seeds {
		b, err := proto.Marshal(s)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte{0x1a, 0x03, 0x0a, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, wire []byte) {
		req := &provisionerv1.SubmitPodsRequest{}
		if err := proto.Unmarshal(wire, req); err != nil {
			return // gRPC refuses it before the handler sees it
		}
		subs, err := submissions(req)
		if err != nil {
			require.Nil(t, subs)
			require.Equal(t, codes.InvalidArgument, status.Code(err), "error %v", err)
			msg := status.Convert(err).Message()
			require.True(t, strings.HasPrefix(msg, "pods[") || strings.HasPrefix(msg, "node_pools.label_selector "), "message %q names no field", msg)
			return
		}
		require.Len(t, subs, len(req.GetPods()))
		for i, s := range subs {
			require.NotNil(t, s.Pod)
			require.NotEmpty(t, s.Pod.Name)
			require.NotEmpty(t, s.Pod.UID)
			require.Equal(t, req.GetProfile(), s.Profile)
			require.Equal(t, req.GetPods()[i].GetStaleNode(), s.StaleNode)
			b, err := s.Pod.Marshal()
			require.NoError(t, err)
			again := &corev1.Pod{}
			require.NoError(t, again.Unmarshal(b))
			b2, err := again.Marshal()
			require.NoError(t, err)
			require.Equal(t, b, b2, "pods[%d] encodes differently once decoded again", i)
			// The selector the provisioner matches NodePools with reads back as itself.
			if s.NodePools.Labels != nil {
				parsed, err := labels.Parse(s.NodePools.Labels.String())
				require.NoError(t, err)
				require.Equal(t, s.NodePools.Labels.String(), parsed.String())
			}
		}
	})
}

// hugePod has many containers with many resources, as a pod near the message size limit.
func hugePod(t testing.TB) []byte {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "huge", UID: "huge"}}
	for i := range 200 {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Image: strings.Repeat("i", 100)})
	}
	return mustMarshal(t, pod)
}
