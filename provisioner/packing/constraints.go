package packing

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// The checks below use the scheduler's own helpers (component-helpers), so a pod is
// planned onto a node only when the TaintToleration and NodeAffinity filters will accept it.

// tolerates reports whether the pod tolerates every NoSchedule and NoExecute taint, as the
// TaintToleration filter requires.
func tolerates(pod *corev1.Pod, taints []corev1.Taint) bool {
	_, untolerated := untoleratedTaint(pod, taints)
	return !untolerated
}

func untoleratedTaint(pod *corev1.Pod, taints []corev1.Taint) (corev1.Taint, bool) {
	return corev1helpers.FindMatchingUntoleratedTaint(taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	})
}

func requiredAffinity(pod *corev1.Pod) nodeaffinity.RequiredNodeAffinity {
	return nodeaffinity.GetRequiredNodeAffinity(pod)
}

// matchesNode reports whether the pod's node selector and required node affinity accept
// the node.
func matchesNode(pod *corev1.Pod, node *corev1.Node) bool {
	ok, _ := requiredAffinity(pod).Match(node)
	return ok
}

func nodeWith(labels map[string]string, taints []corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
}

// constraintKey identifies pods that the same offers accept: same node selector, required
// node affinity and tolerations. Replicas of one Deployment share it.
func constraintKey(pod *corev1.Pod) string {
	var required *corev1.NodeSelector
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		required = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	b, _ := json.Marshal(struct {
		Selector    map[string]string
		Required    *corev1.NodeSelector
		Tolerations []corev1.Toleration
	}{pod.Spec.NodeSelector, required, pod.Spec.Tolerations})
	return string(b)
}

// explain says why the pool cannot take the pod: a taint it does not tolerate, no offer
// matching its node selector and affinity, or no instance type large enough.
func explain(p *pool, pod *corev1.Pod, need amounts) string {
	if taint, ok := untoleratedTaint(pod, p.nodePool.Spec.Template.Spec.Taints); ok {
		return fmt.Sprintf("the pod does not tolerate taint %s", taint.ToString())
	}
	if len(p.offers) == 0 {
		return "no instance type is available (check the NodePool requirements and its EC2NodeClass)"
	}
	affinity := requiredAffinity(pod)
	var largest *offer
	for _, o := range p.offers {
		if ok, _ := affinity.Match(nodeWith(o.labels, nil)); !ok {
			continue
		}
		if largest == nil || closer(need, o, largest) {
			largest = o
		}
	}
	if largest == nil {
		return fmt.Sprintf("no instance type satisfies both the NodePool requirements and the pod's node selector and affinity (%s)", describeSelector(pod))
	}
	return fmt.Sprintf("no instance type has room for the pod's requests (%s): closest is %s with allocatable %s, short of %s",
		need, largest.it.Name, largest.allocatable, joinNames(need.exceeding(largest.allocatable)))
}

// closer reports whether a leaves fewer of the pod's resources short than b, then more room.
func closer(need amounts, a, b *offer) bool {
	sa, sb := len(need.exceeding(a.allocatable)), len(need.exceeding(b.allocatable))
	if sa != sb {
		return sa < sb
	}
	return a.allocatable[corev1.ResourceCPU]+a.allocatable[corev1.ResourceMemory]>>20 >
		b.allocatable[corev1.ResourceCPU]+b.allocatable[corev1.ResourceMemory]>>20
}

func describeSelector(pod *corev1.Pod) string {
	var parts []string
	for k, v := range pod.Spec.NodeSelector {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, e := range term.MatchExpressions {
				parts = append(parts, fmt.Sprintf("%s %s %v", e.Key, e.Operator, e.Values))
			}
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func joinNames(names []corev1.ResourceName) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}
