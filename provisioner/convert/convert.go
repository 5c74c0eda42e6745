// Package convert rewrites Karpenter NodePool configuration of earlier API versions into
// the karpenter.sh/v1 NodePools and karpenter.k8s.aws/v1 EC2NodeClasses Tailor reads:
// v1alpha5 Provisioners with v1alpha1 AWSNodeTemplates, and v1beta1 NodePools with v1beta1
// EC2NodeClasses. Alongside the objects it reports what it changed and what it could not
// carry over; every input field is either converted or reported, never dropped silently.
// It serves `tailorctl convert`.
package convert

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// API versions convert reads.
const (
	provisionerV1alpha5     = "karpenter.sh/v1alpha5"
	awsNodeTemplateV1alpha1 = "karpenter.k8s.aws/v1alpha1"
	nodePoolV1beta1         = "karpenter.sh/v1beta1"
	ec2NodeClassV1beta1     = "karpenter.k8s.aws/v1beta1"
)

// supported names what convert reads, for error messages.
const supported = "karpenter.sh/v1alpha5 Provisioner, karpenter.k8s.aws/v1alpha1 AWSNodeTemplate, " +
	"karpenter.sh/v1beta1 NodePool, karpenter.k8s.aws/v1beta1 EC2NodeClass " +
	"(and karpenter.sh/v1 NodePool, karpenter.k8s.aws/v1 EC2NodeClass, passed through)"

// Result is the converted objects, in the order of the input, and the report.
type Result struct {
	// Objects are *karpv1.NodePool and *awsv1.EC2NodeClass.
	Objects []any
	Report  Report
}

// Convert converts every document of a YAML or JSON file. It fails, naming the document
// and the field, when a document is not a convertible object or a field cannot be read.
func Convert(data []byte) (*Result, error) {
	docs, err := splitDocuments(data)
	if err != nil {
		return nil, err
	}
	c := &converter{nodeClasses: map[string]*awsv1.EC2NodeClass{}}
	var errs []error
	for i, raw := range docs {
		d := &document{index: i + 1}
		c.convert(d, raw)
		c.docs = append(c.docs, d)
		errs = append(errs, d.errs...)
	}
	c.placeKubelets()
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	res := &Result{}
	for _, d := range c.docs {
		res.Objects = append(res.Objects, d.objects...)
		res.Report.Entries = append(res.Report.Entries, d.entries...)
	}
	return res, nil
}

// splitDocuments splits a file into its non-empty YAML documents (JSON is YAML).
func splitDocuments(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("splitting YAML documents: %w", err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			docs = append(docs, doc)
		}
	}
}

func stripComments(doc []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, line...)
		}
	}
	return out
}

// document is one input document: what it produced and what the report says about it.
type document struct {
	index   int
	object  string // "Provisioner default"
	objects []any
	entries []Entry
	errs    []error
}

func (d *document) changed(field, message string) {
	d.entries = append(d.entries, Entry{Document: d.index, Object: d.object, Field: field, Message: message})
}

func (d *document) dropped(field, message string) {
	d.entries = append(d.entries, Entry{Document: d.index, Object: d.object, Field: field, Message: message, NotCarriedOver: true})
}

func (d *document) fail(field, message string) {
	what := fmt.Sprintf("document %d", d.index)
	if d.object != "" {
		what += " (" + d.object + ")"
	}
	d.errs = append(d.errs, fmt.Errorf("%s: %s %s", what, field, message))
}

// converter holds what crosses documents: EC2NodeClasses by name, and kubelet settings that
// v1 keeps on the EC2NodeClass but earlier versions kept on the NodePool.
type converter struct {
	docs        []*document
	nodeClasses map[string]*awsv1.EC2NodeClass
	kubelets    []pendingKubelet
}

// pendingKubelet is kubelet configuration of a NodePool (or Provisioner) that belongs on
// the EC2NodeClass it references.
type pendingKubelet struct {
	doc       *document
	field     string
	nodeClass string
	kubelet   *awsv1.KubeletConfiguration
}

