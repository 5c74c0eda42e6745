package packing

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// volumeIndex turns a pod's persistent volumes into node constraints, as the VolumeBinding
// and VolumeZone filters see them: a bound volume's node affinity and zone labels, or for
// a claim a WaitForFirstConsumer StorageClass will provision, its allowed topologies.
type volumeIndex struct {
	claims       map[string]*corev1.PersistentVolumeClaim
	volumes      map[string]*corev1.PersistentVolume
	classes      map[string]*storagev1.StorageClass
	defaultClass *storagev1.StorageClass
}

const defaultStorageClassAnnotation = "storageclass.kubernetes.io/is-default-class"

func newVolumeIndex(v Volumes) *volumeIndex {
	x := &volumeIndex{claims: map[string]*corev1.PersistentVolumeClaim{}, volumes: map[string]*corev1.PersistentVolume{}, classes: map[string]*storagev1.StorageClass{}}
	for _, c := range v.Claims {
		x.claims[c.Namespace+"/"+c.Name] = c
	}
	for _, pv := range v.PersistentVols {
		x.volumes[pv.Name] = pv
	}
	for _, sc := range v.StorageClasses {
		x.classes[sc.Name] = sc
		if sc.Annotations[defaultStorageClassAnnotation] == "true" {
			x.defaultClass = sc
		}
	}
	return x
}

// constraints returns the node selectors the pod's volumes add, or why no node can take
// the pod.
func (x *volumeIndex) constraints(pod *corev1.Pod) ([]*corev1.NodeSelector, string) {
	var out []*corev1.NodeSelector
	for _, v := range pod.Spec.Volumes {
		var spec *corev1.PersistentVolumeClaimSpec
		name := ""
		switch {
		case v.PersistentVolumeClaim != nil:
			name = v.PersistentVolumeClaim.ClaimName
			claim, ok := x.claims[pod.Namespace+"/"+name]
			if !ok {
				return nil, fmt.Sprintf("persistentvolumeclaim %q not found", name)
			}
			spec = &claim.Spec
		case v.Ephemeral != nil && v.Ephemeral.VolumeClaimTemplate != nil:
			name = pod.Name + "-" + v.Name
			if claim, ok := x.claims[pod.Namespace+"/"+name]; ok {
				spec = &claim.Spec
			} else {
				spec = &v.Ephemeral.VolumeClaimTemplate.Spec
			}
		default:
			continue
		}
		if spec.VolumeName != "" {
			pv, ok := x.volumes[spec.VolumeName]
			if !ok {
				return nil, fmt.Sprintf("persistentvolume %q of claim %q not found", spec.VolumeName, name)
			}
			if pv.Spec.NodeAffinity != nil && pv.Spec.NodeAffinity.Required != nil {
				out = append(out, pv.Spec.NodeAffinity.Required)
			}
			for _, key := range []string{corev1.LabelTopologyZone, corev1.LabelFailureDomainBetaZone} {
				if z, ok := pv.Labels[key]; ok {
					out = append(out, &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
						{Key: key, Operator: corev1.NodeSelectorOpIn, Values: strings.Split(z, "__")},
					}}}})
				}
			}
			continue
		}
		class := x.defaultClass
		if spec.StorageClassName != nil {
			class = x.classes[*spec.StorageClassName]
			if class == nil && *spec.StorageClassName != "" {
				return nil, fmt.Sprintf("storageclass %q of claim %q not found", *spec.StorageClassName, name)
			}
		}
		if class == nil {
			return nil, fmt.Sprintf("claim %q is not bound and has no StorageClass to provision it", name)
		}
		if class.VolumeBindingMode == nil || *class.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
			return nil, fmt.Sprintf("claim %q is not bound yet and StorageClass %q binds immediately: wait for the volume or use volumeBindingMode WaitForFirstConsumer", name, class.Name)
		}
		if len(class.AllowedTopologies) > 0 {
			sel := &corev1.NodeSelector{}
			for _, term := range class.AllowedTopologies {
				nt := corev1.NodeSelectorTerm{}
				for _, e := range term.MatchLabelExpressions {
					nt.MatchExpressions = append(nt.MatchExpressions, corev1.NodeSelectorRequirement{Key: e.Key, Operator: corev1.NodeSelectorOpIn, Values: e.Values})
				}
				sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, nt)
			}
			out = append(out, sel)
		}
	}
	return out, ""
}
