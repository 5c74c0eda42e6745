package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Phase is the workload change a trial makes while faults strike.
type Phase string

// Phases.
const (
	// PhaseBurst creates the Deployments: the faults strike while their pods are provisioned.
	PhaseBurst Phase = "burst"
	// PhaseScaleDown scales the running Deployments down: consolidation removes and replaces
	// nodes while the faults strike.
	PhaseScaleDown Phase = "scale-down"
	// PhaseDrift pins the EC2NodeClass to another AMI release: every node drifts and is
	// replaced.
	PhaseDrift Phase = "drift"
	// PhaseSpot reclaims spot instances, some with their two-minute warning, some without.
	PhaseSpot Phase = "spot"
)

// Phases are every phase, in the order a seed picks from.
var Phases = []Phase{PhaseBurst, PhaseScaleDown, PhaseDrift, PhaseSpot}

// FaultKind is a kind of fault a trial injects.
type FaultKind string

// Fault kinds.
const (
	// KillProvisioner and KillScheduler kill -9 one replica's process and start it again once
	// the fault ends.
	KillProvisioner FaultKind = "kill-provisioner"
	KillScheduler   FaultKind = "kill-scheduler"
	// RestartAPIServer and RestartEtcd kill -9 the control plane's process and start it again.
	RestartAPIServer FaultKind = "restart-apiserver"
	RestartEtcd      FaultKind = "restart-etcd"
	// RemoveSocket removes a replica's scheduler↔sidecar unix socket; restarting the sidecar
	// when the fault ends restores it.
	RemoveSocket FaultKind = "remove-socket"
	// EC2Throttle throttles half of the local endpoint's requests.
	EC2Throttle FaultKind = "ec2-throttle"
	// EC2ServerError answers every CreateFleet with a 500.
	EC2ServerError FaultKind = "ec2-5xx"
	// EC2Capacity reports InsufficientInstanceCapacity for the pools of the live instances.
	EC2Capacity FaultKind = "ec2-capacity"
	// EC2PartialFleet makes every CreateFleet launch nothing, reporting the shortfall.
	EC2PartialFleet FaultKind = "ec2-partial-fleet"
	// EC2LaunchLatency makes CreateFleet take tens of seconds to answer.
	EC2LaunchLatency FaultKind = "ec2-launch-latency"
	// EC2NeverRegister makes the next instances launched never register their Node.
	EC2NeverRegister FaultKind = "ec2-never-register"
	// InstanceDies terminates a registered instance without any event.
	InstanceDies FaultKind = "instance-dies"
	// SpotWarning sends a spot instance its interruption warning; the instance is reclaimed
	// after the stack's reclaim delay.
	SpotWarning FaultKind = "spot-warning"
	// SpotNoWarning reclaims a spot instance without its warning.
	SpotNoWarning FaultKind = "spot-no-warning"
	// UnmodelledRejection creates a pod the scheduler rejects on every node Tailor launches
	// (the RejectLaunchedNodes filter, which the planner does not model): the launches for
	// it must stay within --launch-limit-per-pod, whatever else strikes.
	UnmodelledRejection FaultKind = "unmodelled-rejection"
	// KillLeaderMidReplacement waits for a pod replaced before its eviction to have its copy
	// (a pod labelled tailor.sh/replaces), then kill -9s the provisioner of the replica that
	// leads, and starts it again once the fault ends: the leader that takes over finds a copy
	// no decision of its own waits for, and nodes its predecessor cordoned.
	KillLeaderMidReplacement FaultKind = "kill-leader-mid-replacement"
)

// FaultKinds are every kind, in the order a seed picks from. Clock jumps are not among them:
// the sidecar's clock is injected in its packages' tests but cannot be driven from outside
// a running process.
var FaultKinds = []FaultKind{
	KillProvisioner, KillScheduler, RestartAPIServer, RestartEtcd, RemoveSocket,
	EC2Throttle, EC2ServerError, EC2Capacity, EC2PartialFleet, EC2LaunchLatency, EC2NeverRegister,
	InstanceDies, SpotWarning, SpotNoWarning, UnmodelledRejection, KillLeaderMidReplacement,
}

// Fault is one fault of a trial.
type Fault struct {
	Kind FaultKind
	// At is when it strikes, counted from the start of the phase; For how long it lasts
	// (until a killed process is started again, a socket restored, an EC2 fault lifted).
	At, For time.Duration
	// Replica is the replica a process or socket fault hits ("a" or "b"); a
	// KillLeaderMidReplacement hits the replica that leads when it strikes.
	Replica string
	// Pick chooses, among the instances live when the fault strikes, the one it hits (index
	// modulo their number): the instances are not known when the trial is planned.
	Pick int
}

