package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"sigs.k8s.io/controller-runtime/pkg/client"

	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	"github.com/tailor-autoscaler/tailor/provisioner/explain"
)

const explainUsage = `Usage: tailorctl explain POD [-n NAMESPACE] [--kubeconfig FILE] [--context NAME]

Says why a pod is pending or where it is headed: its phase, node and nominated node; the
scheduler's last FailedScheduling message as node counts per reason; the provisioner's
FailedProvisioning reasons per NodePool; and the NodeClaim planned for it, with its progress.

Flags:
`

func runExplain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, explainUsage)
		fs.PrintDefaults()
	}
	var cluster clusterFlags
	cluster.register(fs)
	var namespace string
	fs.StringVar(&namespace, "n", "", "Namespace of the pod; the context's namespace by default. Same as --namespace.")
	fs.StringVar(&namespace, "namespace", "", "Namespace of the pod; the context's namespace by default.")
	positional, err := parse(fs, args)
	if err != nil {
		return helpIsNotAnError(err)
	}
	if len(positional) != 1 {
		return fmt.Errorf("want one pod name, got %d arguments: tailorctl explain POD [-n NAMESPACE]", len(positional))
	}
	cc := cluster.clientConfig()
	if namespace == "" {
		if namespace, _, err = cc.Namespace(); err != nil {
			return fmt.Errorf("reading the kubeconfig's namespace: %w", err)
		}
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: apischeme.New()})
	if err != nil {
		return fmt.Errorf("connecting to the cluster: %w", err)
	}
	ex, err := explain.Explain(ctx, c, namespace, positional[0])
	if err != nil {
		return err
	}
	return explain.Render(stdout, ex)
}
