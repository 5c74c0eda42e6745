// Package v1alpha1 holds the karpenter.sh/v1alpha1 API types that Tailor serves: NodeOverlay.
// Field names, group, version and kind match Karpenter's so that existing manifests apply
// unchanged; the types, validation and schemas are Tailor's own.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.sh
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of NodeOverlay.
const Group = "karpenter.sh"

// SchemeGroupVersion is the group version used to register these objects.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1alpha1"}

var (
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the karpenter.sh/v1alpha1 types to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &NodeOverlay{}, &NodeOverlayList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
