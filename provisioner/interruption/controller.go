// Package interruption reads EC2 interruption events from an SQS queue (spot interruption
// warnings, rebalance recommendations, AWS Health scheduled changes and instance state
// changes, as EventBridge delivers them) and hands the NodeClaims they affect to
// disruption: each is marked Interrupted with the reason and deadline, and those whose
// instance is going away are cordoned and deleted, so that the termination controller drains
// the node and the pods are planned again elsewhere.
package interruption

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	tailormetrics "github.com/tailor-autoscaler/tailor/provisioner/metrics"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/termination"
)

// ConditionTypeInterrupted is True on a NodeClaim whose instance received an interruption
// event; its reason says which and its message when the instance is expected to go.
const ConditionTypeInterrupted = "Interrupted"

// DeadlineAnnotationKey on a NodeClaim is the RFC 3339 time its instance is expected to be
// reclaimed or stopped, for the drain to finish before.
const DeadlineAnnotationKey = termination.InterruptionDeadlineAnnotationKey

// Event and condition reasons, Karpenter's.
const (
	ReasonSpotInterrupted         = "SpotInterrupted"
	ReasonRebalanceRecommendation = "SpotRebalanceRecommendation"
	ReasonScheduledChange         = "InstanceUnhealthy"
	ReasonInstanceStopping        = "InstanceStopping"
	ReasonInstanceTerminating     = "InstanceTerminating"
)

// Actions, as the tailor_interruption_actions_total metric labels them.
const (
	// ActionCordonAndDelete cordons the node and deletes the NodeClaim.
	ActionCordonAndDelete = "CordonAndDelete"
	// ActionMark only marks the NodeClaim and records events.
	ActionMark = "Mark"
	// ActionNone is taken for messages about no NodeClaim, states that need nothing, and
	// unknown messages.
	ActionNone = "NoAction"
)

// errorBackoff bounds the wait after a failed receive, which doubles with each failure: a
// passing failure costs a second, a queue that keeps failing (deleted, access denied) is
// asked once a minute rather than twice. The cap is shorter than other controllers': a spot
// interruption warns two minutes ahead, so a queue that recovers is read within a minute.
const (
	minErrorBackoff = time.Second
	maxErrorBackoff = time.Minute
)

// Options configure the controller.
type Options struct {
	// DeleteOnRebalance makes a rebalance recommendation delete the NodeClaim like a spot
	// interruption; by default it only marks it.
	DeleteOnRebalance bool
	// Registerer receives the metrics; nil means controller-runtime's metrics.Registry.
	Registerer prometheus.Registerer
	// Replacer, when set, launches capacity for the pods of a node going away before it is
	// drained, so they find room within the reclaim window.
	Replacer Replacer
}

// Replacer launches replacement capacity for the pods of a NodeClaim's node.
type Replacer interface {
	Prelaunch(ctx context.Context, nodeClaim string) error
}

// Controller reads the interruption queue. It runs on the elected leader only.
type Controller struct {
	kube     client.Client
	queue    Queue
	recorder record.EventRecorder
	clock    clock.Clock
	opts     Options
	metrics  *metrics
}

var _ manager.LeaderElectionRunnable = (*Controller)(nil)

// NewController returns a Controller reading queue. kube reads through a cache with the
// indexes of nodeclaim.RegisterIndexes.
func NewController(kube client.Client, queue Queue, recorder record.EventRecorder, clk clock.Clock, opts Options) (*Controller, error) {
	if opts.Registerer == nil {
		opts.Registerer = crmetrics.Registry
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	return &Controller{kube: kube, queue: queue, recorder: recorder, clock: clk, opts: opts, metrics: m}, nil
}

// Register adds the controller to the manager.
func (c *Controller) Register(mgr manager.Manager) error { return mgr.Add(c) }

// NeedLeaderElection is true: two readers would act on every message twice.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start long-polls the queue until ctx ends. Failures to receive are logged and retried with
// backoff; they never stop the reader.
func (c *Controller) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("interruption")
	ctx = log.IntoContext(ctx, logger)
	logger.Info("reading interruption queue")
	backoff := minErrorBackoff
	for ctx.Err() == nil {
		msgs, err := c.queue.Receive(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			logger.Error(err, "receiving interruption messages failed", "retryIn", backoff.String())
			select {
			case <-ctx.Done():
			case <-c.clock.After(backoff):
			}
			backoff = min(2*backoff, maxErrorBackoff)
			continue
		}
		backoff = minErrorBackoff
		c.HandleBatch(ctx, msgs)
	}
	return nil
}

