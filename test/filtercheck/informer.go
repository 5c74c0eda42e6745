package filtercheck

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// staticInformer is an informer over a fixed set of objects that delivers all of them to a handler
// before AddEventHandler returns.
//
// A client-go informer, even once synced, delivers its objects to handlers from goroutines of its
// own, and the volume binder's assume caches are fed by such handlers: a check started right after
// WaitForCacheSync could find a claim missing from them. The end state never changes, so an informer
// that is complete from the start removes that race instead of narrowing it.
type staticInformer struct {
	indexer cache.Indexer
}

var _ cache.SharedIndexInformer = &staticInformer{}

func newStaticInformer(objs []runtime.Object) (*staticInformer, error) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		if err := indexer.Add(o); err != nil {
			return nil, err
		}
	}
	return &staticInformer{indexer: indexer}, nil
}

// preload makes the factory hand out a static informer for the type of example, holding objs.
func preload(factory informers.SharedInformerFactory, example runtime.Object, objs []runtime.Object) error {
	inf, err := newStaticInformer(objs)
	if err != nil {
		return err
	}
	factory.InformerFor(example, func(kubernetes.Interface, time.Duration) cache.SharedIndexInformer { return inf })
	return nil
}

// AddEventHandler hands every object to handler as part of the initial list.
func (i *staticInformer) AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	for _, o := range i.indexer.List() {
		handler.OnAdd(o, true)
	}
	return synced{}, nil
}

// AddEventHandlerWithResyncPeriod is AddEventHandler; there is nothing to resync.
func (i *staticInformer) AddEventHandlerWithResyncPeriod(handler cache.ResourceEventHandler, _ time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandler(handler)
}

// AddEventHandlerWithOptions is AddEventHandler; there is nothing to resync.
func (i *staticInformer) AddEventHandlerWithOptions(handler cache.ResourceEventHandler, _ cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandler(handler)
}

// RemoveEventHandler does nothing: no event ever follows the initial list.
func (i *staticInformer) RemoveEventHandler(cache.ResourceEventHandlerRegistration) error { return nil }

// GetStore returns the objects.
func (i *staticInformer) GetStore() cache.Store { return i.indexer }

// GetIndexer returns the objects.
func (i *staticInformer) GetIndexer() cache.Indexer { return i.indexer }

// AddIndexers adds indexers to the objects.
func (i *staticInformer) AddIndexers(indexers cache.Indexers) error {
	return i.indexer.AddIndexers(indexers)
}

// GetController returns nil: nothing is listed or watched.
func (i *staticInformer) GetController() cache.Controller { return nil }

// Run blocks until stopCh is closed, as the informer factory expects.
func (i *staticInformer) Run(stopCh <-chan struct{}) { <-stopCh }

// RunWithContext blocks until ctx is done.
func (i *staticInformer) RunWithContext(ctx context.Context) { <-ctx.Done() }

// HasSynced is always true.
func (i *staticInformer) HasSynced() bool { return true }

// LastSyncResourceVersion is empty: the objects come from no server.
func (i *staticInformer) LastSyncResourceVersion() string { return "" }

// SetWatchErrorHandler does nothing: nothing is watched.
func (i *staticInformer) SetWatchErrorHandler(cache.WatchErrorHandler) error { return nil }

// SetWatchErrorHandlerWithContext does nothing: nothing is watched.
func (i *staticInformer) SetWatchErrorHandlerWithContext(cache.WatchErrorHandlerWithContext) error {
	return nil
}

// SetTransform does nothing; the factory sets its own, nil, transform on every informer.
func (i *staticInformer) SetTransform(cache.TransformFunc) error { return nil }

// IsStopped is false: there is nothing to stop.
func (i *staticInformer) IsStopped() bool { return false }

type synced struct{}

func (synced) HasSynced() bool { return true }
