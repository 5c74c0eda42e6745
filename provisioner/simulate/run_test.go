package simulate

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
)

// run runs Run and decodes its output, refusing fields the Output type does not have.
func run(t *testing.T, args ...string) (Output, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := Run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("Run(%q) = %v; stderr:\n%s", args, err, stderr.String())
	}
	dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
	dec.DisallowUnknownFields()
	var out Output
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("decoding the output of Run(%q): %v\n%s", args, err, stdout.String())
	}
	return out, stdout.String()
}

// checkPlan asserts what holds of any plan, whatever the planner decides: every pending
// pod appears exactly once, new NodeClaims come from the manifests' NodePools with an
// instance price of the catalog and a price that sums its parts, existing placements name listed nodes, and the totals add up.
func checkPlan(t *testing.T, out Output, pending, pools, nodes []string, cat *catalog.Catalog) {
	t.Helper()
	var placed []string
	types := map[string]*catalog.InstanceType{}
	for i := range cat.InstanceTypes {
		types[cat.InstanceTypes[i].Name] = &cat.InstanceTypes[i]
	}
	sum := 0.0
	for _, nc := range out.NodeClaims {
		placed = append(placed, nc.Pods...)
		sum += nc.PricePerHour
		if len(nc.Pods) == 0 {
			t.Errorf("NodeClaim %+v has no pods", nc)
		}
		if !slices.Contains(pools, nc.NodePool) {
			t.Errorf("NodeClaim of NodePool %q, which is not in the manifests %q", nc.NodePool, pools)
		}
		it, ok := types[nc.InstanceType]
		if !ok {
			t.Errorf("NodeClaim of instance type %q, which is not in the catalog", nc.InstanceType)
			continue
		}
		instance := nc.PriceParts.Instance + nc.PriceParts.DaemonSets
		if price, ok := offeringPrice(it, nc.Zone, nc.CapacityType); !ok || math.Abs(price-instance) > 1e-9 {
			t.Errorf("NodeClaim %s %s %s with an instance at %v: the catalog offers it at %v (offered: %t)", nc.InstanceType, nc.Zone, nc.CapacityType, instance, price, ok)
		}
		if math.Abs(nc.PriceParts.Total()-nc.PricePerHour) > 1e-9 {
			t.Errorf("NodeClaim %s at %v: want the sum of its parts %+v", nc.InstanceType, nc.PricePerHour, nc.PriceParts)
		}
	}
	for _, e := range out.Existing {
		placed = append(placed, e.Pods...)
		if !slices.Contains(nodes, e.Node) {
			t.Errorf("pods planned onto node %q, which is not in the manifests %q", e.Node, nodes)
		}
	}
	for _, u := range out.Unschedulable {
		placed = append(placed, u.Pod)
		if u.Reason == "" {
			t.Errorf("unschedulable pod %s has no reason", u.Pod)
		}
	}
	slices.Sort(placed)
	want := slices.Clone(pending)
	slices.Sort(want)
	if diff := cmp.Diff(want, placed); diff != "" {
		t.Errorf("pods of the plan (-pending +planned):\n%s", diff)
	}
	if out.Nodes != len(out.NodeClaims) {
		t.Errorf("nodes = %d, want the %d NodeClaims", out.Nodes, len(out.NodeClaims))
	}
	if rounded := math.Round(sum*1e4) / 1e4; out.TotalPricePerHour != rounded {
		t.Errorf("totalPricePerHour = %v, want the sum of the NodeClaims' prices %v", out.TotalPricePerHour, rounded)
	}
	if out.SolveSeconds < 0 {
		t.Errorf("solveSeconds = %v, want a duration", out.SolveSeconds)
	}
}