// HandleBatch handles received messages and deletes those handled. A message whose handling
// failed stays on the queue and comes back after its visibility timeout.
func (c *Controller) HandleBatch(ctx context.Context, msgs []Received) {
	logger := log.FromContext(ctx)
	var done []Received
	var kinds []Kind
	for _, m := range msgs {
		kind, err := c.handle(ctx, m)
		if err != nil {
			logger.Error(err, "handling interruption message failed; it will be received again")
			continue
		}
		done = append(done, m)
		kinds = append(kinds, kind)
	}
	if len(done) == 0 {
		return
	}
	if err := c.queue.Delete(ctx, done); err != nil {
		logger.Error(err, "deleting handled interruption messages failed; they will be handled again")
		return
	}
	for _, k := range kinds {
		tailormetrics.KarpenterInterruptionDeleted.WithLabelValues(messageType(k)).Inc()
	}
}

// handle acts on one message and returns its kind. Unknown messages are logged and count
// as handled.
func (c *Controller) handle(ctx context.Context, r Received) (Kind, error) {
	logger := log.FromContext(ctx)
	msg, err := Parse(r.Body)
	if err != nil {
		c.received(KindUnknown)
		c.metrics.actions.WithLabelValues(ActionNone).Inc()
		logger.Info("ignoring unknown interruption message", "error", err.Error(), "body", truncate(r.Body, 512))
		c.observeLatency(r, KindUnknown)
		return KindUnknown, nil
	}
	c.received(msg.Kind)
	logger = logger.WithValues("event", msg.ID, "kind", msg.Kind)
	for _, id := range msg.InstanceIDs {
		action, err := c.handleInstance(log.IntoContext(ctx, logger.WithValues("instance", id)), msg, id)
		if err != nil {
			return msg.Kind, fmt.Errorf("handling %s of instance %s: %w", msg.Kind, id, err)
		}
		c.metrics.actions.WithLabelValues(action).Inc()
	}
	c.observeLatency(r, msg.Kind)
	return msg.Kind, nil
}

// received counts a message received, under Tailor's and Karpenter's names.
func (c *Controller) received(kind Kind) {
	c.metrics.messages.WithLabelValues(string(kind)).Inc()
	tailormetrics.KarpenterInterruptionReceived.WithLabelValues(messageType(kind), strconv.FormatBool(kind != KindUnknown)).Inc()
}

func (c *Controller) observeLatency(r Received, kind Kind) {
	if !r.SentAt.IsZero() {
		queued := max(c.clock.Since(r.SentAt), 0).Seconds()
		c.metrics.latency.Observe(queued)
		tailormetrics.KarpenterInterruptionQueueDuration.WithLabelValues(messageType(kind)).Observe(queued)
	}
}

// messageType is the message_type label of Karpenter's interruption metrics for a kind.
func messageType(kind Kind) string {
	switch kind {
	case KindSpotInterruption:
		return "spot_interrupted"
	case KindUnknown:
		return "no_op"
	default:
		return string(kind)
	}
}

// decision is what a message means for a NodeClaim.
type decision struct {
	action, reason, message string
}

func (c *Controller) decide(msg Message, instanceID string) decision {
	deadline := ""
	if !msg.Deadline.IsZero() {
		deadline = msg.Deadline.UTC().Format(time.RFC3339)
	}
	switch msg.Kind {
	case KindSpotInterruption:
		return decision{ActionCordonAndDelete, ReasonSpotInterrupted, fmt.Sprintf("spot instance %s is reclaimed at %s", instanceID, deadline)}
	case KindRebalanceRecommendation:
		action := ActionMark
		if c.opts.DeleteOnRebalance {
			action = ActionCordonAndDelete
		}
		return decision{action, ReasonRebalanceRecommendation, fmt.Sprintf("spot instance %s is at elevated risk of interruption", instanceID)}
	case KindScheduledChange:
		return decision{ActionCordonAndDelete, ReasonScheduledChange, fmt.Sprintf("instance %s has a scheduled change starting at %s", instanceID, deadline)}
	case KindStateChange:
		switch msg.State {
		case "stopping", "stopped":
			return decision{ActionCordonAndDelete, ReasonInstanceStopping, fmt.Sprintf("instance %s is %s", instanceID, msg.State)}
		case "shutting-down", "terminated":
			return decision{ActionCordonAndDelete, ReasonInstanceTerminating, fmt.Sprintf("instance %s is %s", instanceID, msg.State)}
		}
	}
	return decision{action: ActionNone}
}

