package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/tailor-autoscaler/tailor/provisioner/surge"
	"github.com/tailor-autoscaler/tailor/test/localaws"
	"github.com/tailor-autoscaler/tailor/test/localstack"
	"github.com/tailor-autoscaler/tailor/test/rejectfilter"
)

// admin is a client of the local endpoint's admin API.
type admin struct{ endpoint string }

// do sends a request to the admin API and decodes the JSON answer into out, when not nil.
func (a admin) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.endpoint+"/_admin/"+path, body)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s /_admin/%s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return &adminError{Method: method, Path: path, Status: resp.StatusCode, Body: string(bytes.TrimSpace(raw))}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}

// adminError is a request the admin API refused.
type adminError struct {
	Method, Path string
	Status       int
	Body         string
}

func (e *adminError) Error() string {
	return fmt.Sprintf("%s /_admin/%s: %d %s: %s", e.Method, e.Path, e.Status, http.StatusText(e.Status), e.Body)
}

// isNotFound reports whether the admin API answered 404: the instance asked for is gone.
func isNotFound(err error) bool {
	var ae *adminError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

func (a admin) instances(ctx context.Context) ([]localaws.InstanceSummary, error) {
	var out []localaws.InstanceSummary
	return out, a.do(ctx, http.MethodGet, "instances", nil, &out)
}

// live lists the pending and running instances.
func (a admin) live(ctx context.Context) ([]localaws.InstanceSummary, error) {
	all, err := a.instances(ctx)
	var out []localaws.InstanceSummary
	for _, i := range all {
		if i.State == "pending" || i.State == "running" {
			out = append(out, i)
		}
	}
	return out, err
}

// ec2Faults are the local endpoint's faults as the trial sets them: every field is sent, so
// a PATCH lifts what is not set.
type ec2Faults struct {
	ThrottleRate      float64                           `json:"throttleRate"`
	FleetMaxInstances *int                              `json:"fleetMaxInstances"`
	LaunchLatency     localaws.Duration                 `json:"launchLatency"`
	NeverRegisterNext int                               `json:"neverRegisterNext"`
	FailActions       map[string]localaws.ActionFailure `json:"failActions"`
}

// injector carries out a trial's faults on the stack. Stack methods are not safe for
// concurrent use, so process faults take mu.
type injector struct {
	stack *localstack.Stack
	cs    kubernetes.Interface
	admin admin
	queue string

	mu sync.Mutex
	// ec2 is the EC2 faults in force; killedNodes the Nodes of instances the faults killed,
	// reclaimed or warned of their reclaim.
	ec2         ec2Faults
	killedNodes map[string]bool
	// injected counts faults by kind; skipped those that found nothing to hit (no spot
	// instance to reclaim, no replacement under way to interrupt).
	injected map[FaultKind]int
	skipped  map[FaultKind]int
	// restarts are the components that ended on their own and were started again, with how
	// they ended, since the last reset; restartsTotal counts them over the run.
	restarts      map[string][]string
	restartsTotal map[string]int
}

func newInjector(stack *localstack.Stack, cs kubernetes.Interface, queue string) *injector {
	return &injector{
		stack: stack, cs: cs, admin: admin{endpoint: stack.AWSEndpoint}, queue: queue,
		killedNodes: map[string]bool{},
		injected:    map[FaultKind]int{}, skipped: map[FaultKind]int{},
		restarts: map[string][]string{}, restartsTotal: map[string]int{},
	}
}

// run strikes each fault at its moment after start and lifts it when it ends; it returns
// once every fault is over, with the errors of the injections that failed.
func (in *injector) run(ctx context.Context, start time.Time, faults []Fault) error {
	var wg sync.WaitGroup
	errs := make([]error, len(faults))
	for i, f := range faults {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !sleepUntil(ctx, start.Add(f.At)) {
				return
			}
			lift, err := in.strike(ctx, f)
			if err != nil {
				errs[i] = fmt.Errorf("injecting %s: %w", f, err)
				return
			}
			if lift == nil {
				return
			}
			// A fault that waited for something to hit lasts its span from when it struck.
			end := start.Add(f.End())
			if struck := time.Now(); struck.Add(f.For).After(end) {
				end = struck.Add(f.For)
			}
			sleepUntil(ctx, end)
			if err := lift(context.WithoutCancel(ctx)); err != nil {
				errs[i] = fmt.Errorf("lifting %s: %w", f, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// sleepUntil waits for the moment and reports whether it came before the context ended.
func sleepUntil(ctx context.Context, at time.Time) bool {
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// strike injects a fault and returns what lifts it (nil when it needs no lifting).
func (in *injector) strike(ctx context.Context, f Fault) (func(context.Context) error, error) {
	switch f.Kind {
	case KillProvisioner, KillScheduler, RestartAPIServer, RestartEtcd:
		name := map[FaultKind]string{
			KillProvisioner: localstack.ProvisionerOf(f.Replica), KillScheduler: localstack.SchedulerOf(f.Replica),
			RestartAPIServer: localstack.APIServer, RestartEtcd: localstack.Etcd,
		}[f.Kind]
		in.mu.Lock()
		in.stack.Kill(name)
		in.injected[f.Kind]++
		in.mu.Unlock()
		return func(ctx context.Context) error { return in.start(ctx, name) }, nil
	case RemoveSocket:
		in.mu.Lock()
		err := os.Remove(in.stack.SocketOf(f.Replica))
		in.injected[f.Kind]++
		in.mu.Unlock()
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		name := localstack.ProvisionerOf(f.Replica)
		return func(ctx context.Context) error {
			in.mu.Lock()
			in.stack.Kill(name)
			in.mu.Unlock()
			return in.start(ctx, name)
		}, nil
	case EC2Throttle, EC2ServerError, EC2PartialFleet, EC2LaunchLatency, EC2NeverRegister:
		if err := in.setEC2(ctx, f, true); err != nil {
			return nil, err
		}
		return func(ctx context.Context) error { return in.setEC2(ctx, f, false) }, nil
	case EC2Capacity:
		return in.capacity(ctx, f)
	case InstanceDies, SpotWarning, SpotNoWarning:
		return nil, in.reclaim(ctx, f)
	case UnmodelledRejection:
		return nil, in.createRejected(ctx)
	case KillLeaderMidReplacement:
		return in.killLeaderMidReplacement(ctx, f)
	}
	return nil, fmt.Errorf("unknown fault kind %q", f.Kind)
}

// start starts a component again, retrying while what it needs is itself restarting.
func (in *injector) start(ctx context.Context, name string) error {
	var err error
	for range 5 {
		in.mu.Lock()
		if running, _ := in.stack.Running(name); running {
			in.mu.Unlock()
			return nil
		}
		err = in.stack.Start(ctx, name)
		in.mu.Unlock()
		if err == nil {
			return nil
		}
		in.mu.Lock()
		in.stack.Kill(name)
		in.mu.Unlock()
		time.Sleep(2 * time.Second)
	}
	return err
}

// copyWait bounds how long a KillLeaderMidReplacement fault waits for a copy to appear: a
// drift takes the node of the trial's pod replaced before its eviction within about a
// minute of the phase's start; a consolidation may never take it.
const copyWait = time.Minute

// killLeaderMidReplacement waits for a copy of a pod replaced before its eviction, then
// kills the provisioner of the replica that leads, which made the copy; the lift starts it
// again. A fault that finds no copy within copyWait counts as skipped.
func (in *injector) killLeaderMidReplacement(ctx context.Context, f Fault) (func(context.Context) error, error) {
	found, err := in.waitForCopy(ctx, copyWait)
	if err != nil || found == "" {
		if err == nil {
			in.count(f.Kind, false)
		}
		return nil, err
	}
	replica, err := in.leader(ctx)
	if err != nil {
		return nil, fmt.Errorf("finding the leader that made copy %s: %w", found, err)
	}
	name := localstack.ProvisionerOf(replica)
	in.mu.Lock()
	in.stack.Kill(name)
	in.injected[f.Kind]++
	in.mu.Unlock()
	return func(ctx context.Context) error { return in.start(ctx, name) }, nil
}

// waitForCopy waits up to timeout for a copy (a pod labelled surge.ReplacesLabelKey, not
// being deleted) and returns its name; "" when none came. Errors while listing are retried:
// an API server or etcd restart may strike at the same time.
func (in *injector) waitForCopy(ctx context.Context, timeout time.Duration) (string, error) {
	var found string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := in.cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: surge.ReplacesLabelKey})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				found = p.Namespace + "/" + p.Name
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil && ctx.Err() != nil {
		return "", ctx.Err()
	}
	return found, nil
}

// leader is the replica whose scheduler holds the schedulers' Lease: its provisioner leads
// (package leader). It retries for a while, the Lease being unreadable while the API server
// restarts.
func (in *injector) leader(ctx context.Context) (string, error) {
	var holder string
	var last error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		lease, err := in.cs.CoordinationV1().Leases(in.stack.LeaseNamespace()).Get(ctx, in.stack.LeaseName(), metav1.GetOptions{})
		if err != nil {
			last = err
			return false, nil
		}
		holder = replicaOf(lease)
		return holder != "", nil
	})
	if err != nil {
		return "", fmt.Errorf("reading Lease %s/%s: %w (last error: %v)", in.stack.LeaseNamespace(), in.stack.LeaseName(), err, last)
	}
	return holder, nil
}

// replicaOf is the replica whose scheduler holds a Lease: its holder identity up to the
// first "_" (leader.Identity); "" when no one holds it.
func replicaOf(lease *coordinationv1.Lease) string {
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	replica, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
	return replica
}

// setEC2 sets or lifts one EC2 fault, keeping the others in force.
func (in *injector) setEC2(ctx context.Context, f Fault, on bool) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	e := &in.ec2
	switch f.Kind {
	case EC2Throttle:
		e.ThrottleRate = 0
		if on {
			e.ThrottleRate = 0.5
		}
	case EC2ServerError:
		e.FailActions = nil
		if on {
			e.FailActions = map[string]localaws.ActionFailure{"CreateFleet": {Code: "InternalError", Status: http.StatusInternalServerError}}
		}
	case EC2PartialFleet:
		e.FleetMaxInstances = nil
		if on {
			none := 0
			e.FleetMaxInstances = &none
		}
	case EC2LaunchLatency:
		e.LaunchLatency = localaws.Duration{}
		if on {
			// Tens of seconds, whatever the fault's span.
			e.LaunchLatency = localaws.Duration{Duration: time.Duration(10+f.Pick%21) * time.Second}
		}
	case EC2NeverRegister:
		e.NeverRegisterNext = 0
		if on {
			e.NeverRegisterNext = 1 + f.Pick%2
		}
	}
	if on {
		in.injected[f.Kind]++
	}
	return in.admin.do(ctx, http.MethodPatch, "faults", e, nil)
}

// capacity marks the pools of the live instances short of capacity, so that replacements
// must go elsewhere.
func (in *injector) capacity(ctx context.Context, f Fault) (func(context.Context) error, error) {
	live, err := in.admin.live(ctx)
	if err != nil {
		return nil, err
	}
	pools := []localaws.CapacityPool{}
	for _, i := range live {
		pools = append(pools, localaws.CapacityPool{InstanceType: i.InstanceType, Zone: i.Zone, CapacityType: i.CapacityType})
	}
	if err := in.admin.do(ctx, http.MethodPut, "insufficient-capacity", pools, nil); err != nil {
		return nil, err
	}
	in.count(f.Kind, true)
	return func(ctx context.Context) error {
		return in.admin.do(ctx, http.MethodPut, "insufficient-capacity", []localaws.CapacityPool{}, nil)
	}, nil
}

// RejectedLabel marks the pods of UnmodelledRejection faults, which the scheduler rejects on
// every node Tailor launches.
const RejectedLabel = "chaos.tailor.sh/rejected"

// createRejected creates a pod the RejectLaunchedNodes filter rejects on every launched node.
func (in *injector) createRejected(ctx context.Context) error {
	in.mu.Lock()
	n := in.injected[UnmodelledRejection]
	in.injected[UnmodelledRejection]++
	in.mu.Unlock()
	zero := int64(0)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: metav1.NamespaceDefault, Name: fmt.Sprintf("rejected-%d", n),
			Labels: map[string]string{RejectedLabel: "true", rejectfilter.Label: "true"},
		},
		Spec: corev1.PodSpec{
			SchedulerName: "tailor-scheduler", TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
			}}},
		},
	}
	if _, err := in.cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating pod %s: %w", pod.Name, err)
	}
	return nil
}

