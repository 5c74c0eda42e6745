package convert

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// FuzzConvert converts any file: either an error naming the document, or v1 objects whose
// YAML, converted again, passes through unchanged, and stays bounded by the input's size.
func FuzzConvert(f *testing.F) {
	inputs, err := filepath.Glob("testdata/*.in.yaml")
	require.NoError(f, err)
	for _, name := range inputs {
		data, err := os.ReadFile(name)
		require.NoError(f, err)
		f.Add(data)
	}
	for _, s := range []string{
		"", "---\n---\n", "[]", "null", "{}", "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\n",
		"apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: a}\nspec: {template: {spec: {requirements: [null]}}}\n",
		"apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: a}\nspec: {disruption: {budgets: [{nodes: \"-1%\", schedule: \"@every 1s\"}]}}\n",
		"apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: a}\nspec: {ttlSecondsAfterEmpty: -1, ttlSecondsUntilExpired: 9223372036854775807}\n",
		"apiVersion: karpenter.k8s.aws/v1alpha1\nkind: AWSNodeTemplate\nmetadata: {name: a}\nspec: {blockDeviceMappings: [{ebs: {volumeSize: 1Ei}}], userData: 1}\n",
		"apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: a}\nspec: {limits: {cpu: NaN}}\n",
		"a: &a [*a]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := Convert(data)
		if err != nil {
			require.Nil(t, res)
			require.Contains(t, err.Error(), "document", "error %q names no document", err)
			return
		}
		for _, obj := range res.Objects {
			switch obj.(type) {
			case *karpv1.NodePool, *awsv1.EC2NodeClass:
			default:
				t.Fatalf("converted object of type %T", obj)
			}
		}
		var out bytes.Buffer
		require.NoError(t, res.WriteYAML(&out))
		require.LessOrEqual(t, out.Len(), 64*len(data)+16<<10, "output of %d bytes for %d bytes in", out.Len(), len(data))
		again, err := Convert(out.Bytes())
		require.NoError(t, err, "converting the output again:\n%s", out.String())
		var outAgain bytes.Buffer
		require.NoError(t, again.WriteYAML(&outAgain))
		require.Equal(t, out.String(), outAgain.String(), "v1 output does not pass through unchanged")
		for _, e := range again.Report.Entries {
			require.False(t, e.NotCarriedOver && !strings.Contains(e.Field, "status"), "converting v1 output again drops %s: %s", e.Field, e.Message)
		}
	})
}
