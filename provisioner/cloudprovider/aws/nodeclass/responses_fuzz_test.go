package nodeclass

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/stretchr/testify/require"
)

// FuzzParameterValue reads SSM GetParameter responses with fields missing: an error naming
// the parameter, or one AMI id.
func FuzzParameterValue(f *testing.F) {
	f.Add("ami-0123456789abcdef0", false, false)
	f.Add("", false, false)
	f.Add(" ami-1 ", false, false)
	f.Add("ami-1 ami-2", false, false)
	f.Add("x", true, false)
	f.Add("x", false, true)
	f.Fuzz(func(t *testing.T, value string, noParameter, noValue bool) {
		out := &ssm.GetParameterOutput{Parameter: &ssmtypes.Parameter{Value: aws.String(value)}}
		if noValue {
			out.Parameter.Value = nil
		}
		if noParameter {
			out.Parameter = nil
		}
		id, err := ParameterValue("/aws/service/eks/optimized-ami/x", out)
		if err != nil {
			require.Contains(t, err.Error(), "reading SSM parameter /aws/service/eks/optimized-ami/x: ")
			require.Empty(t, id)
			return
		}
		require.NotEmpty(t, id)
		require.Equal(t, strings.TrimSpace(value), id)
		require.Equal(t, []string{id}, strings.Fields(id))
	})
}
