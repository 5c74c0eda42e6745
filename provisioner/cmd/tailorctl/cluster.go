package main

import (
	"flag"

	"k8s.io/client-go/tools/clientcmd"
)

// clusterFlags are the flags of commands that read a cluster.
type clusterFlags struct {
	kubeconfig string
	context    string
}

func (c *clusterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "Path to the kubeconfig file; $KUBECONFIG or ~/.kube/config by default.")
	fs.StringVar(&c.context, "context", "", "Kubeconfig context to use; the current context by default.")
}

// clientConfig loads the kubeconfig the way kubectl does.
func (c *clusterFlags) clientConfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.context})
}
