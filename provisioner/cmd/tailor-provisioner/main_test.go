package main

import (
	"flag"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tailor-autoscaler/tailor/provisioner/operator"
)

func TestKubeAPIFlags(t *testing.T) {
	type limits struct {
		QPS   float64
		Burst int
	}
	tests := []struct {
		name string
		args []string
		want limits
		// err is the parse or validation error.
		err string
	}{
		{name: "the defaults", want: limits{QPS: 200, Burst: 300}},
		{name: "both set", args: []string{"--kube-api-qps=50", "--kube-api-burst=100"}, want: limits{QPS: 50, Burst: 100}},
		{name: "a fractional rate", args: []string{"--kube-api-qps=0.5", "--kube-api-burst=1"}, want: limits{QPS: 0.5, Burst: 1}},
		{name: "a rate that is not a number", args: []string{"--kube-api-qps=fast"}, want: limits{QPS: 0, Burst: 300},
			err: `invalid value "fast" for flag -kube-api-qps: parse error`},
		{name: "no rate", args: []string{"--kube-api-qps=0"}, want: limits{QPS: 0, Burst: 300}, err: "--kube-api-qps (0) must be positive"},
		{name: "a negative rate", args: []string{"--kube-api-qps=-1"}, want: limits{QPS: -1, Burst: 300}, err: "--kube-api-qps (-1) must be positive"},
		{name: "no burst", args: []string{"--kube-api-burst=0"}, want: limits{QPS: 200, Burst: 0}, err: "--kube-api-burst (0) must be at least 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("tailor-provisioner", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			opts := operator.BindFlags(fs)
			err := fs.Parse(append([]string{"--cluster-name=prod"}, tt.args...))
			if err == nil {
				err = opts.Validate()
			}
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tt.err, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, limits{QPS: opts.KubeAPIQPS, Burst: opts.KubeAPIBurst}); diff != "" {
				t.Errorf("limits (-want +got):\n%s", diff)
			}
		})
	}
}
