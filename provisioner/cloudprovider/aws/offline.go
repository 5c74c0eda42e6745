package aws

import (
	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/instancetype"
)

// OfflineOptions configure instance types built from a catalog instead of from AWS.
type OfflineOptions = instancetype.OfflineOptions

// CatalogInstanceTypes builds, without calling AWS, the instance types an EC2NodeClass can
// launch according to a catalog (see instancetype.CatalogInstanceTypes).
func CatalogInstanceTypes(cat *catalog.Catalog, class *awsv1.EC2NodeClass, opts OfflineOptions) ([]*cloudprovider.InstanceType, error) {
	return instancetype.CatalogInstanceTypes(cat, class, opts)
}
