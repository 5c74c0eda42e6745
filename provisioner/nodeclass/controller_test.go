package nodeclass

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws"
	"github.com/tailor-autoscaler/tailor/test/localaws"
	"github.com/tailor-autoscaler/tailor/test/testenv"
)

const cluster = "nodeclass-test"

var (
	cfg  *rest.Config
	kube client.Client
)

func TestMain(m *testing.M) {
	log.SetLogger(logr.Discard())
	testenv.Main(m, &cfg, &kube)
}

// fixture is the controller with the EC2 provider against the local endpoint, through the
// real SDK, in a manager against the real API server.
type fixture struct {
	provider *aws.Provider
	endpoint *localaws.Server
	clients  aws.Clients
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	endpoint, err := localaws.New(localaws.Options{ClusterName: cluster})
	require.NoError(t, err)
	srv := httptest.NewServer(endpoint)
	t.Cleanup(srv.Close)
	clients := aws.NewClients(awssdk.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDLOCAL", "local-secret", ""),
		BaseEndpoint: awssdk.String(srv.URL),
		Retryer: func() awssdk.Retryer {
			return aws.NewRetryer(retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil }))
		},
	})
	mgr := testenv.NewManager(t, cfg)
	provider, err := aws.New(aws.Options{
		Cluster:           aws.ClusterInfo{Name: cluster, Endpoint: "https://127.0.0.1:6443", CABundle: "Y2E=", ServiceCIDR: "10.100.0.0/16"},
		Region:            "us-east-1",
		KubernetesVersion: localaws.DefaultKubernetesVersion,
	}, clients, mgr.GetAPIReader(), mgr.GetAPIReader(), clock.RealClock{})
	require.NoError(t, err)
	require.NoError(t, NewController(mgr.GetClient(), provider, provider, mgr.GetEventRecorderFor("tailor-provisioner"), clock.RealClock{}).Register(mgr))
	testenv.StartManager(t, mgr)
	return &fixture{provider: provider, endpoint: endpoint, clients: clients}
}

func ec2NodeClass(name string) *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: awsv1.EC2NodeClassSpec{
			Role:                       "NodeRole-" + name,
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": cluster}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": cluster}}},
		},
	}
}

func nodeClaim(class string) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{GenerateName: class + "-", Labels: map[string]string{karpv1.NodePoolLabelKey: "general"}},
		Spec: karpv1.NodeClaimSpec{
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
				{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}},
				{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
			},
			NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: class},
		},
	}
}

// eventually polls cond until it holds or ten seconds pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// classTemplates lists the launch templates tagged for the class.
func (f *fixture) classTemplates(t *testing.T, class string) []string {
	t.Helper()
	out, err := f.clients.EC2.DescribeLaunchTemplates(context.Background(), &ec2.DescribeLaunchTemplatesInput{
		Filters: []ec2types.Filter{{Name: awssdk.String("tag:karpenter.k8s.aws/ec2nodeclass"), Values: []string{class}}},
	})
	require.NoError(t, err)
	var names []string
	for _, lt := range out.LaunchTemplates {
		names = append(names, awssdk.ToString(lt.LaunchTemplateName))
	}
	return names
}

// profileExists reports whether IAM has the instance profile.
func (f *fixture) profileExists(t *testing.T, name string) bool {
	t.Helper()
	_, err := f.clients.IAM.GetInstanceProfile(context.Background(), &iam.GetInstanceProfileInput{InstanceProfileName: awssdk.String(name)})
	var notFound *iamtypes.NoSuchEntityException
	if errors.As(err, &notFound) {
		return false
	}
	require.NoError(t, err)
	return true
}

// launchFrom creates a NodeClaim of the class and launches its instance, which creates the
// class's launch template (and instance profile, for a role).
func (f *fixture) launchFrom(t *testing.T, class string) *karpv1.NodeClaim {
	t.Helper()
	ctx := context.Background()
	nc := nodeClaim(class)
	require.NoError(t, kube.Create(ctx, nc))
	t.Cleanup(func() { _ = kube.Delete(context.Background(), nc) })
	_, err := f.provider.Create(ctx, nc)
	require.NoError(t, err)
	return nc
}

// hasEvent reports whether the object has an event of the reason whose message contains text.
func hasEvent(t *testing.T, name, reason, text string) bool {
	t.Helper()
	events := &corev1.EventList{}
	require.NoError(t, kube.List(context.Background(), events))
	for _, e := range events.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason && strings.Contains(e.Message, text) {
			return true
		}
	}
	return false
}

func gone(name string) func() bool {
	return func() bool {
		return apierrors.IsNotFound(kube.Get(context.Background(), client.ObjectKey{Name: name}, &awsv1.EC2NodeClass{}))
	}
}

