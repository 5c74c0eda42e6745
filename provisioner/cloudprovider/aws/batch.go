package aws

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/utils/clock"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
)

// Batches of instance ids: the controllers Get and Delete NodeClaims one by one, EC2 answers
// up to 1000 ids per call and throttles by call count.
const (
	batchWindow  = 10 * time.Millisecond
	batchMaxIDs  = 500
	batchTimeout = time.Minute
)

// batchResult is one id's share of a batched call.
type batchResult[T any] struct {
	value T
	err   error
}

// idBatcher gathers the ids asked for within a window (or until it holds max of them),
// makes one call for all and hands each caller its result. Time is read only from its clock.
type idBatcher[T any] struct {
	clock  clock.Clock
	window time.Duration
	max    int
	// exec makes the call; it returns a result for every id.
	exec func(ctx context.Context, ids []string) map[string]batchResult[T]

	mu      sync.Mutex
	pending map[string][]chan batchResult[T]
	// ctx is the first caller's, without its cancellation: the call serves every caller.
	ctx context.Context
	gen uint64
}

func newIDBatcher[T any](clk clock.Clock, exec func(context.Context, []string) map[string]batchResult[T]) *idBatcher[T] {
	return &idBatcher[T]{clock: clk, window: batchWindow, max: batchMaxIDs, exec: exec}
}

// do adds the id to the open batch and waits for its result.
func (b *idBatcher[T]) do(ctx context.Context, id string) (T, error) {
	ch := make(chan batchResult[T], 1)
	b.mu.Lock()
	if b.pending == nil {
		b.pending = map[string][]chan batchResult[T]{}
		b.ctx = context.WithoutCancel(ctx)
		go b.flushAfter(b.gen, b.clock.After(b.window))
	}
	b.pending[id] = append(b.pending[id], ch)
	if len(b.pending) >= b.max {
		b.flushLocked()
	}
	b.mu.Unlock()
	select {
	case r := <-ch:
		return r.value, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// size is how many distinct ids wait in the open batch.
func (b *idBatcher[T]) size() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}

func (b *idBatcher[T]) flushAfter(gen uint64, timer <-chan time.Time) {
	<-timer
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gen == gen && b.pending != nil {
		b.flushLocked()
	}
}

// flushLocked closes the open batch and runs it. b.mu must be held.
func (b *idBatcher[T]) flushLocked() {
	pending, ctx := b.pending, b.ctx
	b.pending, b.ctx = nil, nil
	b.gen++
	go func() {
		ctx, cancel := context.WithTimeout(ctx, batchTimeout)
		defer cancel()
		ids := make([]string, 0, len(pending))
		for id := range pending {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		results := b.exec(ctx, ids)
		for id, chs := range pending {
			r, ok := results[id]
			if !ok {
				r.err = fmt.Errorf("batched call returned nothing for %s", id)
			}
			for _, ch := range chs {
				ch <- r
			}
		}
	}()
}

// describeInstances is the DescribeInstances of a batch. It filters by id rather than
// naming the ids, because one unknown id fails a request that names them.
func (p *Provider) describeInstances(ctx context.Context, ids []string) map[string]batchResult[*ec2types.Instance] {
	out := make(map[string]batchResult[*ec2types.Instance], len(ids))
	pages := ec2.NewDescribeInstancesPaginator(p.ec2, &ec2.DescribeInstancesInput{
		Filters:    []ec2types.Filter{{Name: aws.String("instance-id"), Values: ids}},
		MaxResults: aws.Int32(1000),
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			for _, id := range ids {
				out[id] = batchResult[*ec2types.Instance]{err: fmt.Errorf("describing instance %s: %w", id, err)}
			}
			return out
		}
		for _, r := range page.Reservations {
			for i := range r.Instances {
				inst := &r.Instances[i]
				id := aws.ToString(inst.InstanceId)
				if inst.State != nil && inst.State.Name == ec2types.InstanceStateNameTerminated {
					out[id] = batchResult[*ec2types.Instance]{err: cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s is terminated", id))}
					continue
				}
				out[id] = batchResult[*ec2types.Instance]{value: inst}
			}
		}
	}
	for _, id := range ids {
		if _, ok := out[id]; !ok {
			out[id] = batchResult[*ec2types.Instance]{err: cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s not found", id))}
		}
	}
	return out
}

// terminateInstances is the TerminateInstances of a batch. One unknown id fails the whole
// request, so then each id is terminated on its own.
func (p *Provider) terminateInstances(ctx context.Context, ids []string) map[string]batchResult[struct{}] {
	out := make(map[string]batchResult[struct{}], len(ids))
	_, err := p.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids})
	if err != nil && isAPIError(err, "InvalidInstanceID.NotFound") && len(ids) > 1 {
		for _, id := range ids {
			out[id] = p.terminateInstances(ctx, []string{id})[id]
		}
		return out
	}
	for _, id := range ids {
		switch {
		case isAPIError(err, "InvalidInstanceID.NotFound"):
			out[id] = batchResult[struct{}]{err: cloudprovider.NewNodeClaimNotFoundError(err)}
		case err != nil:
			out[id] = batchResult[struct{}]{err: fmt.Errorf("terminating instance %s: %w", id, err)}
		default:
			out[id] = batchResult[struct{}]{}
		}
	}
	return out
}
