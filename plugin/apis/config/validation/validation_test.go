package validation

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tailor-autoscaler/tailor/plugin/apis/config"
)

func TestValidateNodeProvisioningArgs(t *testing.T) {
	valid := func() *config.NodeProvisioningArgs {
		return &config.NodeProvisioningArgs{ProvisionerSocket: "/var/run/tailor/provisioner.sock", RequestTimeout: metav1.Duration{Duration: 5 * time.Second}}
	}
	tests := []struct {
		name   string
		mutate func(*config.NodeProvisioningArgs)
		want   []string
	}{
		{name: "defaults are valid", mutate: func(*config.NodeProvisioningArgs) {}},
		{
			name:   "a relative socket path is refused",
			mutate: func(a *config.NodeProvisioningArgs) { a.ProvisionerSocket = "provisioner.sock" },
			want:   []string{`args.provisionerSocket: Invalid value: "provisioner.sock": must be the absolute path of the provisioner's unix socket, for example /var/run/tailor/provisioner.sock`},
		},
		{
			name:   "a non-positive timeout is refused",
			mutate: func(a *config.NodeProvisioningArgs) { a.RequestTimeout.Duration = 0 },
			want:   []string{`args.requestTimeout: Invalid value: "0s": must be a positive duration, for example 5s`},
		},
		{
			name:   "NodePool names must be names",
			mutate: func(a *config.NodeProvisioningArgs) { a.NodePools = []string{"general", "Bad_Name"} },
			want:   []string{`args.nodePools[1]: Invalid value: "Bad_Name": is not a NodePool name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		},
		{
			name: "a malformed NodePool selector is refused",
			mutate: func(a *config.NodeProvisioningArgs) {
				a.NodePoolSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}}}
			},
			want: []string{`args.nodePoolSelector.matchExpressions[0].operator: Invalid value: "Near": not a valid selector operator`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := valid()
			tt.mutate(args)
			var got []string
			for _, e := range ValidateNodeProvisioningArgs(field.NewPath("args"), args) {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