func TestDeletingAClassWaitsForItsNodeClaimsThenDeletesItsProfileAndTemplates(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	class := ec2NodeClass("owned-profile")
	require.NoError(t, kube.Create(ctx, class))
	eventually(t, "the class has the finalizer", func() bool {
		return kube.Get(ctx, client.ObjectKeyFromObject(class), class) == nil && controllerutil.ContainsFinalizer(class, TerminationFinalizer)
	})
	nc := f.launchFrom(t, class.Name)
	templates := f.classTemplates(t, class.Name)
	require.Len(t, templates, 1)
	profile := class.Status.InstanceProfile
	eventually(t, "the status names the instance profile", func() bool {
		profile = ""
		if kube.Get(ctx, client.ObjectKeyFromObject(class), class) == nil {
			profile = class.Status.InstanceProfile
		}
		return profile != ""
	})
	require.True(t, f.profileExists(t, profile))

	require.NoError(t, kube.Delete(ctx, class))
	eventually(t, "the class says which NodeClaim it waits for", func() bool {
		return hasEvent(t, class.Name, ReasonWaitingOnNodeClaims, nc.Name)
	})
	require.False(t, gone(class.Name)(), "the class went while a NodeClaim used it")
	require.Equal(t, templates, f.classTemplates(t, class.Name), "templates while a NodeClaim uses the class")
	require.True(t, f.profileExists(t, profile), "instance profile while a NodeClaim uses the class")

	require.NoError(t, kube.Delete(ctx, nc))
	// The class looks again for its NodeClaims every nodeClaimsPollInterval.
	deadline := time.Now().Add(nodeClaimsPollInterval + 10*time.Second)
	for !gone(class.Name)() {
		require.True(t, time.Now().Before(deadline), "the class is still there after its NodeClaim went")
		time.Sleep(100 * time.Millisecond)
	}
	require.Empty(t, f.classTemplates(t, class.Name), "templates of the deleted class")
	require.False(t, f.profileExists(t, profile), "the instance profile Tailor created for the class")
}

func TestDeletingAClassKeepsTheInstanceProfileItNames(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, err := f.clients.IAM.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: awssdk.String("users-profile")})
	require.NoError(t, err)
	class := ec2NodeClass("users-profile")
	class.Spec.Role, class.Spec.InstanceProfile = "", awssdk.String("users-profile")
	require.NoError(t, kube.Create(ctx, class))
	eventually(t, "the class has the finalizer", func() bool {
		return kube.Get(ctx, client.ObjectKeyFromObject(class), class) == nil && controllerutil.ContainsFinalizer(class, TerminationFinalizer)
	})

	require.NoError(t, kube.Delete(ctx, class))
	eventually(t, "the class is deleted", gone(class.Name))
	require.True(t, f.profileExists(t, "users-profile"), "the instance profile the class names")
	counts := f.endpoint.RequestCounts()
	require.Zero(t, counts["DeleteInstanceProfile"]+counts["RemoveRoleFromInstanceProfile"], "IAM deletions for a class naming its instance profile")
}

func TestStatusListsTheClassCapacityReservationsAndReportsTermsThatMatchNothing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.endpoint.AddCapacityReservation(localaws.CapacityReservationSpec{
		ID: "cr-0000000000000000a", InstanceType: "m5.large", Zone: "us-east-1a", Count: 2, InstanceMatchCriteria: "targeted", Tags: map[string]string{"team": "ml"},
	}); err != nil {
		t.Fatal(err)
	}
	class := ec2NodeClass("reserved")
	class.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{
		{Tags: map[string]string{"team": "ml"}},
		{ID: "cr-0123456789abcdef0"},
	}
	require.NoError(t, kube.Create(ctx, class))
	t.Cleanup(func() { _ = kube.Delete(context.Background(), class) })
	eventually(t, "the status lists the reservation", func() bool {
		return kube.Get(ctx, client.ObjectKeyFromObject(class), class) == nil && len(class.Status.CapacityReservations) == 1
	})
	require.Equal(t, []awsv1.CapacityReservation{{
		ID: "cr-0000000000000000a", InstanceType: "m5.large", AvailabilityZone: "us-east-1a", OwnerID: "123456789012",
		InstanceMatchCriteria: "targeted", ReservationType: "default", State: "active",
	}}, class.Status.CapacityReservations)
	require.True(t, meta.IsStatusConditionTrue(class.Status.Conditions, awsv1.ConditionTypeReady), "a term that matches nothing leaves the class Ready")
	reservations := meta.FindStatusCondition(class.Status.Conditions, awsv1.ConditionTypeCapacityReservationsReady)
	require.NotNil(t, reservations)
	require.Equal(t, metav1.ConditionFalse, reservations.Status)
	require.Equal(t, aws.ReasonCapacityReservationsUnmatched, reservations.Reason)
	require.Contains(t, reservations.Message, "capacityReservationSelectorTerms[1] matched no active capacity reservation")
	require.Equal(t, class.Generation, reservations.ObservedGeneration)

	// Dropping the term that matched nothing clears the report.
	class.Spec.CapacityReservationSelectorTerms = class.Spec.CapacityReservationSelectorTerms[:1]
	require.NoError(t, kube.Update(ctx, class))
	eventually(t, "the condition is true again", func() bool {
		return kube.Get(ctx, client.ObjectKeyFromObject(class), class) == nil &&
			meta.IsStatusConditionTrue(class.Status.Conditions, awsv1.ConditionTypeCapacityReservationsReady)
	})
	require.Len(t, class.Status.CapacityReservations, 1)
}