func (c *converter) convert(d *document, raw []byte) {
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		d.fail("", fmt.Sprintf("is not a YAML or JSON object: %v", err))
		return
	}
	obj := newFields(d, "", m)
	apiVersion, _ := obj.str("apiVersion")
	kind, _ := obj.str("kind")
	meta := obj.sub("metadata")
	name, _ := meta.str("name")
	d.object = strings.TrimSpace(kind + " " + name)
	if kind == "" || apiVersion == "" {
		d.fail("apiVersion/kind", "is missing: convert reads "+supported+"; set apiVersion and kind")
		return
	}
	if name == "" {
		d.fail("metadata.name", "is missing: every "+kind+" needs a name; set metadata.name")
		return
	}
	switch apiVersion + " " + kind {
	case provisionerV1alpha5 + " Provisioner":
		c.provisioner(d, obj, meta)
	case awsNodeTemplateV1alpha1 + " AWSNodeTemplate":
		nc := newEC2NodeClass(d.objectMeta(meta))
		awsNodeTemplateSpec(d, obj.sub("spec"), &nc.Spec)
		c.addNodeClass(d, nc)
	case nodePoolV1beta1 + " NodePool":
		c.nodePoolV1beta1(d, obj, meta)
	case ec2NodeClassV1beta1 + " EC2NodeClass":
		nc := newEC2NodeClass(d.objectMeta(meta))
		ec2NodeClassV1beta1Spec(d, obj.sub("spec"), &nc.Spec)
		c.addNodeClass(d, nc)
	case karpv1.SchemeGroupVersion.String() + " NodePool":
		np := &karpv1.NodePool{}
		if d.decodeValue("", m, np) {
			d.objects = append(d.objects, np)
		}
		return
	case awsv1.SchemeGroupVersion.String() + " EC2NodeClass":
		nc := &awsv1.EC2NodeClass{}
		if d.decodeValue("", m, nc) {
			c.addNodeClass(d, nc)
		}
		return
	default:
		d.fail("kind", fmt.Sprintf("%s %s is not convertible: convert reads %s; remove the document or convert it by hand", apiVersion, kind, supported))
		return
	}
	if _, ok := obj.get("status"); ok {
		d.dropped("status", "status is written by the controller, not converted")
	}
	obj.unread("unknown field: not part of the " + apiVersion + " " + kind + " API")
}

func (c *converter) addNodeClass(d *document, nc *awsv1.EC2NodeClass) {
	if _, dup := c.nodeClasses[nc.Name]; dup {
		d.fail("metadata.name", fmt.Sprintf("%q: another document already makes EC2NodeClass %q; rename one of them", nc.Name, nc.Name))
		return
	}
	c.nodeClasses[nc.Name] = nc
	d.objects = append(d.objects, nc)
}

// placeKubelets moves kubelet configuration onto the EC2NodeClasses that v1 keeps it on.
func (c *converter) placeKubelets() {
	owner := map[string]string{}
	for _, k := range c.kubelets {
		nc, ok := c.nodeClasses[k.nodeClass]
		switch {
		case !ok:
			k.doc.dropped(k.field, fmt.Sprintf("v1 keeps kubelet settings on the EC2NodeClass, and EC2NodeClass %q is not in the input: convert it in the same file, or add these settings to its spec.kubelet", k.nodeClass))
		case nc.Spec.Kubelet == nil:
			nc.Spec.Kubelet = k.kubelet
			owner[k.nodeClass] = k.doc.object
			k.doc.changed(k.field, fmt.Sprintf("moved to EC2NodeClass %s spec.kubelet", k.nodeClass))
		case !equalJSON(nc.Spec.Kubelet, k.kubelet):
			k.doc.dropped(k.field, fmt.Sprintf("EC2NodeClass %s already has different kubelet settings (from %s): v1 has one kubelet configuration per EC2NodeClass; give this one its own EC2NodeClass", k.nodeClass, owner[k.nodeClass]))
		default:
			k.doc.changed(k.field, fmt.Sprintf("same as EC2NodeClass %s spec.kubelet", k.nodeClass))
		}
	}
}

func equalJSON(a, b any) bool {
	ja, errA := yaml.Marshal(a)
	jb, errB := yaml.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// objectMeta reads an object's metadata: name, labels and annotations carry over; what the
// API server sets is reported.
func (d *document) objectMeta(meta *fields) metav1.ObjectMeta {
	name, _ := meta.str("name")
	out := metav1.ObjectMeta{Name: name, Labels: meta.stringMap("labels"), Annotations: meta.stringMap("annotations")}
	const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"
	if _, ok := out.Annotations[lastApplied]; ok {
		delete(out.Annotations, lastApplied)
		if len(out.Annotations) == 0 {
			out.Annotations = nil
		}
		d.dropped("metadata.annotations."+lastApplied, "describes the old object; kubectl apply writes a new one")
	}
	if meta.has("namespace") {
		meta.get("namespace")
		d.dropped("metadata.namespace", "NodePools and EC2NodeClasses are cluster-scoped")
	}
	for _, k := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink", "finalizers", "ownerReferences"} {
		if meta.has(k) {
			meta.get(k)
			d.dropped(meta.at(k), "set by the API server and controllers for the old object")
		}
	}
	meta.unread("unknown field: not carried over")
	return out
}

func newNodePool(meta metav1.ObjectMeta) *karpv1.NodePool {
	return &karpv1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodePool"},
		ObjectMeta: meta,
	}
}

func newEC2NodeClass(meta metav1.ObjectMeta) *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: awsv1.SchemeGroupVersion.String(), Kind: "EC2NodeClass"},
		ObjectMeta: meta,
	}
}
