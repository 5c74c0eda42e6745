package scheduler

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/version"
)

func TestSkew(t *testing.T) {
	own := builtMinor.Minor()
	tests := []struct {
		server   string
		wantErr  bool
		wantNote bool
	}{
		{server: fmt.Sprintf("v1.%d.2", own-1), wantErr: true},
		{server: fmt.Sprintf("v1.%d.4", own)},
		{server: fmt.Sprintf("v1.%d.3", own+1)},
		{server: fmt.Sprintf("v1.%d.2-eks-1234", own+2), wantNote: true},
		{server: "v2.0.0", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.server, func(t *testing.T) {
			note, err := skew(version.MustParseGeneric(tt.server))
			if diff := cmp.Diff([]bool{tt.wantErr, tt.wantNote}, []bool{err != nil, note != ""}); diff != "" {
				t.Errorf("skew(%s) = %q, %v (-want error, note +got):\n%s", tt.server, note, err, diff)
			}
		})
	}
	_, err := skew(version.MustParseGeneric(fmt.Sprintf("v1.%d.9", own-1)))
	want := fmt.Sprintf("the API server runs Kubernetes 1.%d.9, older than tailor-scheduler's 1.%d: kube-scheduler may not be newer than the API server (it watches APIs older servers lack); upgrade the cluster or run a Tailor built on 1.%d", own-1, own, own-1)
	if err == nil || err.Error() != want {
		t.Errorf("skew of an older server: %v, want %q", err, want)
	}
}