// handleInstance marks, and if the instance is going away cordons and deletes, the instance's
// NodeClaim. It returns the action taken.
func (c *Controller) handleInstance(ctx context.Context, msg Message, instanceID string) (string, error) {
	logger := log.FromContext(ctx)
	d := c.decide(msg, instanceID)
	if d.action == ActionNone {
		logger.V(1).Info("interruption message needs no action", "state", msg.State)
		return ActionNone, nil
	}
	nc, err := c.nodeClaimOf(ctx, instanceID)
	if err != nil {
		return "", err
	}
	if nc == nil {
		logger.V(1).Info("interruption message is about no NodeClaim")
		return ActionNone, nil
	}
	logger = logger.WithValues("nodeClaim", klog.KObj(nc))
	if err := c.mark(ctx, nc, msg, d); err != nil {
		return "", err
	}
	node, err := nodeclaim.NodeOf(ctx, c.kube, nc)
	if err != nil {
		return "", err
	}
	eventType := corev1.EventTypeWarning
	if d.action == ActionMark {
		eventType = corev1.EventTypeNormal
	}
	c.recorder.Event(nc, eventType, d.reason, d.message)
	if node != nil {
		c.recorder.Event(node, eventType, d.reason, d.message)
	}
	if d.action == ActionMark {
		logger.Info("marked interrupted NodeClaim", "reason", d.reason)
		return ActionMark, nil
	}
	if node != nil {
		if err := nodeclaim.Cordon(ctx, c.kube, node); err != nil {
			return "", err
		}
	}
	if c.opts.Replacer != nil && nc.DeletionTimestamp == nil {
		// The instance goes whatever happens: a failed pre-launch only means the pods wait
		// for the provisioner once evicted.
		if err := c.opts.Replacer.Prelaunch(ctx, nc.Name); err != nil {
			logger.Error(err, "launching replacement capacity ahead of the drain")
		}
	}
	if nc.DeletionTimestamp == nil {
		if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			return "", fmt.Errorf("deleting NodeClaim %s: %w", nc.Name, err)
		}
		tailormetrics.NodeClaimDisrupted(nc, messageType(msg.Kind), "")
	}
	logger.Info("deleting interrupted NodeClaim", "reason", d.reason, "deadline", msg.Deadline)
	return ActionCordonAndDelete, nil
}

// nodeClaimOf returns the NodeClaim whose provider ID names the instance, or nil. It reads
// the cache's index by instance ID (nodeclaim.NodeClaimInstanceIDIndex): a burst of
// messages about a large cluster's instances does not go through every NodeClaim each.
func (c *Controller) nodeClaimOf(ctx context.Context, instanceID string) (*karpv1.NodeClaim, error) {
	claims := &karpv1.NodeClaimList{}
	if err := c.kube.List(ctx, claims, client.MatchingFields{nodeclaim.NodeClaimInstanceIDIndex: instanceID}); err != nil {
		return nil, fmt.Errorf("finding the NodeClaim of instance %s: %w", instanceID, err)
	}
	if len(claims.Items) == 0 {
		return nil, nil
	}
	return &claims.Items[0], nil
}

// mark records the interruption on the NodeClaim: the Interrupted condition and the deadline
// annotation.
func (c *Controller) mark(ctx context.Context, nc *karpv1.NodeClaim, msg Message, d decision) error {
	if !msg.Deadline.IsZero() && nc.Annotations[DeadlineAnnotationKey] == "" {
		patch := client.MergeFrom(nc.DeepCopy())
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[DeadlineAnnotationKey] = msg.Deadline.UTC().Format(time.RFC3339)
		if err := c.kube.Patch(ctx, nc, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("annotating NodeClaim %s: %w", nc.Name, err)
		}
	}
	patch := client.MergeFrom(nc.DeepCopy())
	nodeclaim.SetCondition(nc, ConditionTypeInterrupted, metav1.ConditionTrue, d.reason, d.message)
	if err := c.kube.Status().Patch(ctx, nc, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("marking NodeClaim %s interrupted: %w", nc.Name, err)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// metrics are the controller's Prometheus collectors.
type metrics struct {
	messages *prometheus.CounterVec
	actions  *prometheus.CounterVec
	latency  prometheus.Histogram
}

// Collectors are the metrics a controller registers (new ones, not the controller's), for
// the metrics reference.
func Collectors() []prometheus.Collector {
	m := unregisteredMetrics()
	return []prometheus.Collector{m.messages, m.actions, m.latency}
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := unregisteredMetrics()
	var err error
	if m.messages, err = register(reg, m.messages); err != nil {
		return nil, err
	}
	if m.actions, err = register(reg, m.actions); err != nil {
		return nil, err
	}
	if m.latency, err = register(reg, m.latency); err != nil {
		return nil, err
	}
	return m, nil
}

func unregisteredMetrics() *metrics {
	return &metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tailor_interruption_messages_total",
			Help: "Interruption queue messages received, by kind (spot_interruption, rebalance_recommendation, scheduled_change, state_change, unknown).",
		}, []string{"kind"}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tailor_interruption_actions_total",
			Help: "Actions taken on interruption messages, by action (CordonAndDelete, Mark, NoAction).",
		}, []string{"action"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tailor_interruption_message_latency_seconds",
			Help:    "Time from a message's arrival in the queue to its handling.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}),
	}
}

// register registers c, or returns the collector already registered under its name (a
// second controller in one process, as in tests).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		var zero C
		return zero, fmt.Errorf("registering interruption metrics: %w", err)
	}
	return c, nil
}
