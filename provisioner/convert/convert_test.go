package convert

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestConvertGolden converts every testdata/*.in.yaml and compares the YAML with
// NAME.out.golden.yaml and the report with NAME.report.golden, or, for bad input, the
// error with NAME.error.golden.
func TestConvertGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.in.yaml"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs in testdata: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".in.yaml")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Convert(data)
			if err != nil {
				golden(t, name+".error.golden", err.Error()+"\n")
				return
			}
			var out, report bytes.Buffer
			if err := res.WriteYAML(&out); err != nil {
				t.Fatal(err)
			}
			if err := res.Report.Write(&report); err != nil {
				t.Fatal(err)
			}
			golden(t, name+".out.golden.yaml", out.String())
			golden(t, name+".report.golden", report.String())
			decodeStrict(t, out.Bytes())
		})
	}
}

func golden(t *testing.T, file, got string) {
	t.Helper()
	path := filepath.Join("testdata", file)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the golden file (go test -update writes it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", file, diff)
	}
}

// decodeStrict checks that the output reads back as v1 objects with no unknown field.
func decodeStrict(t *testing.T, out []byte) {
	t.Helper()
	scheme := runtime.NewScheme()
	utilruntime.Must(karpv1.AddToScheme(scheme))
	utilruntime.Must(awsv1.AddToScheme(scheme))
	dec := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	docs, err := splitDocuments(out)
	if err != nil {
		t.Fatal(err)
	}
	for i, doc := range docs {
		if _, _, err := dec.Decode(doc, nil, nil); err != nil {
			t.Errorf("output document %d does not decode strictly as v1: %v", i+1, err)
		}
	}
}

func TestAMITerms(t *testing.T) {
	tests := []struct {
		name     string
		selector map[string]string
		want     []awsv1.AMISelectorTerm
	}{
		{
			name:     "ids become one term each",
			selector: map[string]string{"aws-ids": "ami-1, ami-2"},
			want:     []awsv1.AMISelectorTerm{{ID: "ami-1"}, {ID: "ami-2"}},
		},
		{
			name:     "name without owners searches self and amazon",
			selector: map[string]string{"aws::name": "my-*"},
			want:     []awsv1.AMISelectorTerm{{Name: "my-*", Owner: "amazon"}, {Name: "my-*", Owner: "self"}},
		},
		{
			name:     "name with tags keeps the tags on every term",
			selector: map[string]string{"aws::name": "my-*", "aws::owners": "123", "team": "a"},
			want:     []awsv1.AMISelectorTerm{{Name: "my-*", Owner: "123", Tags: map[string]string{"team": "a"}}},
		},
		{
			name:     "tags are one term",
			selector: map[string]string{"team": "a", "env": "prod"},
			want:     []awsv1.AMISelectorTerm{{Tags: map[string]string{"team": "a", "env": "prod"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, amiTerms(tt.selector)); diff != "" {
				t.Errorf("amiTerms (-want +got):\n%s", diff)
			}
		})
	}
}
