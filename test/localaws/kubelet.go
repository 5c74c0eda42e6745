package localaws

import (
	"cmp"
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
)

// Labels, annotations and resources of a registered Node.
const (
	kwokNodeAnnotation     = "kwok.x-k8s.io/node"
	resourceNvidiaGPU      = corev1.ResourceName("nvidia.com/gpu")
	resourceAMDGPU         = corev1.ResourceName("amd.com/gpu")
	resourceNeuron         = corev1.ResourceName("aws.amazon.com/neuron")
	resourceNeuronCore     = corev1.ResourceName("aws.amazon.com/neuroncore")
	resourcePodENI         = corev1.ResourceName("vpc.amazonaws.com/pod-eni")
	defaultRootVolumeGiB   = 20
	registrationBackoff    = 500 * time.Millisecond
	maxRegistrationBackoff = 30 * time.Second
)

// visibleMemoryFraction is the share of an instance's memory its kernel reports to the
// kubelet; the rest goes to the hypervisor and firmware.
const visibleMemoryFraction = 0.95

// The kubelet's default hard eviction thresholds, held back from allocatable.
const (
	defaultMemoryEviction = "100Mi"
	defaultNodefsEviction = "10%"
)

// nodeadmKubeReserved is the kube-reserved nodeadm configures on AL2023 for what the user's
// configuration leaves out: CPU by the EKS AMI's bands (6% of the first core, 1% of the
// second, 0.5% of the next two, 0.25% of the rest), 255Mi plus 11Mi per pod of memory and
// 1Gi of ephemeral storage. It is written from nodeadm's documented behaviour, apart from
// the provisioner's model of it, so the two can disagree in a test.
func nodeadmKubeReserved(vcpus, maxPods int64, configured corev1.ResourceList) corev1.ResourceList {
	milli := int64(0)
	for core := int64(1); core <= vcpus; core++ {
		switch {
		case core == 1:
			milli += 600
		case core == 2:
			milli += 100
		case core <= 4:
			milli += 50
		default:
			milli += 25
		}
	}
	out := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewMilliQuantity(milli/10, resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity((255+11*maxPods)<<20, resource.BinarySI),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Gi"),
	}
	for name, q := range configured {
		out[name] = q
	}
	return out
}

// nodeClient is what the simulated kubelet needs of the Nodes API.
type nodeClient interface {
	Create(ctx context.Context, node *corev1.Node, opts metav1.CreateOptions) (*corev1.Node, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// nodeRegistration tracks an instance's Node.
type nodeRegistration struct {
	// registered is set while the Node exists.
	registered bool
	// attempts counts the failures since the last success; retryAt is when to try again.
	attempts int
	retryAt  time.Time
}

// nodeInput is what the Node of an instance is built from.
type nodeInput struct {
	instanceID    string
	region        string
	zone          string
	privateDNS    string
	privateIP     string
	instanceType  *catalog.InstanceType
	rootVolumeGiB int
	settings      kubeletSettings
	// windowsBuild is the Windows Server build of the instance's image, "" for Linux.
	windowsBuild string
	// kubelet is the kubelet's version.
	kubelet string
}

// nodeWork is one Node to create or delete.
type nodeWork struct {
	instance *instance
	node     *corev1.Node
	delete   bool
}

// syncNodes registers a Node for every instance that has been running for the boot delay,
// and deletes the Node of every terminated instance. Failures are retried with backoff.
func (s *Server) syncNodes(ctx context.Context) {
	if s.nodes == nil {
		return
	}
	logger := klog.FromContext(ctx)
	var work []nodeWork
	s.mu.Lock()
	now := s.clock.Now()
	for _, i := range s.instances {
		if now.Before(i.node.retryAt) {
			continue
		}
		state := s.stateAt(i, now)
		switch {
		case state == stateRunning && !i.node.registered && !i.neverRegister && !now.Before(i.launchedAt.Add(i.pendingFor+i.bootFor)):
			work = append(work, nodeWork{instance: i, node: s.nodeForInstance(ctx, i)})
		case state == stateTerminated && i.node.registered:
			work = append(work, nodeWork{instance: i, node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: i.privateDNS}}, delete: true})
		}
	}
	s.mu.Unlock()

	for _, w := range work {
		var err error
		if w.delete {
			err = s.deleteNode(ctx, w.node.Name)
		} else {
			err = s.registerNode(ctx, w.node)
		}
		s.mu.Lock()
		reg := &w.instance.node
		if err != nil {
			reg.attempts++
			backoff := min(registrationBackoff<<min(reg.attempts-1, 16), maxRegistrationBackoff)
			reg.retryAt = s.clock.Now().Add(backoff)
			logger.Error(err, "failed to sync node, will retry", "node", klog.KObj(w.node), "instance", w.instance.id, "delete", w.delete, "attempts", reg.attempts, "backoff", backoff)
		} else {
			reg.registered = !w.delete
			reg.attempts = 0
			reg.retryAt = time.Time{}
		}
		s.mu.Unlock()
		if err == nil && w.delete {
			logger.Info("deleted node of terminated instance", "node", klog.KObj(w.node), "instance", w.instance.id)
		} else if err == nil {
			logger.Info("registered node", "node", klog.KObj(w.node), "instance", w.instance.id, "providerID", w.node.Spec.ProviderID)
		}
	}
}