// reclaimAttempts bounds how often a reclaim picks another instance when the one it picked
// ended between the listing and the reclaim (consolidation or a fault took it).
const reclaimAttempts = 3

// reclaim terminates a registered instance: with a spot warning, without one, or as an
// instance that dies. Only an instance this fault ended counts as lost to it.
func (in *injector) reclaim(ctx context.Context, f Fault) error {
	gone := map[string]bool{}
	for range reclaimAttempts {
		live, err := in.admin.live(ctx)
		if err != nil {
			return err
		}
		var targets []localaws.InstanceSummary
		for _, i := range live {
			if i.NodeRegistered && !gone[i.ID] && (f.Kind == InstanceDies || i.CapacityType == "spot") {
				targets = append(targets, i)
			}
		}
		if len(targets) == 0 {
			break
		}
		target := targets[f.Pick%len(targets)]
		if f.Kind == SpotWarning {
			err = in.admin.do(ctx, http.MethodPost, "interruptions", localaws.Interruption{Queue: in.queue, InstanceID: target.ID, Kind: localaws.InterruptionSpot}, nil)
		} else {
			err = in.admin.do(ctx, http.MethodDelete, "instances/"+target.ID, nil, nil)
		}
		if isNotFound(err) {
			gone[target.ID] = true
			continue
		}
		if err != nil {
			return err
		}
		in.mu.Lock()
		in.killedNodes[target.PrivateDNSName] = true
		in.injected[f.Kind]++
		in.mu.Unlock()
		return nil
	}
	in.count(f.Kind, false)
	return nil
}

