package simulate

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

const usage = `Usage: tailor-provisioner simulate -f FILE [-f FILE ...] [flags]

Plans capacity for the pending pods of Kubernetes manifests (NodePools, EC2NodeClasses, Pods,
and optionally Nodes, NodeClaims, DaemonSets, PersistentVolumeClaims, PersistentVolumes and
StorageClasses) without a cluster or AWS, and prints the plan as JSON. A node's price is its instance's plus
its EBS volumes (the EC2NodeClass's block device mappings, or its AMI family's default root
volume), a public IPv4 address (--public-subnets or associatePublicIPAddress) and detailed
monitoring, at the list prices embedded in the binary:

  {"nodeClaims":[{"nodePool","instanceType","zone","capacityType","pricePerHour",
                  "priceParts":{"instance","volumes","publicIPv4","monitoring","daemonSets"},
                  "instanceTypes":[...],"minValuesRelaxed","pods":[...]}],
   "existing":[{"node","pods":[...]}], "unschedulable":[{"pod","reason"}],
   "totalPricePerHour", "nodes", "solveSeconds", "rankedBy"}

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
	prefixDelegation := fs.Bool("vpc-prefix-delegation", false, "The VPC CNI assigns /28 prefixes: Nitro types hold as many pods as the EKS max-pods calculator gives with prefix delegation.")
	minValuesPolicy := fs.String("min-values-policy", string(packing.MinValuesStrict), "What to do when a NodePool's minValues cannot be met: Strict leaves the pods to other NodePools or unschedulable, BestEffort lowers minValues to what there is.")
	eksDaemonSets := fs.Bool("eks-daemonsets", false, "Add the DaemonSets of the default EKS add-ons (aws-node, kube-proxy, ebs-csi-node, eks-pod-identity-agent) with their requests: every node reserves room and pod slots for them.")
	publicSubnets := fs.Bool("public-subnets", false, "The subnets map a public IPv4 address on launch: every node pays for one unless its EC2NodeClass sets associatePublicIPAddress false.")
	instancePricesOnly := fs.Bool("price-instances-only", false, "Plan by instance prices only, as Karpenter does, and report the plan's nodes at their whole price.")
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
	in, err := Load(files, cat, aws.OfflineOptions{VMMemoryOverheadPercent: *overhead, ReservedENIs: *reservedENIs, PrefixDelegation: *prefixDelegation, PublicSubnets: *publicSubnets})
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	in.MinValuesPolicy = policy
	if *eksDaemonSets {
		in.DaemonSets = append(in.DaemonSets, EKSDaemonSets()...)
	}
	planned := in
	if *instancePricesOnly {
		planned = withoutNodeCosts(in)
	}
	start := time.Now()
	plan := packing.Solve(planned)
	elapsed := time.Since(start).Seconds()
	if *instancePricesOnly {
		priceWholeNodes(plan, in)
		plan.RankedByInstancePrices = true
	}

	return Render(plan, elapsed).Write(stdout, *pretty)
}

// withoutNodeCosts is the input with its offerings priced by their instance only.
func withoutNodeCosts(in packing.Input) packing.Input {
	out := in
	out.NodePools = make([]packing.NodePool, len(in.NodePools))
	copied := map[*cloudprovider.InstanceType]*cloudprovider.InstanceType{}
	for i, np := range in.NodePools {
		types := make([]*cloudprovider.InstanceType, len(np.InstanceTypes))
		for j, it := range np.InstanceTypes {
			c, ok := copied[it]
			if !ok {
				cp := *it
				cp.Offerings = slices.Clone(it.Offerings)
				for k := range cp.Offerings {
					cp.Offerings[k].NodeCosts = cloudprovider.NodeCosts{}
				}
				c = &cp
				copied[it] = c
			}
			types[j] = c
		}
		np.InstanceTypes = types
		out.NodePools[i] = np
	}
	return out
}

// priceWholeNodes prices the expected offering of each new NodeClaim of the plan at its
// whole price in the input, keeping the DaemonSets' share of the instance.
func priceWholeNodes(plan packing.Plan, in packing.Input) {
	for i := range plan.NewNodeClaims {
		c := &plan.NewNodeClaims[i].Cheapest
		o, ok := findOffering(in, plan.NewNodeClaims[i].NodePool.Name, *c)
		if !ok {
			continue
		}
		share := 0.0
		if instance := c.Parts.Instance + c.Parts.DaemonSets; instance > 0 {
			share = c.Parts.DaemonSets / instance
		}
		c.Parts = cloudprovider.NewPriceParts(o.Price, o.NodeCosts, share)
		c.Price = o.NodePrice()
	}
}

// findOffering finds the offering of a choice among a NodePool's instance types.
func findOffering(in packing.Input, nodePool string, c packing.Choice) (cloudprovider.Offering, bool) {
	for _, np := range in.NodePools {
		if np.NodePool.Name != nodePool {
			continue
		}
		for _, it := range np.InstanceTypes {
			if it.Name != c.InstanceType {
				continue
			}
			for _, o := range it.Offerings {
				if o.Zone == c.Zone && o.CapacityType == c.CapacityType {
					return o, true
				}
			}
		}
	}
	return cloudprovider.Offering{}, false
}

func loadCatalog(path string) (*catalog.Catalog, error) {
	if path == "" {
		return catalog.Embedded()
	}
	return catalog.LoadFile(path)
}
