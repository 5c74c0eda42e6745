package localaws

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNewValidatesOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{name: "defaults", opts: Options{}},
		{name: "cluster name with dashes and underscores", opts: Options{ClusterName: "team_a-prod"}},
		{name: "cluster name with a dot", opts: Options{ClusterName: "team.a"}, wantErr: `cluster name "team.a" must be`},
		{name: "cluster name starting with a dash", opts: Options{ClusterName: "-a"}, wantErr: `cluster name "-a" must be`},
		{name: "negative launch delay", opts: Options{LaunchDelay: -time.Second}, wantErr: "launch delay must not be negative, got -1s"},
		{name: "negative boot delay", opts: Options{BootDelay: -time.Second}, wantErr: "boot delay must not be negative, got -1s"},
		{name: "negative shutdown delay", opts: Options{ShutdownDelay: -time.Second}, wantErr: "shutdown delay must not be negative, got -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.opts)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.NotEmpty(t, s.clusterName)
			require.Nil(t, s.nodes, "node registration is off without a Kubernetes client")
		})
	}
}
