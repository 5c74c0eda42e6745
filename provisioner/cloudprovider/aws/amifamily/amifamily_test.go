package amifamily

import (
	"testing"

	"k8s.io/utils/ptr"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
)

func TestAMIFamily(t *testing.T) {
	tests := []struct {
		name    string
		family  *string
		alias   string
		want    string
		wantErr string
	}{
		{name: "inferred from the alias", alias: "al2023@latest", want: "AL2023"},
		{name: "bottlerocket alias", alias: "bottlerocket@latest", want: "Bottlerocket"},
		{name: "windows2022 alias", alias: "windows2022@latest", want: "Windows2022"},
		{name: "windows2019 alias", alias: "windows2019@latest", want: "Windows2019"},
		{
			name: "a Windows family contradicting a Linux alias is refused", family: ptr.To("Windows2022"), alias: "al2023@latest",
			wantErr: "spec.amiFamily Windows2022 contradicts the alias of amiSelectorTerms (AL2023): remove amiFamily or set it to AL2023 or Custom",
		},
		{name: "set and consistent", family: ptr.To("AL2"), alias: "al2@latest", want: "AL2"},
		{name: "Custom goes with any alias", family: ptr.To("Custom"), alias: "al2023@latest", want: "Custom"},
		{name: "set without an alias", family: ptr.To("Bottlerocket"), want: "Bottlerocket"},
		{
			name: "contradicting the alias is refused", family: ptr.To("AL2"), alias: "al2023@latest",
			wantErr: "spec.amiFamily AL2 contradicts the alias of amiSelectorTerms (AL2023): remove amiFamily or set it to AL2023 or Custom",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			class := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{AMIFamily: tt.family}}
			if tt.alias != "" {
				class.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: tt.alias}}
			} else {
				class.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{ID: "ami-123"}}
			}
			got, err := Of(class)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Of() error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Of() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
