package nodeprovisioning

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/tailor-autoscaler/tailor/provisioner/reservation"
)

// BenchmarkSchedulingCycle is what the plugin adds to the cycle of a pod of a controller
// that fits existing nodes, with nothing planned: Filter on every node, then PreScore over
// them all, as with percentageOfNodesToScore: 100. Nodes carry the annotations a kubelet
// and Karpenter leave on them; none is reserved (the steady state), or some node elsewhere
// is (while consolidation moves pods), which makes the plugin read every node's.
func BenchmarkSchedulingCycle(b *testing.B) {
	for _, bm := range []struct {
		nodes    int
		reserved bool
	}{{nodes: 500}, {nodes: 5000}, {nodes: 5000, reserved: true}} {
		name := fmt.Sprintf("%d nodes", bm.nodes)
		if bm.reserved {
			name += ", one reserved elsewhere"
		}
		b.Run(name, func(b *testing.B) {
			count := bm.nodes
			nodes := make([]fwk.NodeInfo, count)
			for i := range nodes {
				node := st.MakeNode().Name(fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", i/256, i%256)).
					Label(v1.LabelTopologyZone, fmt.Sprintf("us-east-1%c", 'a'+i%3)).
					Annotation("node.alpha.kubernetes.io/ttl", "0").
					Annotation("volumes.kubernetes.io/controller-managed-attach-detach", "true").
					Annotation("karpenter.sh/nodepool-hash", "4185734563018209000").
					Annotation("karpenter.k8s.aws/ec2nodeclass-hash", "9143425374528106000").Obj()
				info := framework.NewNodeInfo()
				info.SetNode(node)
				nodes[i] = info
			}
			pod := st.MakePod().Namespace("default").Name("web-0").UID("uid-0").Obj()
			pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs-web", Controller: ptr.To(true)}}
			reservations := &reservationCount{synced: func() bool { return true }, nodes: sets.New[string]()}
			if bm.reserved {
				reservations.update(st.MakeNode().Name("elsewhere").Annotation(reservation.AnnotationKey, "{}").Obj())
			}
			pl := &NodeProvisioning{provisioner: newSidecar(nil, sidecarOptions{}), clock: clock.RealClock{}, reservations: reservations}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				state := framework.NewCycleState()
				for _, n := range nodes {
					if st := pl.Filter(ctx, state, pod, n); !st.IsSuccess() {
						b.Fatalf("Filter: %v", st)
					}
				}
				if st := pl.PreScore(ctx, state, pod, nodes); st.Code() != fwk.Skip {
					b.Fatalf("PreScore = %v, want Skip", st)
				}
			}
		})
	}
}
