package simulate

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/equality"
)

// FuzzDecodeFile reads any manifest file: either an error naming the file (and the document,
// once the file splits), or one supported object per source, each of which encodes to JSON
// and decodes back to an equal object.
func FuzzDecodeFile(f *testing.F) {
	cluster, err := os.ReadFile("testdata/cluster.yaml")
	require.NoError(f, err)
	f.Add(cluster)
	for _, s := range []string{
		"", "---\n", "{}", "[]", "null", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"}}{"apiVersion":"v1","kind":"Node"}`,
		"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: List\n  items: []\n",
		"apiVersion: v1\nkind: List\nitems: [null, 1]\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, resources: {requests: {cpu: 1e400}}}]}\n",
		"apiVersion: v1\nkind: Pod\nspec: {containers: [{name: c}], containers: []}\n",
		"apiVersion: v1\nkind: ConfigMapList\nitems: []\n",
		"apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: a}\nspec: {template: {spec: {requirements: [{key: a, operator: Gt, values: [x], minValues: -1}]}}}\n",
		"apiVersion: v1\nkind: Secret\n",
		"\xff\xfe",
	} {
		f.Add([]byte(s))
	}
	d := newDecoder()
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, sources, err := d.decodeFile("fuzz.yaml", data)
		if err != nil {
			require.Nil(t, objs)
			require.True(t, strings.HasPrefix(err.Error(), "fuzz.yaml: "), "error %q names no file", err)
			return
		}
		require.Len(t, sources, len(objs))
		for i, obj := range objs {
			require.NotNil(t, obj)
			encoded, err := json.Marshal(obj)
			require.NoError(t, err)
			again, err := d.decodeObject(encoded, sources[i])
			require.NoError(t, err, "decoding %s again: %s", sources[i], encoded)
			require.Equal(t, reflect.TypeOf(obj), reflect.TypeOf(again))
			require.True(t, equality.Semantic.DeepEqual(obj, again), "%s changes once encoded and decoded again:\n%s", sources[i], encoded)
		}
	})
}
