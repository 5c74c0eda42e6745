// Command tailor-scheduler is kube-scheduler with every default plugin plus Tailor's
// NodeProvisioning plugin, configured by a KubeSchedulerConfiguration.
package main

import (
	"os"

	"k8s.io/component-base/cli"

	"github.com/tailor-autoscaler/tailor/plugin/scheduler"
)

func main() {
	os.Exit(cli.Run(scheduler.NewCommand()))
}
