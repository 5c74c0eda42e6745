package privileges

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/go/packages"

	"github.com/tailor-autoscaler/tailor/test/testenv"
)

// awsServicePrefix is where aws-sdk-go-v2's service clients live; the package under it names
// the service.
const awsServicePrefix = "github.com/aws/aws-sdk-go-v2/service/"

// iamPrefixes maps an SDK service package to its prefix in IAM actions. A call on a service
// missing here fails the test: someone must say which permission it needs.
var iamPrefixes = map[string]string{
	"ec2": "ec2", "ssm": "ssm", "pricing": "pricing", "iam": "iam", "sqs": "sqs", "eks": "eks",
}

// authorizedAs names the IAM action of SDK operations that IAM authorizes under another name.
var authorizedAs = map[string]string{
	// A batch delete is authorized per message, by sqs:DeleteMessage.
	"sqs:DeleteMessageBatch": "sqs:DeleteMessage",
}

// implied are actions the code never calls by name but that the calls it makes need.
var implied = map[string]string{
	"ec2:RunInstances":       "CreateFleet (type instant) launches its instances through RunInstances, authorized for the caller",
	"ec2:CreateTags":         "CreateFleet and CreateLaunchTemplate tag what they create through TagSpecifications, authorized as CreateTags",
	"iam:PassRole":           "CreateFleet launches instances with an instance profile, which passes the node role to EC2",
	"iam:TagInstanceProfile": "CreateInstanceProfile tags the profile it creates, which IAM authorizes as TagInstanceProfile",
}

// TestIAMPolicyAllowsWhatTheCodeCalls compares the actions of manifests/iam/provisioner-policy.json
// with the AWS operations the provisioner's code calls, found in its source, plus the actions
// those calls imply: the policy must allow each of them and nothing else.
func TestIAMPolicyAllowsWhatTheCodeCalls(t *testing.T) {
	called, err := awsCalls(filepath.Join(testenv.Root(), "provisioner"), "./...")
	if err != nil {
		t.Fatal(err)
	}
	if len(called) == 0 {
		t.Fatal("found no AWS call in the provisioner: the search is broken")
	}
	want := map[string][]string{}
	for action, sites := range called {
		want[action] = sites
	}
	for action, reason := range implied {
		want[action] = append(want[action], "implied: "+reason)
	}
	allowed, err := policyActions(filepath.Join(testenv.Root(), "manifests", "iam", "provisioner-policy.json"))
	if err != nil {
		t.Fatal(err)
	}
	for action, sites := range want {
		if !slices.Contains(allowed, action) {
			t.Errorf("the policy does not allow %s, which the code needs:\n  %s", action, strings.Join(sites, "\n  "))
		}
	}
	for _, action := range allowed {
		if _, ok := want[action]; !ok {
			t.Errorf("the policy allows %s, which the code never calls and no call implies", action)
		}
	}
	t.Logf("%d actions called, %d implied, %d allowed", len(called), len(implied), len(allowed))
}

// TestAWSCallsAreFound checks the search on code whose calls are known: a client method,
// a call through an interface owned by its consumer, a paginator and a renamed batch call.
func TestAWSCallsAreFound(t *testing.T) {
	got, err := awsCalls(filepath.Join("testdata", "calls"), ".")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ec2:CreateFleet", "ec2:DescribeSubnets", "sqs:DeleteMessage", "sqs:ReceiveMessage"}
	if diff := cmp.Diff(want, sortedKeys(got)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
}

// awsCalls loads the packages of pattern in dir, without tests, and returns each IAM action
// their code calls with the places it calls it from. An operation is called by a method
// named after it whose second parameter is the SDK's <Operation>Input (a client's method,
// or an interface's that mirrors it), or through New<Operation>Paginator.
func awsCalls(dir, pattern string) (map[string][]string, error) {
	cfg := &packages.Config{
		Dir:  dir,
		Mode: packages.NeedName | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo,
	}
	pkgs, err := packages.Load(cfg, pattern)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", pattern, err)
	}
	if n := packages.PrintErrors(pkgs); n > 0 {
		return nil, fmt.Errorf("loading %s: %d errors", pattern, n)
	}
	calls := map[string][]string{}
	var unknown []string
	for _, pkg := range pkgs {
		for _, file := range pkg.Syntax {
			ast.Inspect(file, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				fn, ok := pkg.TypesInfo.Uses[sel.Sel].(*types.Func)
				if !ok {
					return true
				}
				service, operation := awsOperation(fn)
				if service == "" {
					return true
				}
				prefix, ok := iamPrefixes[service]
				if !ok {
					unknown = append(unknown, service)
					return true
				}
				action := prefix + ":" + operation
				if renamed, ok := authorizedAs[action]; ok {
					action = renamed
				}
				pos := pkg.Fset.Position(call.Pos())
				calls[action] = append(calls[action], fmt.Sprintf("%s:%d", relative(dir, pos.Filename), pos.Line))
				return true
			})
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, fmt.Errorf("calls on AWS services with no IAM prefix in iamPrefixes: %v", slices.Compact(unknown))
	}
	return calls, nil
}

// awsOperation returns the SDK service and operation fn calls, if it calls one.
func awsOperation(fn *types.Func) (service, operation string) {
	sig := fn.Signature()
	if sig.Recv() == nil {
		if fn.Pkg() == nil {
			return "", ""
		}
		service, ok := strings.CutPrefix(fn.Pkg().Path(), awsServicePrefix)
		op, isPaginator := strings.CutSuffix(strings.TrimPrefix(fn.Name(), "New"), "Paginator")
		if !ok || !isPaginator || !strings.HasPrefix(fn.Name(), "New") {
			return "", ""
		}
		return service, op
	}
	if sig.Params().Len() < 2 {
		return "", ""
	}
	ptr, ok := sig.Params().At(1).Type().(*types.Pointer)
	if !ok {
		return "", ""
	}
	named, ok := ptr.Elem().(*types.Named)
	if !ok || named.Obj().Pkg() == nil || named.Obj().Name() != fn.Name()+"Input" {
		return "", ""
	}
	service, ok = strings.CutPrefix(named.Obj().Pkg().Path(), awsServicePrefix)
	if !ok {
		return "", ""
	}
	return service, fn.Name()
}

// policyActions returns every action the policy's Allow statements name, sorted.
func policyActions(path string) ([]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var policy struct {
		Statement []struct {
			Sid    string
			Effect string
			Action json.RawMessage
		}
	}
	if err := json.Unmarshal(raw, &policy); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	var actions []string
	for _, st := range policy.Statement {
		if st.Effect != "Allow" {
			continue
		}
		var list []string
		if err := json.Unmarshal(st.Action, &list); err != nil {
			var one string
			if err := json.Unmarshal(st.Action, &one); err != nil {
				return nil, fmt.Errorf("statement %s: Action is neither a string nor a list: %w", st.Sid, err)
			}
			list = []string{one}
		}
		for _, a := range list {
			if strings.Contains(a, "*") {
				return nil, fmt.Errorf("statement %s allows %q: wildcards hide what is granted", st.Sid, a)
			}
		}
		actions = append(actions, list...)
	}
	slices.Sort(actions)
	return slices.Compact(actions), nil
}

func relative(dir, path string) string {
	if rel, err := filepath.Rel(dir, path); err == nil {
		return rel
	}
	return path
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
