// Command tailor-scheduler is kube-scheduler with every default plugin plus Tailor's
// NodeProvisioning plugin, configured by a KubeSchedulerConfiguration.
package main

import (
	"os"

	// Mozilla's root certificates, for when the system has none: the image holds no CA bundle.
	_ "golang.org/x/crypto/x509roots/fallback"
	"k8s.io/component-base/cli"

	"github.com/tailor-autoscaler/tailor/plugin/scheduler"
)

func main() {
	os.Exit(cli.Run(scheduler.NewCommand()))
}
