package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	awsprovider "github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws"
	"github.com/tailor-autoscaler/tailor/test/localstack"
)

// TestLeaderHandOverLaunchesNothingTwice runs two replicas of the scheduler and its sidecar,
// as the chart does. The leading pair provisions a first set of pods; then both of its
// processes are killed, as when their node is lost. The other pair takes the Lease and
// provisions a second set. Every pod runs, each NodeClaim has exactly one instance, and no
// instance is without a NodeClaim.
func TestLeaderHandOverLaunchesNothingTwice(t *testing.T) {
	e := startStack(t, func(o *localstack.Options) { o.Replicas = 2 })
	e.applyExamplePool(t)

	first := e.createPods(t, "before", 4)
	for _, name := range first {
		e.waitRunning(t, name, 2*time.Minute)
	}
	leader := e.leaseHolder(t, "")
	t.Logf("replica %s leads; killing its scheduler and provisioner", leader)
	e.stack.Kill(localstack.SchedulerOf(leader))
	e.stack.Kill(localstack.ProvisionerOf(leader))

	second := e.createPods(t, "after", 4)
	for _, name := range second {
		e.waitRunning(t, name, 2*time.Minute)
	}
	if next := e.leaseHolder(t, leader); next == leader {
		t.Errorf("replica %s still holds the Lease after it was killed", leader)
	}

	claims := map[string]string{}
	for _, nc := range e.nodeClaims(t) {
		id, _ := awsprovider.InstanceIDOf(nc.Status.ProviderID)
		if other, dup := claims[id]; dup {
			t.Errorf("instance %s belongs to NodeClaims %s and %s", id, other, nc.Name)
		}
		claims[id] = nc.Name
	}
	instances := e.liveInstances(t)
	var want []string
	for id := range claims {
		want = append(want, id)
	}
	sort.Strings(want)
	if diff := cmp.Diff(want, instances); diff != "" {
		t.Errorf("live instances against NodeClaims' instances (-NodeClaims +EC2):\n%s", diff)
	}
	t.Logf("%d pods on %d NodeClaims, %d instances", len(first)+len(second), len(claims), len(instances))
}

// createPods creates n pods of 1 CPU named prefix-i.
func (e *env) createPods(t *testing.T, prefix string, n int) []string {
	t.Helper()
	var names []string
	for i := range n {
		p := pod(fmt.Sprintf("%s-%d", prefix, i), "1")
		if _, err := e.cs.CoreV1().Pods(p.Namespace).Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		names = append(names, p.Name)
	}
	return names
}

// leaseHolder waits until the schedulers' Lease is held by a replica other than not, and
// returns that replica.
func (e *env) leaseHolder(t *testing.T, not string) string {
	t.Helper()
	var holder string
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		lease, err := e.cs.CoordinationV1().Leases(e.stack.LeaseNamespace()).Get(ctx, e.stack.LeaseName(), metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil {
			return false, nil
		}
		holder, _, _ = strings.Cut(*lease.Spec.HolderIdentity, "_")
		return holder != "" && holder != not, nil
	})
	if err != nil {
		t.Fatalf("waiting for a Lease holder other than %q (last %q): %v", not, holder, err)
	}
	return holder
}

// ec2Client is an EC2 client of the stack's local AWS endpoint.
func (e *env) ec2Client() *ec2.Client {
	return ec2.New(ec2.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(e.stack.AWSEndpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDLOCAL", "local-secret", ""),
	})
}

// liveInstances lists the IDs of pending and running instances on the local EC2 endpoint.
func (e *env) liveInstances(t *testing.T) []string {
	t.Helper()
	client := e.ec2Client()
	var ids []string
	pages := ec2.NewDescribeInstancesPaginator(client, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}},
	}})
	for pages.HasMorePages() {
		page, err := pages.NextPage(e.ctx)
		if err != nil {
			t.Fatalf("describing instances: %v", err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				ids = append(ids, aws.ToString(i.InstanceId))
			}
		}
	}
	sort.Strings(ids)
	return ids
}
