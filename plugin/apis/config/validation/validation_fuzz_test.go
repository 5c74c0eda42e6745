package validation

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tailor-autoscaler/tailor/plugin/apis/config"
	"github.com/tailor-autoscaler/tailor/plugin/apis/config/scheme"
	configv1 "github.com/tailor-autoscaler/tailor/plugin/apis/config/v1"
)

// FuzzNodeProvisioningArgs decodes plugin args as kube-scheduler does (v1, defaulted,
// converted to the internal type) and validates them: either the problems, each at a field
// of args, or args the plugin can use (an absolute socket, a positive timeout, a selector
// that converts) that encode to v1 and decode back equal.
func FuzzNodeProvisioningArgs(f *testing.F) {
	const head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: NodeProvisioningArgs\n"
	for _, s := range []string{
		head,
		head + "provisionerSocket: /var/run/tailor/provisioner.sock\nrequestTimeout: 2s\nnodePools: [batch, gpu]\n",
		head + "nodePoolSelector: {matchLabels: {team: batch}, matchExpressions: [{key: tier, operator: In, values: [a]}]}\n",
		head + "nodePoolSelector: {matchExpressions: [{key: tier, operator: Exists, values: [a]}, {key: '', operator: Bogus}]}\n",
		head + "provisionerSocket: relative.sock\nrequestTimeout: -1s\nnodePools: ['', UPPER, a..b]\n",
		head + "requestTimeout: 2562047h47m16.854775807s\n",
		head + "requestTimeout: 0s\nunknown: 1\n",
		head + "nodePools: {a: b}\n",
		`{"apiVersion":"kubescheduler.config.k8s.io/v1","kind":"NodeProvisioningArgs","nodePoolSelector":null}`,
		"kind: NodeProvisioningArgs\n", "", "null",
	} {
		f.Add([]byte(s))
	}
	s := runtime.NewScheme()
	scheme.AddToScheme(s)
	codecs := serializer.NewCodecFactory(s, serializer.EnableStrict)
	decoder := codecs.UniversalDecoder(config.SchemeGroupVersion)
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, err := runtime.Decode(decoder, data)
		if err != nil {
			return
		}
		args, ok := obj.(*config.NodeProvisioningArgs)
		require.True(t, ok, "decoded a %T", obj)
		if errs := ValidateNodeProvisioningArgs(field.NewPath("args"), args); len(errs) > 0 {
			for _, e := range errs {
				require.Regexp(t, `^args\.(provisionerSocket|requestTimeout|nodePools\[\d+\]|nodePoolSelector(\.|$))`, e.Field, "error %q", e.Error())
			}
			return
		}
		require.True(t, strings.HasPrefix(args.ProvisionerSocket, "/"))
		require.Positive(t, args.RequestTimeout.Duration)
		if args.NodePoolSelector != nil {
			_, err := metav1.LabelSelectorAsSelector(args.NodePoolSelector)
			require.NoError(t, err, "a valid selector does not convert")
		}
		encoded, err := runtime.Encode(codecs.LegacyCodec(configv1.SchemeGroupVersion), args)
		require.NoError(t, err)
		again, err := runtime.Decode(decoder, encoded)
		require.NoError(t, err, "decoding %s", encoded)
		if diff := cmp.Diff(args, again, cmpopts.IgnoreFields(config.NodeProvisioningArgs{}, "TypeMeta"), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("args after encoding to v1 and decoding (-first +again):\n%s", diff)
		}
	})
}
