package v1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Defaults of NodeProvisioningArgs.
const (
	DefaultProvisionerSocket = "/var/run/tailor/provisioner.sock"
	DefaultRequestTimeout    = 5 * time.Second
)

// SetDefaults_NodeProvisioningArgs fills unset arguments.
func SetDefaults_NodeProvisioningArgs(obj *NodeProvisioningArgs) { //nolint:revive // named for defaulter-gen
	if obj.ProvisionerSocket == nil {
		obj.ProvisionerSocket = ptr.To(DefaultProvisionerSocket)
	}
	if obj.RequestTimeout == nil {
		obj.RequestTimeout = &metav1.Duration{Duration: DefaultRequestTimeout}
	}
}
