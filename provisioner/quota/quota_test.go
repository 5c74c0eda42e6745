package quota

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const gpu corev1.ResourceName = "nvidia.com/gpu"

// list parses name=quantity pairs: list("cpu", "2", "memory", "1Gi").
func list(pairs ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		l[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return l
}

// pods are n pods of the namespace, named prefix-0…, whose one container requests req.
func pods(namespace, prefix string, n int, req corev1.ResourceList) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("%s-%d", prefix, i)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
				Requests: req.DeepCopy(),
			}}}},
		}
	}
	return out
}

// interleave takes one pod of each list in turn.
func interleave(lists ...[]*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for i := 0; ; i++ {
		more := false
		for _, l := range lists {
			if i < len(l) {
				out = append(out, l[i])
				more = true
			}
		}
		if !more {
			return out
		}
	}
}

// outcome is what an Admit test compares: the pods admitted, in order, and the pods
// refused with their quota's namespace and the reason.
type outcome struct {
	Admitted []string
	Refused  []string
}

func summarize(admitted []*corev1.Pod, refused []Refusal) outcome {
	var o outcome
	for _, p := range admitted {
		o.Admitted = append(o.Admitted, p.Namespace+"/"+p.Name)
	}
	for _, r := range refused {
		o.Refused = append(o.Refused, fmt.Sprintf("%s/%s [%s]: %s", r.Pod.Namespace, r.Pod.Name, r.Quota.Namespace, r.Reason))
	}
	return o
}

