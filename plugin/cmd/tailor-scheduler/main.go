// Command tailor-scheduler is kube-scheduler with every default plugin plus Tailor's
// NodeProvisioning PostFilter plugin, configured by a KubeSchedulerConfiguration.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/tailor-autoscaler/tailor/plugin/apis/config/scheme"
	"github.com/tailor-autoscaler/tailor/plugin/nodeprovisioning"
)

func main() {
	scheme.AddToScheduler()
	cmd := app.NewSchedulerCommand(app.WithPlugin(nodeprovisioning.Name, nodeprovisioning.New))
	os.Exit(cli.Run(cmd))
}
