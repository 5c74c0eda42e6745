package localstack

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Tuning of a stack with Options.Scale, for thousands of nodes and tens of thousands of pods
// on a small machine.
const (
	// scaleQPS is the client rate of kube-controller-manager and tailor-scheduler: at their
	// defaults (20 and 50 a second) the ReplicaSet controller alone takes 40 minutes to create
	// 50,000 pods, and the scheduler's binds queue behind its events.
	scaleQPS = 500
	// scaleNodeLease is kwok's node lease duration: it renews each lease every quarter of it,
	// so 40s (the stack's default) renews 5,000 leases 500 times a second, more writes than
	// the whole workload makes. The node lifecycle controller's grace period follows it.
	scaleNodeLease = 240 * time.Second
)

// scaleArgs are a component's flags on a stack with Options.Scale.
func (s *Stack) scaleArgs(component string) []string {
	if !s.opts.Scale {
		return nil
	}
	switch component {
	case APIServer:
		return []string{
			// The defaults (400 and 200) throttle a burst of pod creations, binds, kwok's
			// status updates and informers' lists at once.
			"--max-requests-inflight", "1600", "--max-mutating-requests-inflight", "800",
		}
	case ControllerManager:
		return []string{
			"--kube-api-qps", strconv.Itoa(scaleQPS), "--kube-api-burst", strconv.Itoa(2 * scaleQPS),
			"--concurrent-deployment-syncs", "20", "--concurrent-replicaset-syncs", "20",
			// Nodes whose lease kwok renews every minute must not be taken for lost between two
			// renewals.
			"--node-monitor-grace-period", (scaleNodeLease + time.Minute).String(),
		}
	case Scheduler:
		return []string{
			// A pod that does not fit waits for a node, and the scheduler patches its
			// PodScheduled condition each time: in the scheduling cycle itself unless its API
			// calls are asynchronous (beta since 1.34, still off by default in 1.35). With the API server slowed
			// by the burst, each patch took a quarter of a second and the scheduler tried 2 to 3
			// pods a second while thousands waited.
			"--feature-gates", "SchedulerAsyncAPICalls=true",
		}
	}
	return nil
}

// writeKwokScaleConfig writes kwok's options at scale: by default it plays the stages of 4
// pods and 4 nodes at a time and renews 4 leases at a time, one API call each; with the API
// server answering in a second under a burst, pods bound waited by the hundred to be marked
// Running.
func writeKwokScaleConfig(dir string) (string, error) {
	const config = `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: 64
  nodePlayStageParallelism: 16
  nodeLeaseParallelism: 16
`
	path := filepath.Join(dir, "kwok-scale.yaml")
	return path, os.WriteFile(path, []byte(config), 0o644)
}

// TailorUsers are the users Tailor's binaries run as on the stack (their ServiceAccounts).
var TailorUsers = map[string]string{
	"system:serviceaccount:tailor:tailor-scheduler":   Scheduler,
	"system:serviceaccount:tailor:tailor-provisioner": Provisioner,
}

// writeAuditPolicy writes the API server's audit policy: Tailor's users' requests at
// Metadata level, logged once, when received; nothing else.
func writeAuditPolicy(dir string) (string, error) {
	users := make([]string, 0, len(TailorUsers))
	for u := range TailorUsers {
		users = append(users, strconv.Quote(u))
	}
	policy := fmt.Sprintf(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [ResponseStarted, ResponseComplete, Panic]
rules:
- level: Metadata
  users: [%s]
- level: None
`, strings.Join(users, ", "))
	path := filepath.Join(dir, "audit-policy.yaml")
	return path, os.WriteFile(path, []byte(policy), 0o644)
}
