package provisioning

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/fake"
)

// selling is an in-memory cloud that sells the instance types.
func selling(types ...*cloudprovider.InstanceType) *fake.CloudProvider {
	c := fake.New(nil)
	c.SetInstanceTypes(types...)
	return c
}

func instanceType(name string, cpu, memGi int64, price float64) *cloudprovider.InstanceType {
	return &cloudprovider.InstanceType{
		Name:   name,
		Labels: map[string]string{corev1.LabelInstanceTypeStable: name, corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"},
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(memGi<<30, resource.BinarySI),
			corev1.ResourcePods:   resource.MustParse("58"),
		},
		Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("500Mi")},
		Offerings: []cloudprovider.Offering{
			{Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeOnDemand, Price: price, Available: true},
			{Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeSpot, Price: price / 3, Available: true},
		},
	}
}
