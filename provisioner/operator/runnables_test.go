package operator

import (
	"context"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1alpha1"
	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
)

func TestIgnoredOverlaysAreReportedOnce(t *testing.T) {
	tests := []struct {
		name    string
		objects []runtime.Object
		want    []string
	}{
		{name: "no overlay says nothing"},
		{
			name: "an overlay is reported with the gate to turn on",
			objects: []runtime.Object{&v1alpha1.NodeOverlay{
				ObjectMeta: metav1.ObjectMeta{Name: "savings"},
				Spec:       v1alpha1.NodeOverlaySpec{Price: ptr.To("0.1")},
			}},
			want: []string{`"level"=0 "msg"="ignoring NodeOverlays: the NodeOverlay feature gate is off (--feature-gates=NodeOverlay=true applies them)" "nodeOverlay"="savings"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			logger := funcr.New(func(prefix, args string) { got = append(got, args) }, funcr.Options{})
			reader := fake.NewClientBuilder().WithScheme(apischeme.New()).WithRuntimeObjects(tt.objects...).Build()
			reportIgnoredOverlays(log.IntoContext(context.Background(), logger), reader)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("log (-want +got):\n%s", diff)
			}
		})
	}
}
