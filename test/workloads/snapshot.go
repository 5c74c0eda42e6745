package workloads

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
)

// Snapshot is where a workload's pods run on a cluster: its nodes, each with the workload's
// pods it holds by their index in the workload. tailor-dev scaledown captures one on the
// stack once a scale-down has deleted its pods, so that consolidation can be replayed in
// memory from the very start the stack had.
type Snapshot struct {
	// Shape and Pods name the generated workload the indices refer to.
	Shape string         `json:"shape"`
	Pods  int            `json:"pods"`
	Nodes []SnapshotNode `json:"nodes"`
}

// SnapshotNode is one node of a Snapshot.
type SnapshotNode struct {
	Name         string `json:"name"`
	NodePool     string `json:"nodePool"`
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	CapacityType string `json:"capacityType"`
	// Labels are the node's labels beyond its instance type's and the four above (zone,
	// capacity type, NodePool and hostname, which is the name): the NodePool's own and
	// those registration adds (region, karpenter.sh/registered, ...).
	Labels map[string]string `json:"labels,omitempty"`
	// Pods are the indices, in the workload, of the pods the node holds.
	Pods []int `json:"pods,omitempty"`
}

// WriteSnapshot writes a snapshot as JSON, one node a line, so that two snapshots diff
// node by node.
func WriteSnapshot(path string, s *Snapshot) error {
	shape, err := json.Marshal(s.Shape)
	if err != nil {
		return fmt.Errorf("encoding the snapshot's shape: %w", err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"shape":%s,"pods":%d,"nodes":[`, shape, s.Pods)
	for i, n := range s.Nodes {
		raw, err := json.Marshal(n)
		if err != nil {
			return fmt.Errorf("encoding node %s of the snapshot: %w", n.Name, err)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
		b.Write(raw)
	}
	b.WriteString("\n]}\n")
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// ReadSnapshot reads a snapshot WriteSnapshot wrote.
func ReadSnapshot(path string) (*Snapshot, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{}
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, fmt.Errorf("reading snapshot %s: %w", path, err)
	}
	return s, nil
}
