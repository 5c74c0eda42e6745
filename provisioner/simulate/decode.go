package simulate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	karpv1alpha1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1alpha1"
)

// supportedKinds lists what the manifests may hold, for error messages.
const supportedKinds = "v1 Pod, Node, PersistentVolumeClaim, PersistentVolume and List; apps/v1 DaemonSet; " +
	"storage.k8s.io/v1 StorageClass; karpenter.sh/v1 NodePool and NodeClaim; karpenter.sh/v1alpha1 NodeOverlay; karpenter.k8s.aws/v1 EC2NodeClass"

// source is where an object was read: the file, the document of the file (counted from 1,
// empty documents left out) and, for an item of a List, its index.
type source struct {
	file     string
	document int
	item     int
}

func (s source) String() string {
	if s.item < 0 {
		return fmt.Sprintf("%s: document %d", s.file, s.document)
	}
	return fmt.Sprintf("%s: document %d, items[%d]", s.file, s.document, s.item)
}

// decoder turns manifest documents into typed objects of the project's scheme.
type decoder struct {
	codec runtime.Decoder
}

func newDecoder() *decoder {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(karpv1.AddToScheme(scheme))
	utilruntime.Must(karpv1alpha1.AddToScheme(scheme))
	utilruntime.Must(awsv1.AddToScheme(scheme))
	// Strict decoding refuses unknown and duplicate fields, so a misspelt field is an error
	// instead of a silently different simulation.
	return &decoder{codec: serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()}
}

// decodeFile reads every object of a manifest file: JSON objects (one or a stream), or YAML
// documents separated by ---. Lists are flattened into their items.
func (d *decoder) decodeFile(name string, data []byte) ([]runtime.Object, []source, error) {
	docs, err := splitDocuments(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	var objs []runtime.Object
	var sources []source
	for i, doc := range docs {
		at := source{file: name, document: i + 1, item: -1}
		obj, err := d.decodeObject(doc, at)
		if err != nil {
			return nil, nil, err
		}
		list, ok := obj.(*corev1.List)
		if !ok {
			objs, sources = append(objs, obj), append(sources, at)
			continue
		}
		for j, item := range list.Items {
			itemAt := source{file: name, document: i + 1, item: j}
			obj, err := d.decodeObject(item.Raw, itemAt)
			if err != nil {
				return nil, nil, err
			}
			if _, nested := obj.(*corev1.List); nested {
				return nil, nil, fmt.Errorf("%s: a List inside a List is not read; put its items in the outer List", itemAt)
			}
			objs, sources = append(objs, obj), append(sources, itemAt)
		}
	}
	return objs, sources, nil
}

// decodeObject decodes one document into one of the supported kinds.
func (d *decoder) decodeObject(doc []byte, at source) (runtime.Object, error) {
	obj, _, err := d.codec.Decode(doc, nil, nil)
	if err != nil {
		gvk := typeOf(doc)
		switch {
		case runtime.IsMissingKind(err) || runtime.IsMissingVersion(err):
			return nil, fmt.Errorf("%s: apiVersion and kind must be set; simulate reads %s", at, supportedKinds)
		case runtime.IsNotRegisteredError(err):
			return nil, fmt.Errorf("%s: kind %q of apiVersion %q is not known; simulate reads %s", at, gvk.Kind, gvk.GroupVersion(), supportedKinds)
		case gvk.Kind == "":
			return nil, fmt.Errorf("%s: decoding: %w", at, err)
		default:
			return nil, fmt.Errorf("%s: decoding %s: %w", at, gvk.Kind, err)
		}
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	switch obj.(type) {
	case *corev1.Pod, *corev1.Node, *corev1.PersistentVolumeClaim, *corev1.PersistentVolume, *corev1.List,
		*appsv1.DaemonSet, *storagev1.StorageClass, *karpv1.NodePool, *karpv1.NodeClaim, *karpv1alpha1.NodeOverlay, *awsv1.EC2NodeClass:
		return obj, nil
	}
	if meta.IsListType(obj) {
		return nil, fmt.Errorf("%s: kind %q of apiVersion %q is not read; use a v1 List", at, gvk.Kind, gvk.GroupVersion())
	}
	return nil, fmt.Errorf("%s: kind %q of apiVersion %q is not simulated; simulate reads %s", at, gvk.Kind, gvk.GroupVersion(), supportedKinds)
}

// typeOf reads the apiVersion and kind of a document, as far as it can be read.
func typeOf(doc []byte) schema.GroupVersionKind {
	var t metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &t); err != nil {
		return schema.GroupVersionKind{}
	}
	return t.GroupVersionKind()
}

// splitDocuments cuts a file into its non-empty documents. A file starting with { is a
// stream of JSON objects; anything else is YAML, whose documents --- separates.
func splitDocuments(data []byte) ([][]byte, error) {
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		return splitJSON(trimmed)
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", len(docs)+1, err)
		}
		if !isEmptyYAML(doc) {
			docs = append(docs, doc)
		}
	}
}

func splitJSON(data []byte) ([][]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var docs [][]byte
	for {
		var doc json.RawMessage
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: decoding JSON: %w", len(docs)+1, err)
		}
		docs = append(docs, doc)
	}
}

// isEmptyYAML reports whether a YAML document holds only blank lines and comments.
func isEmptyYAML(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			return false
		}
	}
	return true
}
