package packing

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// dims numbers the resources one planning round deals with, so amounts are short vectors
// rather than maps: cpu (millicores), memory, pods and ephemeral storage first, then the
// extended resources (GPUs, hugepages, ...) the round's pods and DaemonSets request.
type dims struct {
	names []corev1.ResourceName
	index map[corev1.ResourceName]int
}

const (
	dimCPU = iota
	dimMemory
	dimPods
	dimEphemeralStorage
)

func newDims() *dims {
	d := &dims{index: map[corev1.ResourceName]int{}}
	for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage} {
		d.add(n)
	}
	return d
}

func (d *dims) add(name corev1.ResourceName) {
	if _, ok := d.index[name]; !ok {
		d.index[name] = len(d.names)
		d.names = append(d.names, name)
	}
}

// vec is an amount of each resource of dims: millicores for cpu, units for the rest.
type vec []int64

// of converts a resource list, ignoring resources the round does not deal with.
func (d *dims) of(list corev1.ResourceList) vec {
	v := make(vec, len(d.names))
	for name, q := range list {
		if i, ok := d.index[name]; ok {
			v[i] = quantityValue(name, q)
		}
	}
	return v
}

func quantityValue(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// requestsOf is podRequests of each pod.
func requestsOf(pods []*corev1.Pod) []corev1.ResourceList {
	out := make([]corev1.ResourceList, len(pods))
	for i, pod := range pods {
		out[i] = podRequests(pod)
	}
	return out
}

// The scheduler counts a pod's requests in two ways (kube-scheduler 1.35): a pod it places
// asks for its spec (NodeResourcesFit's PreFilter); a pod on a node takes, while a resize is
// pending or in progress, the most of its spec, its allocated and its actuated resources,
// and only the allocated and actuated ones when the kubelet found the resize infeasible
// (NodeInfo; InPlacePodVerticalScaling is GA). Pod-level requests count (PodLevelResources,
// beta and on); their in-place resize is alpha and off.
var (
	placedOptions = resourcehelper.PodResourcesOptions{}
	boundOptions  = resourcehelper.PodResourcesOptions{UseStatusResources: true}
)

// PodRequests is what a pod to place asks of a node, as the scheduler counts it: its spec's
// effective requests, init containers and overhead included.
func PodRequests(pod *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(pod, placedOptions)
}

// BoundRequests is what a pod bound to a node takes from it, as the scheduler counts it: its
// spec, or more while a resize is under way (see boundOptions).
func BoundRequests(pod *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(pod, boundOptions)
}

// podRequests is what a pod to place takes from a node: PodRequests and one pod slot.
func podRequests(pod *corev1.Pod) corev1.ResourceList {
	return withPodSlot(PodRequests(pod))
}

// boundRequests is what a pod on a node takes from it: BoundRequests and one pod slot.
func boundRequests(pod *corev1.Pod) corev1.ResourceList {
	return withPodSlot(BoundRequests(pod))
}

func withPodSlot(requests corev1.ResourceList) corev1.ResourceList {
	requests[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
	return requests
}

func (v vec) add(o vec) {
	for i := range v {
		v[i] += o[i]
	}
}

func (v vec) addTimes(o vec, k int64) {
	for i := range v {
		v[i] += o[i] * k
	}
}

func (v vec) sub(o vec) {
	for i := range v {
		v[i] -= o[i]
	}
}

func (v vec) minus(o vec) vec {
	out := make(vec, len(v))
	for i := range v {
		out[i] = v[i] - o[i]
	}
	return out
}

func (v vec) plus(o vec) vec {
	out := make(vec, len(v))
	for i := range v {
		out[i] = v[i] + o[i]
	}
	return out
}

// fits reports whether every requested amount is available in have.
func (v vec) fits(have vec) bool {
	for i, x := range v {
		if x > 0 && x > have[i] {
			return false
		}
	}
	return true
}

// times is how many copies of v fit in have.
func (v vec) times(have vec) int64 {
	n := int64(math.MaxInt64)
	for i, x := range v {
		if x <= 0 {
			continue
		}
		if have[i] < x {
			return 0
		}
		if k := have[i] / x; k < n {
			n = k
		}
	}
	return n
}

// atMost reports whether no amount exceeds limit.
func (v vec) atMost(limit vec) bool {
	for i := range v {
		if v[i] > limit[i] {
			return false
		}
	}
	return true
}

// key identifies the amounts, as a map key.
func (v vec) key() string {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.AppendVarint(b, x)
	}
	return string(b)
}

func (v vec) value(prices []float64) float64 {
	total := 0.0
	for i, x := range v {
		total += float64(x) * prices[i]
	}
	return total
}

// exceeding lists the resources v asks for beyond have, for explanations.
func (d *dims) exceeding(v, have vec) []string {
	var out []string
	for i, x := range v {
		if x > 0 && x > have[i] {
			out = append(out, string(d.names[i]))
		}
	}
	return out
}

func (d *dims) list(v vec) corev1.ResourceList {
	out := make(corev1.ResourceList, len(v))
	for i, x := range v {
		if x == 0 {
			continue
		}
		name := d.names[i]
		switch name {
		case corev1.ResourceCPU:
			out[name] = *resource.NewMilliQuantity(x, resource.DecimalSI)
		case corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
			out[name] = *resource.NewQuantity(x, resource.BinarySI)
		default:
			out[name] = *resource.NewQuantity(x, resource.DecimalSI)
		}
	}
	return out
}

// format renders amounts as users write them, in dimension order, skipping zeros.
func (d *dims) format(v vec) string {
	list := d.list(v)
	parts := make([]string, 0, len(list))
	for _, name := range d.names {
		if q, ok := list[name]; ok {
			parts = append(parts, fmt.Sprintf("%s=%s", name, q.String()))
		}
	}
	return strings.Join(parts, ", ")
}
