// Package scheme knows every kind Tailor's sidecar, its tests and tailorctl read and write:
// Kubernetes' own, NodePools and NodeClaims (karpenter.sh/v1), NodeOverlays
// (karpenter.sh/v1alpha1), EC2NodeClasses (karpenter.k8s.aws/v1), and Coscheduling's
// PodGroups (scheduling.x-k8s.io/v1alpha1), which declare gangs.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	karpv1alpha1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1alpha1"
)

// New returns a scheme with Kubernetes' kinds and Tailor's.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(karpv1.AddToScheme(s))
	utilruntime.Must(karpv1alpha1.AddToScheme(s))
	utilruntime.Must(awsv1.AddToScheme(s))
	utilruntime.Must(schedv1alpha1.AddToScheme(s))
	return s
}