func TestAdmit(t *testing.T) {
	oneCPU := list("cpu", "1", "memory", "1Gi")
	for _, tc := range []struct {
		name   string
		quotas []Quota
		used   map[string]corev1.ResourceList
		pods   []*corev1.Pod
		want   outcome
	}{
		{
			name:   "a Deployment of 10 pods against a max that fits 5 gets 5",
			quotas: []Quota{{Namespace: "team-a", Min: list("cpu", "20", "memory", "20Gi"), Max: list("cpu", "7", "memory", "20Gi")}},
			used:   map[string]corev1.ResourceList{"team-a": list("cpu", "2", "memory", "2Gi")},
			pods:   pods("team-a", "web", 10, oneCPU),
			want: outcome{
				Admitted: []string{"team-a/web-0", "team-a/web-1", "team-a/web-2", "team-a/web-3", "team-a/web-4"},
				Refused: []string{
					"team-a/web-5 [team-a]: namespace team-a would use cpu 8 with this pod, over its ElasticQuota max of 7",
					"team-a/web-6 [team-a]: namespace team-a would use cpu 8 with this pod, over its ElasticQuota max of 7",
					"team-a/web-7 [team-a]: namespace team-a would use cpu 8 with this pod, over its ElasticQuota max of 7",
					"team-a/web-8 [team-a]: namespace team-a would use cpu 8 with this pod, over its ElasticQuota max of 7",
					"team-a/web-9 [team-a]: namespace team-a would use cpu 8 with this pod, over its ElasticQuota max of 7",
				},
			},
		},
		{
			name:   "pods of a namespace without a quota are admitted whatever the others use",
			quotas: []Quota{{Namespace: "team-a", Min: list("cpu", "1"), Max: list("cpu", "1")}},
			used:   map[string]corev1.ResourceList{"team-a": list("cpu", "5"), "free": list("cpu", "100")},
			pods:   pods("free", "batch", 3, list("cpu", "10")),
			want:   outcome{Admitted: []string{"free/batch-0", "free/batch-1", "free/batch-2"}},
		},
		{
			name: "beyond its min while another namespace is under its own, but the mins together are used up: refused",
			quotas: []Quota{
				{Namespace: "team-a", Min: list("cpu", "4", "memory", "64Gi")},
				{Namespace: "team-b", Min: list("cpu", "10", "memory", "64Gi")},
			},
			used: map[string]corev1.ResourceList{"team-a": list("cpu", "4"), "team-b": list("cpu", "9")},
			pods: pods("team-a", "job", 2, list("cpu", "1")),
			want: outcome{
				Admitted: []string{"team-a/job-0"},
				Refused: []string{
					"team-a/job-1 [team-a]: namespace team-a would use cpu 6 with this pod (its ElasticQuota min is 4), and all namespaces with an ElasticQuota together 15, over the sum of their mins of 14",
				},
			},
		},
		{
			name: "beyond its min while the mins together are not used up: admitted, borrowing",
			quotas: []Quota{
				{Namespace: "team-a", Min: list("cpu", "4", "memory", "64Gi"), Max: list("cpu", "20", "memory", "64Gi")},
				{Namespace: "team-b", Min: list("cpu", "10", "memory", "64Gi")},
			},
			used: map[string]corev1.ResourceList{"team-a": list("cpu", "4", "memory", "8Gi")},
			pods: pods("team-a", "job", 3, list("cpu", "3", "memory", "1Gi")),
			want: outcome{
				Admitted: []string{"team-a/job-0", "team-a/job-1", "team-a/job-2"},
			},
		},
		{
			name: "under its own min while others borrowed the rest of the mins: refused, as CapacityScheduling preempts the borrowers",
			quotas: []Quota{
				{Namespace: "team-a", Min: list("cpu", "10", "memory", "64Gi")},
				{Namespace: "team-b", Min: list("cpu", "4", "memory", "64Gi")},
			},
			used: map[string]corev1.ResourceList{"team-b": list("cpu", "14")},
			pods: pods("team-a", "job", 1, list("cpu", "2")),
			want: outcome{Refused: []string{
				"team-a/job-0 [team-a]: namespace team-a would use cpu 2 with this pod (its ElasticQuota min is 10), and all namespaces with an ElasticQuota together 16, over the sum of their mins of 14",
			}},
		},
		{
			name: "a resource a max does not name is not capped, but the mins still bound it",
			quotas: []Quota{
				{Namespace: "team-a", Min: list("cpu", "8", "memory", "64Gi", string(gpu), "2"), Max: list("cpu", "8", "memory", "64Gi")},
				{Namespace: "team-b", Min: list("cpu", "8", "memory", "64Gi", string(gpu), "8")},
			},
			pods: pods("team-a", "train", 3, list("cpu", "1", string(gpu), "4")),
			want: outcome{
				Admitted: []string{"team-a/train-0", "team-a/train-1"},
				Refused: []string{
					"team-a/train-2 [team-a]: namespace team-a would use nvidia.com/gpu 12 with this pod (its ElasticQuota min is 2), and all namespaces with an ElasticQuota together 12, over the sum of their mins of 10",
				},
			},
		},
		{
			name:   "a max that does not name memory allows a pod none",
			quotas: []Quota{{Namespace: "team-a", Min: list("cpu", "8", "memory", "8Gi"), Max: list("cpu", "8")}},
			pods:   append(pods("team-a", "cpu-only", 1, list("cpu", "1")), pods("team-a", "web", 1, oneCPU)...),
			want: outcome{
				Admitted: []string{"team-a/cpu-only-0"},
				Refused: []string{
					"team-a/web-0 [team-a]: namespace team-a would use memory 1Gi with this pod, over its ElasticQuota max of 0 (a max that does not name memory allows none)",
				},
			},
		},
		{
			name:   "a quota without a max caps nothing",
			quotas: []Quota{{Namespace: "team-a", Min: list("cpu", "100", "memory", "100Gi", "ephemeral-storage", "10Gi")}},
			pods:   pods("team-a", "web", 2, list("cpu", "40", "memory", "1Gi", "ephemeral-storage", "1Gi")),
			want:   outcome{Admitted: []string{"team-a/web-0", "team-a/web-1"}},
		},
		{
			name:   "a pod too large is refused and a smaller one behind it still admitted",
			quotas: []Quota{{Namespace: "team-a", Min: list("cpu", "8", "memory", "8Gi"), Max: list("cpu", "8", "memory", "8Gi")}},
			pods:   append(pods("team-a", "big", 1, list("cpu", "9")), pods("team-a", "small", 1, list("cpu", "8"))...),
			want: outcome{
				Admitted: []string{"team-a/small-0"},
				Refused:  []string{"team-a/big-0 [team-a]: namespace team-a would use cpu 9 with this pod, over its ElasticQuota max of 8"},
			},
		},
		{
			name: "namespaces interleaved each fill their own max",
			quotas: []Quota{
				{Namespace: "team-a", Min: list("cpu", "10", "memory", "10Gi"), Max: list("cpu", "2", "memory", "10Gi")},
				{Namespace: "team-b", Min: list("cpu", "10", "memory", "10Gi"), Max: list("cpu", "3", "memory", "10Gi")},
			},
			pods: interleave(pods("team-a", "a", 4, oneCPU), pods("team-b", "b", 4, oneCPU), pods("free", "c", 2, oneCPU)),
			want: outcome{
				Admitted: []string{"team-a/a-0", "team-b/b-0", "free/c-0", "team-a/a-1", "team-b/b-1", "free/c-1", "team-b/b-2"},
				Refused: []string{
					"team-a/a-2 [team-a]: namespace team-a would use cpu 3 with this pod, over its ElasticQuota max of 2",
					"team-a/a-3 [team-a]: namespace team-a would use cpu 3 with this pod, over its ElasticQuota max of 2",
					"team-b/b-3 [team-b]: namespace team-b would use cpu 4 with this pod, over its ElasticQuota max of 3",
				},
			},
		},
		{
			name:   "a resource the mins do not name bounds every pod that asks for it",
			quotas: []Quota{{Namespace: "team-a", Min: list("cpu", "100", "memory", "100Gi")}},
			pods:   pods("team-a", "web", 1, list("cpu", "1", "ephemeral-storage", "1Gi")),
			want: outcome{Refused: []string{
				"team-a/web-0 [team-a]: namespace team-a would use ephemeral-storage 1Gi with this pod (its ElasticQuota min is 0), and all namespaces with an ElasticQuota together 1Gi, over the sum of their mins of 0",
			}},
		},
		{
			name: "no quotas admit everything",
			used: map[string]corev1.ResourceList{"team-a": list("cpu", "1000")},
			pods: pods("team-a", "web", 2, oneCPU),
			want: outcome{Admitted: []string{"team-a/web-0", "team-a/web-1"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := fmt.Sprint(tc.used)
			got := summarize(Admit(tc.quotas, tc.used, tc.pods))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Admit (-want +got):\n%s", diff)
			}
			if after := fmt.Sprint(tc.used); after != before {
				t.Errorf("Admit changed used from %s to %s", before, after)
			}
		})
	}
}

