package catalog

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/table"
)

// trunking.json is written by hack/trunking from the VPC resource controller's limits table;
// EC2's DescribeInstanceTypes does not report branch interfaces.
//
//go:embed trunking.json
var embeddedTrunking []byte

// embeddedTrunkingName names the embedded trunking table's file in errors.
const embeddedTrunkingName = "provisioner/cloudprovider/aws/catalog/trunking.json"

// Trunking is the table of the instance types that support ENI trunking (security groups
// for pods) and how many branch network interfaces, hence pods with their own security
// groups, each can attach: the vpc.amazonaws.com/pod-eni resource.
type Trunking struct {
	// Source, Commit and Date say where the table was read.
	Source string `json:"source"`
	Commit string `json:"commit"`
	Date   string `json:"date"`
	// BranchInterfaces maps an instance type to its branch interfaces.
	BranchInterfaces map[string]int `json:"branchInterfaces"`
}

// ParseTrunking decodes and validates a trunking table, read strictly (see package table).
func ParseTrunking(r io.Reader) (*Trunking, error) {
	var t Trunking
	if err := table.Decode(r, &t); err != nil {
		return nil, err
	}
	var errs []error
	if t.Source == "" || t.Commit == "" || t.Date == "" {
		errs = append(errs, errors.New("source, commit and date must be set (the table's provenance)"))
	}
	if len(t.BranchInterfaces) == 0 {
		errs = append(errs, errors.New("branchInterfaces: must list at least one instance type"))
	}
	for name, n := range t.BranchInterfaces {
		if n <= 0 {
			errs = append(errs, fmt.Errorf("branchInterfaces[%q]: must be positive, got %d (leave out types without trunking)", name, n))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &t, nil
}

// EmbeddedTrunking decodes the embedded trunking table. Each call returns a fresh copy the
// caller may change.
func EmbeddedTrunking() (*Trunking, error) {
	t, err := ParseTrunking(bytes.NewReader(embeddedTrunking))
	if err != nil {
		return nil, fmt.Errorf("embedded trunking table %s: %w", embeddedTrunkingName, err)
	}
	return t, nil
}

// embeddedBranches is the embedded table, decoded once; it is never changed.
var embeddedBranches = sync.OnceValue(func() map[string]int {
	t, err := EmbeddedTrunking()
	if err != nil {
		// The table is embedded at build time and checked by the package's tests.
		panic(err)
	}
	return t.BranchInterfaces
})

// BranchInterfaces is the number of branch network interfaces of the instance type in the
// embedded trunking table, 0 when it does not support trunking.
func BranchInterfaces(instanceType string) int {
	return embeddedBranches()[instanceType]
}
