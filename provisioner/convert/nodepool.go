package convert

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/aws/v1"
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// v1alpha5Defaults are the requirements the v1alpha5 webhook added to a Provisioner that
// did not constrain them; v1 adds none, so they are written out to keep the same nodes.
var v1alpha5Defaults = []karpv1.NodeSelectorRequirementWithMinValues{
	{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
	{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
}

func nodeClassRef(name string) *karpv1.NodeClassReference {
	return &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: name}
}

// provisioner converts a karpenter.sh/v1alpha5 Provisioner into a NodePool, and its inline
// provider, if any, into an EC2NodeClass of the same name.
func (c *converter) provisioner(d *document, obj, meta *fields) {
	np := newNodePool(d.objectMeta(meta))
	spec := obj.sub("spec")
	tmpl := &np.Spec.Template

	if tmpl.ObjectMeta.Labels = spec.stringMap("labels"); tmpl.ObjectMeta.Labels != nil {
		d.changed("spec.labels", "→ spec.template.metadata.labels")
	}
	if tmpl.ObjectMeta.Annotations = spec.stringMap("annotations"); tmpl.ObjectMeta.Annotations != nil {
		d.changed("spec.annotations", "→ spec.template.metadata.annotations")
	}
	if spec.decode("taints", &tmpl.Spec.Taints) {
		d.changed("spec.taints", "→ spec.template.spec.taints")
	}
	if spec.decode("startupTaints", &tmpl.Spec.StartupTaints) {
		d.changed("spec.startupTaints", "→ spec.template.spec.startupTaints")
	}
	if spec.decode("requirements", &tmpl.Spec.Requirements) {
		d.changed("spec.requirements", "→ spec.template.spec.requirements")
	}
	for _, def := range v1alpha5Defaults {
		if !hasRequirement(tmpl.Spec.Requirements, def.Key) {
			tmpl.Spec.Requirements = append(tmpl.Spec.Requirements, def)
			d.changed("spec.requirements", fmt.Sprintf("added %s In [%s]: v1alpha5 defaulted it, v1 does not", def.Key, strings.Join(def.Values, ", ")))
		}
	}

	ref := spec.sub("providerRef")
	refName, hasRef := ref.str("name")
	if hasRef {
		ref.get("apiVersion")
		ref.get("kind")
		tmpl.Spec.NodeClassRef = nodeClassRef(refName)
		d.changed("spec.providerRef", fmt.Sprintf("→ spec.template.spec.nodeClassRef {group: %s, kind: EC2NodeClass, name: %s}", awsv1.Group, refName))
		ref.unread("unknown field: not carried over")
	}
	if spec.has("provider") {
		nc := newEC2NodeClass(metav1.ObjectMeta{Name: np.Name})
		awsNodeTemplateSpec(d, spec.sub("provider"), &nc.Spec)
		c.addNodeClass(d, nc)
		if hasRef {
			d.fail("spec.provider", "and spec.providerRef are both set: keep one")
		}
		tmpl.Spec.NodeClassRef = nodeClassRef(np.Name)
		d.changed("spec.provider", fmt.Sprintf("→ EC2NodeClass %s (v1 has no inline provider), referenced by spec.template.spec.nodeClassRef", np.Name))
	} else if !hasRef {
		d.fail("spec.providerRef", "is missing: a v1 NodePool needs an EC2NodeClass; set providerRef to your AWSNodeTemplate and convert it in the same file")
	}

	emptyTTL, hasEmptyTTL := spec.integer("ttlSecondsAfterEmpty")
	consolidation := spec.sub("consolidation")
	enabled, _ := consolidation.boolean("enabled")
	consolidation.unread("unknown field: not carried over")
	dis := &np.Spec.Disruption
	switch {
	case enabled && hasEmptyTTL:
		d.fail("spec.consolidation.enabled", "and spec.ttlSecondsAfterEmpty are both set (v1alpha5 refused that): keep one")
	case enabled:
		dis.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
		dis.ConsolidateAfter = seconds(0)
		d.changed("spec.consolidation.enabled", "true → spec.disruption: consolidationPolicy WhenEmptyOrUnderutilized, consolidateAfter 0s")
	case hasEmptyTTL:
		dis.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
		dis.ConsolidateAfter = seconds(emptyTTL)
		d.changed("spec.ttlSecondsAfterEmpty", fmt.Sprintf("%d → spec.disruption: consolidationPolicy WhenEmpty, consolidateAfter %s", emptyTTL, dis.ConsolidateAfter))
	default:
		dis.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
		dis.ConsolidateAfter = karpv1.NillableDuration{}
		d.changed("spec.disruption", "consolidateAfter Never: the Provisioner neither consolidated nor removed empty nodes")
	}

	if ttl, ok := spec.integer("ttlSecondsUntilExpired"); ok {
		tmpl.Spec.ExpireAfter = seconds(ttl)
		d.changed("spec.ttlSecondsUntilExpired", fmt.Sprintf("%d → spec.template.spec.expireAfter %s", ttl, tmpl.Spec.ExpireAfter))
	} else {
		tmpl.Spec.ExpireAfter = karpv1.NillableDuration{}
		d.changed("spec.template.spec.expireAfter", "Never: the Provisioner had no ttlSecondsUntilExpired (v1 would default to 720h)")
	}

	limits := spec.sub("limits")
	var resources corev1.ResourceList
	if limits.decode("resources", &resources) {
		np.Spec.Limits = karpv1.Limits(resources)
		d.changed("spec.limits.resources", "→ spec.limits")
	}
	limits.unread("unknown field: not carried over")
	if w, ok := spec.integer("weight"); ok {
		weight := int32(w)
		np.Spec.Weight = &weight
	}
	if spec.has("kubeletConfiguration") {
		kubelet := &awsv1.KubeletConfiguration{}
		if spec.decode("kubeletConfiguration", kubelet) && tmpl.Spec.NodeClassRef != nil {
			c.kubelets = append(c.kubelets, pendingKubelet{doc: d, field: "spec.kubeletConfiguration", nodeClass: tmpl.Spec.NodeClassRef.Name, kubelet: kubelet})
		}
	}
	spec.unread("unknown field: not part of the v1alpha5 Provisioner API")
	d.objects = append(d.objects, np)
}

// nodePoolV1beta1 converts a karpenter.sh/v1beta1 NodePool.
func (c *converter) nodePoolV1beta1(d *document, obj, meta *fields) {
	np := newNodePool(d.objectMeta(meta))
	spec := obj.sub("spec")
	template := spec.sub("template")
	tmpl := &np.Spec.Template
	template.decode("metadata", &tmpl.ObjectMeta)
	ts := template.sub("spec")
	ts.decode("taints", &tmpl.Spec.Taints)
	ts.decode("startupTaints", &tmpl.Spec.StartupTaints)
	ts.decode("requirements", &tmpl.Spec.Requirements)
	ref := ts.sub("nodeClassRef")
	if name, ok := ref.str("name"); ok {
		group := awsv1.Group
		if apiVersion, ok := ref.str("apiVersion"); ok {
			group, _, _ = strings.Cut(apiVersion, "/")
		}
		kind, ok := ref.str("kind")
		if !ok {
			kind = "EC2NodeClass"
		}
		tmpl.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: group, Kind: kind, Name: name}
		d.changed("spec.template.spec.nodeClassRef", fmt.Sprintf("{apiVersion, kind, name} → {group: %s, kind: %s, name: %s}", group, kind, name))
		ref.unread("unknown field: not carried over")
	} else {
		d.fail("spec.template.spec.nodeClassRef.name", "is missing: a NodePool needs an EC2NodeClass; set nodeClassRef.name")
	}
	if ts.has("kubelet") {
		kubelet := &awsv1.KubeletConfiguration{}
		if ts.decode("kubelet", kubelet) && tmpl.Spec.NodeClassRef != nil {
			c.kubelets = append(c.kubelets, pendingKubelet{doc: d, field: "spec.template.spec.kubelet", nodeClass: tmpl.Spec.NodeClassRef.Name, kubelet: kubelet})
		}
	}
	if ts.has("resources") {
		ts.get("resources")
		d.dropped("spec.template.spec.resources", "v1 NodeClaim templates have no resources: a NodeClaim's requests are the requests of the pods planned onto it")
	}
	ts.unread("unknown field: not part of the v1beta1 NodeClaim template")
	template.unread("unknown field: not part of the v1beta1 NodeClaim template")

	dis := spec.sub("disruption")
	policy, ok := dis.str("consolidationPolicy")
	if !ok {
		policy = "WhenUnderutilized"
	}
	switch policy {
	case "WhenUnderutilized":
		np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
		d.changed("spec.disruption.consolidationPolicy", "WhenUnderutilized → WhenEmptyOrUnderutilized")
	case "WhenEmpty":
		np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
	default:
		d.fail("spec.disruption.consolidationPolicy", fmt.Sprintf("%q is not a v1beta1 policy: use WhenEmpty or WhenUnderutilized", policy))
	}
	np.Spec.Disruption.ConsolidateAfter = seconds(0)
	if after, ok := dis.str("consolidateAfter"); ok {
		d.parseDuration("spec.disruption.consolidateAfter", after, &np.Spec.Disruption.ConsolidateAfter)
	} else if policy == "WhenUnderutilized" {
		d.changed("spec.disruption.consolidateAfter", "0s: v1 requires it, and WhenUnderutilized consolidated without waiting")
	}
	tmpl.Spec.ExpireAfter = seconds(int64((720 * time.Hour).Seconds()))
	if expire, ok := dis.str("expireAfter"); ok {
		if d.parseDuration("spec.disruption.expireAfter", expire, &tmpl.Spec.ExpireAfter) {
			d.changed("spec.disruption.expireAfter", "→ spec.template.spec.expireAfter")
		}
	}
	dis.decode("budgets", &np.Spec.Disruption.Budgets)
	dis.unread("unknown field: not part of the v1beta1 disruption API")

	var limits corev1.ResourceList
	if spec.decode("limits", &limits) {
		np.Spec.Limits = karpv1.Limits(limits)
	}
	if w, ok := spec.integer("weight"); ok {
		weight := int32(w)
		np.Spec.Weight = &weight
	}
	spec.unread("unknown field: not part of the v1beta1 NodePool API")
	d.objects = append(d.objects, np)
}

func (d *document) parseDuration(field, s string, into *karpv1.NillableDuration) bool {
	if err := into.UnmarshalJSON([]byte(fmt.Sprintf("%q", s))); err != nil {
		d.fail(field, err.Error())
		return false
	}
	return true
}

func seconds(n int64) karpv1.NillableDuration {
	dur := time.Duration(n) * time.Second
	return karpv1.NillableDuration{Duration: &dur}
}

func hasRequirement(reqs []karpv1.NodeSelectorRequirementWithMinValues, key string) bool {
	for _, r := range reqs {
		if r.Key == key {
			return true
		}
	}
	return false
}