func TestUsed(t *testing.T) {
	withInit := pods("team-a", "init", 1, list("cpu", "1", "memory", "1Gi"))[0]
	withInit.Spec.InitContainers = []corev1.Container{{Name: "setup", Resources: corev1.ResourceRequirements{Requests: list("cpu", "3")}}}
	withInit.Spec.Overhead = list("memory", "128Mi")
	withSidecar := pods("team-a", "sidecar", 1, list("cpu", "2"))[0]
	withSidecar.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Resources: corev1.ResourceRequirements{Requests: list("cpu", "1")}}}
	podLevel := pods("team-b", "pod-level", 1, list("cpu", "1"))[0]
	podLevel.Spec.Resources = &corev1.ResourceRequirements{Requests: list("cpu", "4")}
	done := pods("team-b", "done", 2, list("cpu", "8"))
	done[0].Status.Phase = corev1.PodSucceeded
	done[1].Status.Phase = corev1.PodFailed
	running := pods("team-b", "web", 2, list("cpu", "500m", string(gpu), "1"))
	running[0].Status.Phase = corev1.PodRunning

	got := Used(append([]*corev1.Pod{withInit, withSidecar, podLevel}, append(done, running...)...))
	want := map[string]corev1.ResourceList{
		// The init container's 3 CPUs outweigh the container's 1; the sidecar counts as an
		// init container only (2 CPUs, not 3).
		"team-a": list("cpu", "5", "memory", "1152Mi"),
		// Pod-level requests are left out; finished pods count for nothing.
		"team-b": list("cpu", "2", string(gpu), "2"),
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("Used (-want +got):\n%s", diff)
	}
}
