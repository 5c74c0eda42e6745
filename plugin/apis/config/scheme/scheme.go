// Package scheme registers Tailor's plugin argument types with kube-scheduler, so
// KubeSchedulerConfiguration files can carry them with defaults and validation.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	schedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	schedulerconfigv1 "k8s.io/kubernetes/pkg/scheduler/apis/config/v1"

	"github.com/tailor-autoscaler/tailor/plugin/apis/config"
	configv1 "github.com/tailor-autoscaler/tailor/plugin/apis/config/v1"
)

// AddToScheme registers the internal and v1 argument types.
func AddToScheme(s *runtime.Scheme) {
	utilruntime.Must(config.AddToScheme(s))
	utilruntime.Must(configv1.AddToScheme(s))
}

// AddToScheduler registers the argument types with kube-scheduler: its configuration scheme
// decodes and defaults them, its plugin-args scheme converts them to the internal type.
func AddToScheduler() {
	AddToScheme(schedulerscheme.Scheme)
	AddToScheme(schedulerconfigv1.GetPluginArgConversionScheme())
}
