package quota

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	apischeme "github.com/tailor-autoscaler/tailor/provisioner/apis/scheme"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

var cfg *rest.Config

func TestMain(m *testing.M) {
	testenv.Main(m, &cfg, nil)
}

// read is what a test compares of a quota: its ElasticQuota by name rather than the object.
type read struct {
	Namespace, ElasticQuota string
	Min, Max                corev1.ResourceList
}

func TestElasticQuotas(t *testing.T) {
	ctx := context.Background()
	kube, err := client.New(cfg, client.Options{Scheme: apischeme.New()})
	require.NoError(t, err)
	reader := ElasticQuotas{Client: kube}

	got, err := reader.Quotas(ctx)
	require.NoError(t, err)
	require.Empty(t, got, "quotas with no ElasticQuota in the cluster")

	for _, ns := range []string{"quota-team-a", "quota-team-b"} {
		require.NoError(t, kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	for _, eq := range []*schedv1alpha1.ElasticQuota{
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: "quota-team-b", Name: "gpus"},
			Spec:       schedv1alpha1.ElasticQuotaSpec{Min: list("cpu", "8", "nvidia.com/gpu", "4")},
		},
		// Two in one namespace: the first by name is the one.
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: "quota-team-a", Name: "second"},
			Spec:       schedv1alpha1.ElasticQuotaSpec{Min: list("cpu", "1"), Max: list("cpu", "1")},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: "quota-team-a", Name: "first"},
			Spec:       schedv1alpha1.ElasticQuotaSpec{Min: list("cpu", "4", "memory", "16Gi"), Max: list("cpu", "10", "memory", "32Gi")},
		},
	} {
		require.NoError(t, kube.Create(ctx, eq))
	}

	quotas, err := reader.Quotas(ctx)
	require.NoError(t, err)
	var reads []read
	for _, q := range quotas {
		reads = append(reads, read{Namespace: q.Namespace, ElasticQuota: q.Object.GetNamespace() + "/" + q.Object.GetName(), Min: q.Min, Max: q.Max})
	}
	want := []read{
		{Namespace: "quota-team-a", ElasticQuota: "quota-team-a/first", Min: list("cpu", "4", "memory", "16Gi"), Max: list("cpu", "10", "memory", "32Gi")},
		{Namespace: "quota-team-b", ElasticQuota: "quota-team-b/gpus", Min: list("cpu", "8", "nvidia.com/gpu", "4")},
	}
	if diff := cmp.Diff(want, reads, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("Quotas (-want +got):\n%s", diff)
	}
}

// failingReader fails every List with err.
type failingReader struct {
	client.Reader
	err error
}

func (r failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return r.err
}

func TestElasticQuotasFailing(t *testing.T) {
	unserved := &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "scheduling.x-k8s.io", Kind: "ElasticQuota"}}
	quotas, err := ElasticQuotas{Client: failingReader{err: unserved}}.Quotas(context.Background())
	require.NoError(t, err, "where ElasticQuotas are not served")
	require.Empty(t, quotas, "where ElasticQuotas are not served")

	down := errors.New("connection refused")
	_, err = ElasticQuotas{Client: failingReader{err: down}}.Quotas(context.Background())
	require.ErrorIs(t, err, down)
	require.EqualError(t, err, "listing ElasticQuotas: connection refused")
}