// End is when the fault is over.
func (f Fault) End() time.Duration { return f.At + f.For }

func (f Fault) String() string {
	s := fmt.Sprintf("%s at %s for %s", f.Kind, f.At, f.For)
	if f.Replica != "" {
		s += " on replica " + f.Replica
	}
	return s
}

// Deployment is one Deployment of a trial, with a PodDisruptionBudget of maxUnavailable 1,
// or, when ReplaceBeforeEvict, of minAvailable 1.
type Deployment struct {
	Name string
	// Replicas it runs; Keep how many are left after a scale-down.
	Replicas, Keep int
	// CPU each pod requests, in millicores.
	CPUMilli int64
	// ReplaceBeforeEvict opts its pods in to replace-before-evict (tailor.sh/replace-before-evict
	// on its template) and gives it a PodDisruptionBudget of minAvailable 1: with its single
	// replica, consolidation and drift may not evict its pod, and replace it instead.
	ReplaceBeforeEvict bool
}

// Plan is everything a trial does, drawn from its seed alone.
type Plan struct {
	Seed        uint64
	Phase       Phase
	Deployments []Deployment
	Faults      []Fault
}

// Window bounds when faults strike and how long they last.
type Window struct {
	// Within is the span after the phase starts in which faults strike; MaxFaults how many a
	// trial injects at most (at least one); MaxFor the longest a fault lasts.
	Within    time.Duration
	MaxFaults int
	MaxFor    time.Duration
	// MaxReplicas is the most pods a Deployment runs (at least 3).
	MaxReplicas int
}

// NewPlan draws a trial's plan from its seed: the same seed gives the same plan. Every plan
// ends its Deployments with one of a single replica that is replaced before its eviction.
func NewPlan(seed uint64, w Window) Plan {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	p := Plan{Seed: seed, Phase: Phases[r.IntN(len(Phases))]}
	cpus := []int64{250, 500, 1000, 1500}
	for i := range 2 + r.IntN(3) {
		replicas := 3 + r.IntN(max(w.MaxReplicas-2, 1))
		p.Deployments = append(p.Deployments, Deployment{
			Name:     fmt.Sprintf("chaos-%x-%d", seed, i),
			Replicas: replicas,
			Keep:     1 + r.IntN(replicas/2),
			CPUMilli: cpus[r.IntN(len(cpus))],
		})
	}
	for range 1 + r.IntN(max(w.MaxFaults, 1)) {
		f := Fault{
			Kind: FaultKinds[r.IntN(len(FaultKinds))],
			At:   time.Duration(r.Int64N(int64(w.Within)/int64(time.Second)+1)) * time.Second,
			For:  time.Duration(1+r.Int64N(int64(w.MaxFor)/int64(time.Second))) * time.Second,
			Pick: r.IntN(1 << 16),
		}
		switch f.Kind {
		case KillProvisioner, KillScheduler, RemoveSocket:
			f.Replica = []string{"a", "b"}[r.IntN(2)]
		case RestartAPIServer, RestartEtcd:
			// The control plane comes back within seconds, as a restarted static pod does.
			f.For = min(f.For, 3*time.Second)
		case InstanceDies, SpotWarning, SpotNoWarning, UnmodelledRejection:
			// Instantaneous: the instance is gone for good; the pod stays for the trial.
			f.For = 0
		}
		p.Faults = append(p.Faults, f)
	}
	// Drawn last, so that a seed's phase and other Deployments are what they were before it
	// was added (its faults are not: the kinds are drawn from FaultKinds, which grew).
	p.Deployments = append(p.Deployments, Deployment{
		Name:               fmt.Sprintf("chaos-%x-%d", seed, len(p.Deployments)),
		Replicas:           1,
		Keep:               1,
		CPUMilli:           cpus[r.IntN(len(cpus))],
		ReplaceBeforeEvict: true,
	})
	slices.SortStableFunc(p.Faults, func(a, b Fault) int { return int(a.At - b.At) })
	return p
}

// FaultsEnd is when the last fault is over, counted from the start of the phase.
func (p Plan) FaultsEnd() time.Duration {
	var end time.Duration
	for _, f := range p.Faults {
		end = max(end, f.End())
	}
	return end
}

// Pods counts the pods the trial runs before its phase.
func (p Plan) Pods() int {
	n := 0
	for _, d := range p.Deployments {
		n += d.Replicas
	}
	return n
}

func (p Plan) String() string {
	faults := make([]string, len(p.Faults))
	for i, f := range p.Faults {
		faults[i] = f.String()
	}
	return fmt.Sprintf("seed %d: %s of %d pods in %d Deployments; faults: %s", p.Seed, p.Phase, p.Pods(), len(p.Deployments), strings.Join(faults, ", "))
}
