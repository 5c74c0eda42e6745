package packing

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// amounts are resource quantities as integers: millicores for cpu, units for the rest.
type amounts map[corev1.ResourceName]int64

func toAmounts(list corev1.ResourceList) amounts {
	out := make(amounts, len(list))
	for name, q := range list {
		out[name] = quantityValue(name, q)
	}
	return out
}

func quantityValue(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// podAmounts is what a pod takes from a node: its effective requests (init containers and
// overhead included, as the scheduler computes them) and one pod slot.
func podAmounts(pod *corev1.Pod) amounts {
	out := toAmounts(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
	out[corev1.ResourcePods]++
	return out
}

func (a amounts) plus(b amounts) amounts {
	out := make(amounts, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] += v
	}
	return out
}

// fitsIn reports whether every requested amount is available in have. A resource have does
// not list counts as zero, so a pod asking for a GPU never fits a type without one.
func (a amounts) fitsIn(have amounts) bool {
	for k, v := range a {
		if v > 0 && v > have[k] {
			return false
		}
	}
	return true
}

// exceeding lists the resources a asks for beyond have, for explanations.
func (a amounts) exceeding(have amounts) []corev1.ResourceName {
	var out []corev1.ResourceName
	for k, v := range a {
		if v > 0 && v > have[k] {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (a amounts) resourceList() corev1.ResourceList {
	out := make(corev1.ResourceList, len(a))
	for k, v := range a {
		if k == corev1.ResourceCPU {
			out[k] = *resource.NewMilliQuantity(v, resource.DecimalSI)
		} else if k == corev1.ResourceMemory || k == corev1.ResourceEphemeralStorage {
			out[k] = *resource.NewQuantity(v, resource.BinarySI)
		} else {
			out[k] = *resource.NewQuantity(v, resource.DecimalSI)
		}
	}
	return out
}

func (a amounts) String() string {
	list := a.resourceList()
	keys := make([]string, 0, len(list))
	for k := range list {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		q := list[corev1.ResourceName(k)]
		parts = append(parts, fmt.Sprintf("%s=%s", k, q.String()))
	}
	return strings.Join(parts, ", ")
}