func (in *injector) count(kind FaultKind, injected bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if injected {
		in.injected[kind]++
	} else {
		in.skipped[kind]++
	}
}

// lost reports whether a Node was lost to a fault: killed, or reclaimed after a warning.
func (in *injector) lost(node string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.killedNodes[node]
}

// reset forgets the Nodes and restarts of the last trial.
func (in *injector) reset() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.killedNodes, in.restarts = map[string]bool{}, map[string][]string{}
}

// supervise starts again, as the kubelet does, every component that ended on its own (a
// sidecar that lost its Lease exits by design), and records it; it returns when ctx ends.
func (in *injector) supervise(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		in.mu.Lock()
		var ended []string
		for _, name := range in.stack.Components() {
			// A component a fault killed has no process until the fault ends.
			if running, err := in.stack.Running(name); !running && in.stack.PID(name) != 0 {
				ended = append(ended, name)
				in.restarts[name] = append(in.restarts[name], fmt.Sprint(err))
				in.restartsTotal[name]++
				in.stack.Kill(name)
			}
		}
		in.mu.Unlock()
		for _, name := range ended {
			if err := in.start(ctx, name); err != nil {
				in.mu.Lock()
				in.restarts[name] = append(in.restarts[name], "not started again: "+err.Error())
				in.mu.Unlock()
			}
		}
	}
}

// restarted returns the components started again since the last reset.
func (in *injector) restarted() map[string][]string {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make(map[string][]string, len(in.restarts))
	for k, v := range in.restarts {
		out[k] = slices.Clone(v)
	}
	return out
}

// sample reads the goroutines and memory of Tailor's processes.
func (in *injector) sample(ctx context.Context, phase Phase) []sample {
	in.mu.Lock()
	defer in.mu.Unlock()
	return sampleProcesses(ctx, in.stack, phase)
}
