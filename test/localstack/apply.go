package localstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// Applier applies manifests (YAML or JSON, multi-document or v1 Lists) with server-side
// apply, the way kubectl apply --server-side does.
type Applier struct {
	dynamic dynamic.Interface
	mapper  *restmapper.DeferredDiscoveryRESTMapper
}

// NewApplier returns an Applier for the API server of cfg.
func NewApplier(cfg *rest.Config) (*Applier, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating discovery client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating dynamic client: %w", err)
	}
	return &Applier{dynamic: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}, nil
}

// ApplyFiles applies every object of the files, in order.
func (a *Applier) ApplyFiles(ctx context.Context, paths ...string) error {
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("reading manifest: %w", err)
		}
		if err := a.Apply(ctx, raw); err != nil {
			return fmt.Errorf("applying %s: %w", p, err)
		}
	}
	return nil
}

// Apply applies every object of a manifest document stream.
func (a *Applier) Apply(ctx context.Context, raw []byte) error {
	objs, err := Decode(raw)
	if err != nil {
		return err
	}
	return a.ApplyObjects(ctx, objs...)
}

// ApplyObjects applies objects, in order.
func (a *Applier) ApplyObjects(ctx context.Context, objs ...*unstructured.Unstructured) error {
	for _, obj := range objs {
		if err := a.applyOne(ctx, obj); err != nil {
			return err
		}
	}
	return nil
}

// Decode splits a manifest stream into objects, expanding v1 Lists.
func Decode(raw []byte) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decoding manifest: %w", err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if obj.IsList() {
			err := obj.EachListItem(func(o runtime.Object) error {
				out = append(out, o.(*unstructured.Unstructured))
				return nil
			})
			if err != nil {
				return nil, err
			}
			continue
		}
		out = append(out, obj)
	}
}

// applyOne applies an object, waiting briefly for its kind to be served (a CRD applied
// just before it may not be yet).
func (a *Applier) applyOne(ctx context.Context, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	var mapping *meta.RESTMapping
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			a.mapper.Reset()
			return false, nil
		}
		mapping = m
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("finding the resource of %s: %w", gvk, err)
	}
	var ri dynamic.ResourceInterface = a.dynamic.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		ri = a.dynamic.Resource(mapping.Resource).Namespace(ns)
	}
	if _, err := ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "tailor", Force: true}); err != nil {
		return fmt.Errorf("applying %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	return nil
}
