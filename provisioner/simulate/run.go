package simulate

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

const usage = `Usage: tailor-provisioner simulate -f FILE [-f FILE ...] [flags]

Plans capacity for the pending pods of Kubernetes manifests (NodePools, EC2NodeClasses, Pods,
and optionally Nodes, NodeClaims, DaemonSets, PersistentVolumeClaims, PersistentVolumes and
StorageClasses) without a cluster or AWS, and prints the plan as JSON:

  {"nodeClaims":[{"nodePool","instanceType","zone","capacityType","pricePerHour",
                  "instanceTypes":[...],"minValuesRelaxed","pods":[...]}],
   "existing":[{"node","pods":[...]}], "unschedulable":[{"pod","reason"}],
   "totalPricePerHour", "nodes", "solveSeconds"}

Flags:
`

// fileList is a repeatable flag of manifest paths.
type fileList []string

func (f *fileList) String() string { return strings.Join(*f, ",") }

func (f *fileList) Set(v string) error {
	*f = append(*f, v)
	return nil
}

// Run runs `tailor-provisioner simulate` with its arguments (the subcommand's name left
// out): it loads the manifests, plans, and writes the plan as JSON to stdout. Usage goes to
// stderr. Asking for help is not an error.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var files fileList
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	fs.Var(&files, "f", "Manifest file, JSON or YAML (repeatable; - reads standard input). Same as --filename.")
	fs.Var(&files, "filename", "Manifest file, JSON or YAML (repeatable; - reads standard input).")
	catalogPath := fs.String("catalog", "", "EC2 catalog file (JSON); the embedded us-east-1 catalog by default.")
	overhead := fs.Float64("vm-memory-overhead-percent", 0.075, "Fraction of an instance's memory the kubelet does not see.")
	reservedENIs := fs.Int("reserved-enis", 0, "Network interfaces per node kept from pods.")
	minValuesPolicy := fs.String("min-values-policy", string(packing.MinValuesStrict), "What to do when a NodePool's minValues cannot be met: Strict leaves the pods to other NodePools or unschedulable, BestEffort lowers minValues to what there is.")
	pretty := fs.Bool("pretty", false, "Indent the JSON output.")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: give manifests with -f FILE", fs.Args())
	}
	if len(files) == 0 {
		return errors.New("no manifests: give them with -f FILE (repeatable, - reads standard input)")
	}
	policy := packing.MinValuesPolicy(*minValuesPolicy)
	if policy != packing.MinValuesStrict && policy != packing.MinValuesBestEffort {
		return fmt.Errorf("--min-values-policy %q: want %s or %s", policy, packing.MinValuesStrict, packing.MinValuesBestEffort)
	}
	cat, err := loadCatalog(*catalogPath)
	if err != nil {
		return err
	}
	in, err := Load(files, cat, aws.OfflineOptions{VMMemoryOverheadPercent: *overhead, ReservedENIs: *reservedENIs})
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	in.MinValuesPolicy = policy
	start := time.Now()
	plan := packing.Solve(in)
	elapsed := time.Since(start).Seconds()

	return Render(plan, elapsed).Write(stdout, *pretty)
}

func loadCatalog(path string) (*catalog.Catalog, error) {
	if path == "" {
		return catalog.Embedded()
	}
	return catalog.LoadFile(path)
}
