package secrets

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tailor-autoscaler/tailor/test/localstack"
	"github.com/tailor-autoscaler/tailor/test/stacktest"
)

// verbosity is the -v Tailor's binaries run at: the most detailed level they log at,
// request bodies and headers included.
const verbosity = 6

// TestNoSecretInLogs runs the stack with tailor-provisioner and tailor-scheduler at -v=6,
// schedules a Deployment of two pods onto nodes Tailor launches, stops the stack and scans
// every component's log for the stack's credentials and for credential-shaped text.
func TestNoSecretInLogs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	stack, cs, _ := stacktest.Start(t, ctx, localstack.Options{Dir: dir, Verbosity: verbosity, BootDelay: time.Second})
	stacktest.SchedulingRound(t, ctx, stack, cs, "secrets", 2, 3*time.Minute)
	stack.Down()

	needles := append([]Needle{}, Patterns...)
	kubeconfigs, err := KubeconfigNeedles(filepath.Join(dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := KeyFileNeedles(filepath.Join(dir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	needles = append(append(needles, kubeconfigs...), keys...)
	awsSecret := ""
	for _, kv := range stack.AWSEnv() {
		if v, ok := strings.CutPrefix(kv, "AWS_SECRET_ACCESS_KEY="); ok {
			awsSecret = v
		}
	}
	if awsSecret == "" {
		t.Fatal("the stack passes no AWS_SECRET_ACCESS_KEY")
	}
	needles = append(needles, Needle{What: "the AWS secret access key", Text: awsSecret})

	logs, err := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	var scanned []string
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		found, err := Scan(filepath.Base(path), f, needles)
		_ = f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, finding := range found {
			t.Errorf("secret in a log: %s", finding)
		}
		scanned = append(scanned, filepath.Base(path))
	}
	for _, component := range []string{localstack.Provisioner, localstack.Scheduler, localstack.APIServer, localstack.LocalAWS} {
		if !slices.Contains(scanned, component+".log") {
			t.Errorf("no log of %s among %v", component, scanned)
		}
	}
	t.Logf("%d needles looked for in %d logs: %v", len(needles), len(scanned), scanned)
}

func TestScan(t *testing.T) {
	needles := append([]Needle{{What: "the key", Text: "s3cr3t"}}, Patterns...)
	tests := []struct {
		name string
		log  string
		want []Finding
	}{
		{
			name: "a clean log has no finding",
			log:  "I1127 starting\nI1127 launched instance i-0123\n",
		},
		{
			name: "a credential is found on its line",
			log:  "I1127 starting\nI1127 env AWS_KEY=xs3cr3tx\n",
			want: []Finding{{File: "c.log", Line: 2, What: "the key"}},
		},
		{
			name: "patterns match whatever the case",
			log:  "I1127 request headers: AUTHORIZATION: Bearer abc\nI1127 Aws_Secret_Access_Key=x\n",
			want: []Finding{
				{File: "c.log", Line: 1, What: "an Authorization: Bearer header"},
				{File: "c.log", Line: 2, What: "an aws_secret_access_key setting"},
			},
		},
		{
			name: "a credential is matched exactly",
			log:  "I1127 S3CR3T\n",
		},
		{
			name: "a PEM block is found",
			log:  "x\ny\n-----BEGIN EC PRIVATE KEY-----\n",
			want: []Finding{{File: "c.log", Line: 3, What: "a PEM block"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Scan("c.log", strings.NewReader(tt.log), needles)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
		})
	}
}
