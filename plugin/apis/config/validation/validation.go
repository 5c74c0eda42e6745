// Package validation checks the arguments of Tailor's scheduler plugins and reports every
// problem with its field path.
package validation

import (
	"path/filepath"

	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	apivalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tailor-autoscaler/tailor/plugin/apis/config"
)

// ValidateNodeProvisioningArgs validates the args found at path.
func ValidateNodeProvisioningArgs(path *field.Path, args *config.NodeProvisioningArgs) field.ErrorList {
	var errs field.ErrorList
	if args.ProvisionerSocket == "" || !filepath.IsAbs(args.ProvisionerSocket) {
		errs = append(errs, field.Invalid(path.Child("provisionerSocket"), args.ProvisionerSocket,
			"must be the absolute path of the provisioner's unix socket, for example /var/run/tailor/provisioner.sock"))
	}
	if args.RequestTimeout.Duration <= 0 {
		errs = append(errs, field.Invalid(path.Child("requestTimeout"), args.RequestTimeout.Duration.String(), "must be a positive duration, for example 5s"))
	}
	for i, name := range args.NodePools {
		for _, msg := range apivalidation.IsDNS1123Subdomain(name) {
			errs = append(errs, field.Invalid(path.Child("nodePools").Index(i), name, "is not a NodePool name: "+msg))
		}
	}
	if args.NodePoolSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(args.NodePoolSelector,
			metav1validation.LabelSelectorValidationOptions{}, path.Child("nodePoolSelector"))...)
	}
	return errs
}
