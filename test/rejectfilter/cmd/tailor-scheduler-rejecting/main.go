// Command tailor-scheduler-rejecting is tailor-scheduler with one more filter plugin,
// RejectLaunchedNodes (package rejectfilter), for the tests and fault trials that check
// what Tailor does when the scheduler rejects a pod on the node planned for it.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/tailor-autoscaler/tailor/plugin/scheduler"
	"github.com/tailor-autoscaler/tailor/test/rejectfilter"
)

func main() {
	os.Exit(cli.Run(scheduler.NewCommand(app.WithPlugin(rejectfilter.Name, rejectfilter.New))))
}
