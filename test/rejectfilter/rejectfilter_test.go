package rejectfilter

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

func TestFilter(t *testing.T) {
	labelled := st.MakePod().Name("gpu").Label(Label, "true").Obj()
	plain := st.MakePod().Name("web").Obj()
	launched := st.MakeNode().Name("ip-10-0-0-1").Label(nodePoolLabel, "gpu").Obj()
	static := st.MakeNode().Name("system-0").Obj()
	tests := []struct {
		name string
		pod  *v1.Pod
		node *v1.Node
		want *fwk.Status
	}{
		{"a labelled pod on a launched node", labelled, launched, fwk.NewStatus(fwk.Unschedulable, Reason)},
		{"a labelled pod on another node", labelled, static, nil},
		{"another pod on a launched node", plain, launched, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := framework.NewNodeInfo()
			info.SetNode(tt.node)
			got := (&RejectLaunchedNodes{}).Filter(context.Background(), nil, tt.pod, info)
			type verdict struct {
				Code    fwk.Code
				Message string
			}
			if diff := cmp.Diff(verdict{tt.want.Code(), tt.want.Message()}, verdict{got.Code(), got.Message()}); diff != "" {
				t.Errorf("Filter (-want +got):\n%s", diff)
			}
		})
	}
}
