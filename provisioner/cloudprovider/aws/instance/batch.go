package instance

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
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/apierror"
)

// Batches of instance ids: the controllers Get and Delete NodeClaims one by one, EC2 answers
// up to 1000 ids per call and throttles by call count. BatchWindow is how long a batch
// gathers ids.
const (
	BatchWindow  = 10 * time.Millisecond
	batchMaxIDs  = 500
	batchTimeout = time.Minute
)

// Result is one id's share of a batched call.
type Result[T any] struct {
	Value T
	Err   error
}

// idBatcher gathers the ids asked for within a window (or until it holds max of them),
// makes one call for all and hands each caller its result. Time is read only from its clock.
type idBatcher[T any] struct {
	clock  clock.Clock
	window time.Duration
	max    int
	// exec makes the call; it returns a result for every id.
	exec func(ctx context.Context, ids []string) map[string]Result[T]

	mu      sync.Mutex
	pending map[string][]chan Result[T]
	// ctx is the first caller's, without its cancellation: the call serves every caller.
	ctx context.Context
	gen uint64
}

func newIDBatcher[T any](clk clock.Clock, exec func(context.Context, []string) map[string]Result[T]) *idBatcher[T] {
	return &idBatcher[T]{clock: clk, window: BatchWindow, max: batchMaxIDs, exec: exec}
}

// do adds the id to the open batch and waits for its result.
func (b *idBatcher[T]) do(ctx context.Context, id string) (T, error) {
	ch := make(chan Result[T], 1)
	b.mu.Lock()
	if b.pending == nil {
		b.pending = map[string][]chan Result[T]{}
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
		return r.Value, r.Err
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
				r.Err = fmt.Errorf("batched call returned nothing for %s", id)
			}
			for _, ch := range chs {
				ch <- r
			}
		}
	}()
}

// DescribeIDs is the DescribeInstances of a batch. It filters by id rather than
// naming the ids, because one unknown id fails a request that names them.
func (p *Provider) DescribeIDs(ctx context.Context, ids []string) map[string]Result[*ec2types.Instance] {
	out := make(map[string]Result[*ec2types.Instance], len(ids))
	pages := ec2.NewDescribeInstancesPaginator(p.ec2, &ec2.DescribeInstancesInput{
		Filters:    []ec2types.Filter{{Name: aws.String("instance-id"), Values: ids}},
		MaxResults: aws.Int32(1000),
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			for _, id := range ids {
				out[id] = Result[*ec2types.Instance]{Err: fmt.Errorf("describing instance %s: %w", id, err)}
			}
			return out
		}
		for _, r := range page.Reservations {
			for i := range r.Instances {
				inst := &r.Instances[i]
				id := aws.ToString(inst.InstanceId)
				if inst.State != nil && inst.State.Name == ec2types.InstanceStateNameTerminated {
					out[id] = Result[*ec2types.Instance]{Err: cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s is terminated", id))}
					continue
				}
				out[id] = Result[*ec2types.Instance]{Value: inst}
			}
		}
	}
	for _, id := range ids {
		if _, ok := out[id]; !ok {
			out[id] = Result[*ec2types.Instance]{Err: cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s not found", id))}
		}
	}
	return out
}

// TerminateIDs is the TerminateInstances of a batch. One unknown id fails the whole
// request, so then each id is terminated on its own.
func (p *Provider) TerminateIDs(ctx context.Context, ids []string) map[string]Result[struct{}] {
	out := make(map[string]Result[struct{}], len(ids))
	_, err := p.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids})
	if err != nil && apierror.Is(err, "InvalidInstanceID.NotFound") && len(ids) > 1 {
		for _, id := range ids {
			out[id] = p.TerminateIDs(ctx, []string{id})[id]
		}
		return out
	}
	for _, id := range ids {
		switch {
		case apierror.Is(err, "InvalidInstanceID.NotFound"):
			out[id] = Result[struct{}]{Err: cloudprovider.NewNodeClaimNotFoundError(err)}
		case err != nil:
			out[id] = Result[struct{}]{Err: fmt.Errorf("terminating instance %s: %w", id, err)}
		default:
			out[id] = Result[struct{}]{}
		}
	}
	return out
}

// Pending is how many describes and terminations wait in their batches.
func (p *Provider) Pending() (describes, terminations int) {
	return p.describe.size(), p.terminate.size()
}