// errStaleNode reports a Node of the same name left by an instance this server no longer has.
var errStaleNode = errors.New("a node of the same name belongs to another instance; deleted it")

// registerNode creates the Node. A Node of the same name and provider ID counts as registered;
// one of another instance, left by an earlier run, is deleted so that the next try succeeds.
func (s *Server) registerNode(ctx context.Context, node *corev1.Node) error {
	_, err := s.nodes.Create(ctx, node, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	existing, err := s.nodes.Get(ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if existing.Spec.ProviderID == node.Spec.ProviderID {
		return nil
	}
	if err := s.deleteNode(ctx, node.Name); err != nil {
		return err
	}
	return errStaleNode
}

// deleteNode deletes the Node; one already gone counts as deleted.
func (s *Server) deleteNode(ctx context.Context, name string) error {
	err := s.nodes.Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// nodeForInstance builds the Node an instance registers, reading its launch template's user
// data. User data that cannot be read is logged and the Node gets only the kubelet's own
// labels. s.mu must be held.
func (s *Server) nodeForInstance(ctx context.Context, i *instance) *corev1.Node {
	settings, err := parseUserData(i.data.userData)
	if err != nil {
		klog.FromContext(ctx).Info("registering node without user data settings", "instance", i.id, "reason", err.Error())
		settings = kubeletSettings{}
	}
	in := nodeInput{
		instanceID:   i.id,
		region:       s.region,
		zone:         i.zone.name,
		privateDNS:   i.privateDNS,
		privateIP:    i.privateIP,
		instanceType: i.instanceType,
		settings:     settings,
		kubelet:      "v" + s.kubernetes + ".0",
	}
	img := s.imageByID(i.imageID)
	if img != nil && img.platform == platformWindows {
		in.windowsBuild = img.windowsBuild
		in.rootVolumeGiB = img.volumes[0].sizeGiB
	}
	if len(i.data.blockDevices) > 0 && i.data.blockDevices[0].volumeSizeGiB != nil {
		in.rootVolumeGiB = *i.data.blockDevices[0].volumeSizeGiB
	}
	return buildNode(in)
}

// buildNode builds the Node that the kubelet and the cloud controller manager would register
// for an instance: kubelet labels, the user data's labels and taints, and capacity and
// allocatable as the kubelet computes them.
func buildNode(in nodeInput) *corev1.Node {
	t := in.instanceType
	labels := map[string]string{}
	for k, v := range in.settings.labels {
		labels[k] = v
	}
	os := string(corev1.Linux)
	if in.windowsBuild != "" {
		os = string(corev1.Windows)
		labels[corev1.LabelWindowsBuild] = in.windowsBuild
	}
	for k, v := range map[string]string{
		corev1.LabelHostname:           in.privateDNS,
		corev1.LabelArchStable:         t.Arch,
		corev1.LabelOSStable:           os,
		corev1.LabelInstanceTypeStable: t.Name,
		corev1.LabelTopologyZone:       in.zone,
		corev1.LabelTopologyRegion:     in.region,
	} {
		labels[k] = v
	}

	pods := int64(t.MaxPods)
	if in.windowsBuild != "" {
		// Windows pods get the secondary addresses of the primary interface alone (VPC
		// resource controller IPAM).
		pods = int64(max(t.IPv4PerENI-1, 0))
	}
	if in.settings.maxPods != nil {
		pods = int64(*in.settings.maxPods)
	}
	rootGiB := in.rootVolumeGiB
	if rootGiB <= 0 {
		rootGiB = defaultRootVolumeGiB
	}
	visibleMiB := int64(float64(t.MemoryMiB) * visibleMemoryFraction)
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(t.VCPU), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(visibleMiB<<20, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(pods, resource.DecimalSI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(int64(rootGiB)<<30, resource.BinarySI),
	}
	if in.settings.raid0 && t.LocalNVMeGiB != nil {
		// The array of the instance store's disks, whose size EC2 gives in GB.
		capacity[corev1.ResourceEphemeralStorage] = *resource.NewScaledQuantity(int64(*t.LocalNVMeGiB), resource.Giga)
	}
	if g := t.GPU; g != nil {
		switch g.Manufacturer {
		case "nvidia":
			capacity[resourceNvidiaGPU] = *resource.NewQuantity(int64(g.Count), resource.DecimalSI)
		case "amd":
			capacity[resourceAMDGPU] = *resource.NewQuantity(int64(g.Count), resource.DecimalSI)
		}
	}
	if a := t.Accelerator; a != nil && a.Manufacturer == "aws" {
		capacity[resourceNeuron] = *resource.NewQuantity(int64(a.Count), resource.DecimalSI)
		capacity[resourceNeuronCore] = *resource.NewQuantity(int64(a.Count*neuronDevices[a.Name].cores), resource.DecimalSI)
	}

	if n := catalog.BranchInterfaces(t.Name); n > 0 && in.windowsBuild == "" {
		// In EKS the VPC resource controller adds this to a Linux node of a type that
		// supports ENI trunking, once the VPC CNI has attached its trunk interface; here the
		// node registers with it.
		capacity[resourcePodENI] = *resource.NewQuantity(int64(n), resource.DecimalSI)
	}
	allocatable := capacity.DeepCopy()
	kubeReserved := in.settings.kubeReserved
	if in.settings.defaultKubeReserved {
		kubeReserved = nodeadmKubeReserved(int64(t.VCPU), pods, in.settings.kubeReserved)
	}
	for _, reserved := range []corev1.ResourceList{kubeReserved, in.settings.systemReserved} {
		for name, q := range reserved {
			subtract(allocatable, name, q)
		}
	}
	for _, e := range []struct {
		resource  corev1.ResourceName
		threshold string
	}{
		{corev1.ResourceMemory, cmp.Or(in.settings.memoryEviction, defaultMemoryEviction)},
		{corev1.ResourceEphemeralStorage, cmp.Or(in.settings.nodefsEviction, defaultNodefsEviction)},
	} {
		if q, err := evictionThreshold(e.threshold, capacity[e.resource]); err == nil {
			subtract(allocatable, e.resource, q)
		}
	}

	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        in.privateDNS,
			Labels:      labels,
			Annotations: map[string]string{kwokNodeAnnotation: "fake"},
		},
		Spec: corev1.NodeSpec{
			ProviderID: "aws:///" + in.zone + "/" + in.instanceID,
			Taints:     in.settings.taints,
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: allocatable,
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: in.privateIP},
				{Type: corev1.NodeHostName, Address: in.privateDNS},
			},
			NodeInfo: corev1.NodeSystemInfo{
				Architecture:    t.Arch,
				OperatingSystem: os,
				KubeletVersion:  in.kubelet,
			},
		},
	}
}

// subtract takes q from a resource the list has, stopping at zero.
func subtract(list corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	have, ok := list[name]
	if !ok {
		return
	}
	have.Sub(q)
	if have.Sign() < 0 {
		have = *resource.NewQuantity(0, have.Format)
	}
	list[name] = have
}