// offeringPrice is the price of an offering of the catalog: spot prices per zone, and the
// on-demand price of the region in the zones where the type is offered.
func offeringPrice(it *catalog.InstanceType, zone, capacityType string) (float64, bool) {
	for _, o := range it.Offerings {
		if o.Zone != zone {
			continue
		}
		if capacityType == catalog.CapacityTypeOnDemand {
			return it.OnDemandPricePerHour, true
		}
		if o.CapacityType == capacityType {
			return o.PricePerHour, true
		}
	}
	return 0, false
}

func TestRunPlansTheManifests(t *testing.T) {
	manifests := filepath.Join("testdata", "cluster.yaml")
	catalogPath := filepath.Join("testdata", "catalog.json")
	cat, err := catalog.LoadFile(catalogPath)
	if err != nil {
		t.Fatal(err)
	}
	out, compact := run(t, "--catalog", catalogPath, "-f", manifests)
	pending := []string{"default/web-0", "default/web-1", "default/web-2", "shop/api-0", "shop/arm-0", "ml/inference-0", "default/huge"}
	checkPlan(t, out, pending, []string{"general", "gpu"}, []string{"ip-10-0-1-1"}, cat)
	var huge []string
	for _, u := range out.Unschedulable {
		huge = append(huge, u.Pod)
	}
	if !slices.Contains(huge, "default/huge") {
		t.Errorf("unschedulable = %q, want default/huge, which no instance type of the catalog holds", huge)
	}

	t.Run("same output for the same input", func(t *testing.T) {
		again, _ := run(t, "--catalog", catalogPath, "--filename", manifests)
		out.SolveSeconds, again.SolveSeconds = 0, 0
		if diff := cmp.Diff(out, again); diff != "" {
			t.Errorf("second run (-first +second):\n%s", diff)
		}
	})
	t.Run("pretty output holds the same plan", func(t *testing.T) {
		pretty, text := run(t, "--catalog", catalogPath, "-f", manifests, "--pretty")
		if !strings.Contains(text, "\n  \"nodeClaims\": [") || strings.Count(compact, "\n") != 1 {
			t.Errorf("--pretty should indent and the default should be one line; got:\n%s\nand:\n%s", text, compact)
		}
		out.SolveSeconds, pretty.SolveSeconds = 0, 0
		if diff := cmp.Diff(out, pretty); diff != "" {
			t.Errorf("--pretty (-compact +pretty):\n%s", diff)
		}
	})
	t.Run("top-level keys", func(t *testing.T) {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal([]byte(compact), &fields); err != nil {
			t.Fatal(err)
		}
		var keys []string
		for k := range fields {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		want := []string{"nodeClaims", "nodes", "rankedBy", "solveSeconds", "totalPricePerHour", "unschedulable"}
		if len(out.Existing) > 0 {
			want = []string{"existing", "nodeClaims", "nodes", "rankedBy", "solveSeconds", "totalPricePerHour", "unschedulable"}
		}
		if diff := cmp.Diff(want, keys); diff != "" {
			t.Errorf("keys (-want +got):\n%s", diff)
		}
	})
}

func TestRunErrors(t *testing.T) {
	manifests := filepath.Join("testdata", "cluster.yaml")
	missing := filepath.Join(t.TempDir(), "missing.json")
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "no manifests", args: nil, wantErr: "no manifests: give them with -f FILE (repeatable, - reads standard input)"},
		{name: "positional arguments", args: []string{"-f", manifests, "extra.yaml"}, wantErr: `unexpected arguments ["extra.yaml"]: give manifests with -f FILE`},
		{name: "unknown flag", args: []string{"--nodepool", "x"}, wantErr: "flag provided but not defined: -nodepool"},
		{name: "missing catalog", args: []string{"-f", manifests, "--catalog", missing}, wantErr: "reading EC2 catalog: open " + missing + ": no such file or directory"},
		{
			name:    "memory overhead out of range",
			args:    []string{"-f", manifests, "--vm-memory-overhead-percent", "7.5"},
			wantErr: `instance types of NodePool "general": configuring offline instance types: vm memory overhead percent 7.5 must be in [0, 1)`,
		},
		{
			name:    "negative reserved ENIs",
			args:    []string{"-f", manifests, "--reserved-enis", "-1"},
			wantErr: `instance types of NodePool "general": configuring offline instance types: reserved ENIs -1 must not be negative`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := Run(context.Background(), tt.args, &stdout, &stderr)
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("Run() error = %v, want %q", err, tt.wantErr)
			}
			if stdout.Len() > 0 {
				t.Errorf("Run() wrote to stdout on error:\n%s", stdout.String())
			}
		})
	}
}

func TestRunHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := Run(context.Background(), []string{"-h"}, &stdout, &stderr); err != nil {
		t.Fatalf("Run(-h) = %v, want no error", err)
	}
	if !strings.HasPrefix(stderr.String(), "Usage: tailor-provisioner simulate -f FILE") || !strings.Contains(stderr.String(), "-vm-memory-overhead-percent") {
		t.Errorf("usage on stderr:\n%s", stderr.String())
	}
}

// TestRunPricesWholeNodes plans the manifests with the options that change what a node
// costs and checks each NodeClaim's parts: the AL2023 root volume of 20Gi gp3, a public
// address with --public-subnets, a larger DaemonSet share with --eks-daemonsets (the
// manifests have a DaemonSet of their own), and with
// --price-instances-only a plan made by instance prices but reported at whole prices.
func TestRunPricesWholeNodes(t *testing.T) {
	manifests := filepath.Join("testdata", "cluster.yaml")
	catalogPath := filepath.Join("testdata", "catalog.json")
	cat, err := catalog.LoadFile(catalogPath)
	if err != nil {
		t.Fatal(err)
	}
	pending := []string{"default/web-0", "default/web-1", "default/web-2", "shop/api-0", "shop/arm-0", "ml/inference-0", "default/huge"}
	rootVolume := 20 * 0.08 / 730
	tests := []struct {
		name           string
		args           []string
		wantPublicIPv4 float64
		moreDaemonSets bool
	}{
		{name: "root volume only"},
		{name: "public subnets", args: []string{"--public-subnets"}, wantPublicIPv4: 0.005},
		{name: "EKS DaemonSets", args: []string{"--eks-daemonsets"}, moreDaemonSets: true},
		{name: "planned by instance prices", args: []string{"--price-instances-only", "--public-subnets"}, wantPublicIPv4: 0.005},
	}
	share := func(out Output) map[string]float64 {
		got := map[string]float64{}
		for _, nc := range out.NodeClaims {
			got[nc.InstanceType] = nc.PriceParts.DaemonSets / (nc.PriceParts.Instance + nc.PriceParts.DaemonSets)
		}
		return got
	}
	base, _ := run(t, "--catalog", catalogPath, "-f", manifests)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _ := run(t, append([]string{"--catalog", catalogPath, "-f", manifests}, tt.args...)...)
			checkPlan(t, out, pending, []string{"general", "gpu"}, []string{"ip-10-0-1-1"}, cat)
			if len(out.NodeClaims) == 0 {
				t.Fatal("no NodeClaims")
			}
			for _, nc := range out.NodeClaims {
				p := nc.PriceParts
				if math.Abs(p.Volumes-rootVolume) > 1e-12 || p.PublicIPv4 != tt.wantPublicIPv4 || p.Monitoring != 0 {
					t.Errorf("NodeClaim %s: parts %+v, want volumes %v, publicIPv4 %v and no monitoring", nc.InstanceType, p, rootVolume, tt.wantPublicIPv4)
				}
				was, ok := share(base)[nc.InstanceType]
				if now := share(out)[nc.InstanceType]; ok && (now > was) != tt.moreDaemonSets {
					t.Errorf("NodeClaim %s: DaemonSets' share %v, %v without options; want more: %t", nc.InstanceType, now, was, tt.moreDaemonSets)
				}
			}
		})
	}
}
