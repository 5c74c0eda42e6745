package localaws

import (
	"context"
	"encoding/base64"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
)

// nodeSummary is the part of a Node the tests check.
type nodeSummary struct {
	Name        string
	ProviderID  string
	Labels      map[string]string
	Annotations map[string]string
	Taints      []string
	Capacity    map[string]string
	Allocatable map[string]string
	Addresses   []string
}

func summarizeNode(n *corev1.Node) nodeSummary {
	s := nodeSummary{
		Name:        n.Name,
		ProviderID:  n.Spec.ProviderID,
		Labels:      n.Labels,
		Annotations: n.Annotations,
		Capacity:    quantities(n.Status.Capacity),
		Allocatable: quantities(n.Status.Allocatable),
	}
	for _, t := range n.Spec.Taints {
		s.Taints = append(s.Taints, t.ToString())
	}
	for _, a := range n.Status.Addresses {
		s.Addresses = append(s.Addresses, string(a.Type)+"="+a.Address)
	}
	return s
}

// kubeletLabels are the labels every registered Node has, for an instance in us-east-1a.
func kubeletLabels(instanceType, arch string, extra map[string]string) map[string]string {
	labels := map[string]string{
		"kubernetes.io/hostname":           "ip-10-0-0-4.ec2.internal",
		"kubernetes.io/arch":               arch,
		"kubernetes.io/os":                 "linux",
		"node.kubernetes.io/instance-type": instanceType,
		"topology.kubernetes.io/zone":      "us-east-1a",
		"topology.kubernetes.io/region":    "us-east-1",
	}
	for k, v := range extra {
		labels[k] = v
	}
	return labels
}

func TestBuildNode(t *testing.T) {
	cat, err := catalog.Embedded()
	require.NoError(t, err)
	types := map[string]*catalog.InstanceType{}
	for i := range cat.InstanceTypes {
		types[cat.InstanceTypes[i].Name] = &cat.InstanceTypes[i]
	}
	nodeadm, err := parseUserData(mimeUserData("application/node.eks.aws\n\n" + nodeadmConfig))
	require.NoError(t, err)
	percentEviction, err := parseUserData(mimeUserData("application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      evictionHard: {memory.available: 10%}\n      kubeReserved: {cpu: '5'}"))
	require.NoError(t, err)
	al2KubeReserved, err := parseUserData(mimeUserData("text/x-shellscript\n\n#!/bin/bash\n/etc/eks/bootstrap.sh demo --kubelet-extra-args '--kube-reserved=cpu=100m'"))
	require.NoError(t, err)
	bottlerocketRAID0, err := parseUserData(base64.StdEncoding.EncodeToString([]byte("[settings.kubernetes]\ncluster-name = \"demo\"\n[settings.bootstrap-commands.000-mount-instance-storage]\ncommands = [[\"apiclient\", \"ephemeral-storage\", \"init\"]]\n")))
	require.NoError(t, err)
	windows, err := parseUserData(base64.StdEncoding.EncodeToString([]byte("<powershell>\n" +
		"[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n" +
		"& $EKSBootstrapScriptFile -EKSClusterName 'demo' -APIServerEndpoint 'https://127.0.0.1:6443' -Base64ClusterCA 'Y2E=' " +
		"-KubeletExtraArgs '--node-labels=team=a --register-with-taints=os=windows:NoSchedule --system-reserved=memory=2Gi' 3>&1 4>&1 5>&1 6>&1\n</powershell>\n")))
	require.NoError(t, err)
	addresses := []string{"InternalIP=10.0.0.4", "Hostname=ip-10-0-0-4.ec2.internal"}
	annotations := map[string]string{"kwok.x-k8s.io/node": "fake"}

	tests := []struct {
		name         string
		instanceType string
		rootGiB      int
		settings     kubeletSettings
		windowsBuild string
		want         nodeSummary
	}{
		{
			name:         "a Windows node: os and build labels, the primary interface's pod limit, the bootstrap's labels, taints and reservations",
			instanceType: "m5.large",
			rootGiB:      50,
			settings:     windows,
			windowsBuild: "10.0.20348",
			want: nodeSummary{
				Labels: kubeletLabels("m5.large", "amd64", map[string]string{
					"kubernetes.io/os": "windows", "node.kubernetes.io/windows-build": "10.0.20348", "team": "a",
				}),
				Taints: []string{"os=windows:NoSchedule"},
				// 10 addresses of the primary interface less its own; memory less the EKS
				// kube-reserved for 9 pods (354Mi), 2Gi system-reserved and 100Mi eviction.
				Capacity:    map[string]string{"cpu": "2", "memory": "7782Mi", "pods": "9", "ephemeral-storage": "50Gi"},
				Allocatable: map[string]string{"cpu": "1930m", "memory": "5280Mi", "pods": "9", "ephemeral-storage": "44Gi"},
			},
		},
		{
			name:         "without user data the node has the kubelet's labels, the catalog's pod limit and the kubelet's default eviction thresholds",
			instanceType: "m5.large",
			want: nodeSummary{
				Labels:      kubeletLabels("m5.large", "amd64", nil),
				Capacity:    map[string]string{"cpu": "2", "memory": "7782Mi", "pods": "29", "ephemeral-storage": "20Gi", "vpc.amazonaws.com/pod-eni": "9"},
				Allocatable: map[string]string{"cpu": "2", "memory": "7682Mi", "pods": "29", "ephemeral-storage": "18Gi", "vpc.amazonaws.com/pod-eni": "9"},
			},
		},
		{
			name:         "nodeadm labels, taints, pod limit and reservations",
			instanceType: "m5.large",
			rootGiB:      80,
			settings:     nodeadm,
			want: nodeSummary{
				Labels:      kubeletLabels("m5.large", "amd64", map[string]string{"karpenter.sh/nodepool": "general", "team": "a"}),
				Taints:      []string{"karpenter.sh/unregistered:NoExecute", "dedicated=gpu:NoSchedule"},
				Capacity:    map[string]string{"cpu": "2", "memory": "7782Mi", "pods": "58", "ephemeral-storage": "80Gi", "vpc.amazonaws.com/pod-eni": "9"},
				Allocatable: map[string]string{"cpu": "1830m", "memory": "7008Mi", "pods": "58", "ephemeral-storage": "71Gi", "vpc.amazonaws.com/pod-eni": "9"},
			},
		},
		{
			name:         "AL2's --kube-reserved replaces all of bootstrap.sh's",
			instanceType: "m5.large",
			settings:     al2KubeReserved,
			want: nodeSummary{
				Labels:      kubeletLabels("m5.large", "amd64", nil),
				Capacity:    map[string]string{"cpu": "2", "memory": "7782Mi", "pods": "29", "ephemeral-storage": "20Gi", "vpc.amazonaws.com/pod-eni": "9"},
				Allocatable: map[string]string{"cpu": "1900m", "memory": "7682Mi", "pods": "29", "ephemeral-storage": "18Gi", "vpc.amazonaws.com/pod-eni": "9"},
			},
		},
		{
			name:         "Bottlerocket's kube-reserved defaults and RAID0 on the instance store",
			instanceType: "m5d.large",
			settings:     bottlerocketRAID0,
			want: nodeSummary{
				Labels: kubeletLabels("m5d.large", "amd64", nil),
				// 75G of NVMe less 1Gi and the 10% nodefs threshold.
				Capacity:    map[string]string{"cpu": "2", "memory": "7782Mi", "pods": "29", "ephemeral-storage": "75G", "vpc.amazonaws.com/pod-eni": "9"},
				Allocatable: map[string]string{"cpu": "1930m", "memory": "7108Mi", "pods": "29", "ephemeral-storage": "66426258176", "vpc.amazonaws.com/pod-eni": "9"},
			},
		},
		{
			name:         "NVIDIA GPUs",
			instanceType: "g4dn.xlarge",
			want: nodeSummary{
				Labels:      kubeletLabels("g4dn.xlarge", "amd64", nil),
				Capacity:    map[string]string{"cpu": "4", "memory": "15564Mi", "pods": "29", "ephemeral-storage": "20Gi", "nvidia.com/gpu": "1", "vpc.amazonaws.com/pod-eni": "39"},
				Allocatable: map[string]string{"cpu": "4", "memory": "15464Mi", "pods": "29", "ephemeral-storage": "18Gi", "nvidia.com/gpu": "1", "vpc.amazonaws.com/pod-eni": "39"},
			},
		},
		{
			name:         "AMD GPUs",
			instanceType: "g4ad.xlarge",
			want: nodeSummary{
				Labels:      kubeletLabels("g4ad.xlarge", "amd64", nil),
				Capacity:    map[string]string{"cpu": "4", "memory": "15564Mi", "pods": "8", "ephemeral-storage": "20Gi", "amd.com/gpu": "1", "vpc.amazonaws.com/pod-eni": "12"},
				Allocatable: map[string]string{"cpu": "4", "memory": "15464Mi", "pods": "8", "ephemeral-storage": "18Gi", "amd.com/gpu": "1", "vpc.amazonaws.com/pod-eni": "12"},
			},
		},
		{
			name:         "Neuron devices",
			instanceType: "inf2.xlarge",
			want: nodeSummary{
				Labels:      kubeletLabels("inf2.xlarge", "amd64", nil),
				Capacity:    map[string]string{"cpu": "4", "memory": "15564Mi", "pods": "58", "ephemeral-storage": "20Gi", "aws.amazon.com/neuron": "1", "aws.amazon.com/neuroncore": "2", "vpc.amazonaws.com/pod-eni": "18"},
				Allocatable: map[string]string{"cpu": "4", "memory": "15464Mi", "pods": "58", "ephemeral-storage": "18Gi", "aws.amazon.com/neuron": "1", "aws.amazon.com/neuroncore": "2", "vpc.amazonaws.com/pod-eni": "18"},
			},
		},
		{
			name:         "eviction as a percentage, reservations larger than the node and nodeadm's defaults for the rest",
			instanceType: "m6g.large",
			settings:     percentEviction,
			want: nodeSummary{
				Labels:   kubeletLabels("m6g.large", "arm64", nil),
				Capacity: map[string]string{"cpu": "2", "memory": "7782Mi", "pods": "29", "ephemeral-storage": "20Gi", "vpc.amazonaws.com/pod-eni": "9"},
				// Memory: 90% of 7782Mi less nodeadm's 255Mi+11Mi×29 pods, in bytes. Storage:
				// 20Gi less nodeadm's 1Gi and the default 10% nodefs threshold.
				Allocatable: map[string]string{"cpu": "0", "memory": "6742133965", "pods": "29", "ephemeral-storage": "17Gi", "vpc.amazonaws.com/pod-eni": "9"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := buildNode(nodeInput{
				instanceID:    "i-0123456789abcdef0",
				region:        "us-east-1",
				zone:          "us-east-1a",
				privateDNS:    "ip-10-0-0-4.ec2.internal",
				privateIP:     "10.0.0.4",
				instanceType:  types[tt.instanceType],
				rootVolumeGiB: tt.rootGiB,
				settings:      tt.settings,
				windowsBuild:  tt.windowsBuild,
			})
			want := tt.want
			want.Name = "ip-10-0-0-4.ec2.internal"
			want.ProviderID = "aws:///us-east-1a/i-0123456789abcdef0"
			want.Annotations = annotations
			want.Addresses = addresses

			// The API server keeps the status given on create, which is how the Node
			// arrives with its capacity.
			client := fake.NewClientset()
			_, err := client.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{})
			require.NoError(t, err)
			stored, err := client.CoreV1().Nodes().Get(context.Background(), node.Name, metav1.GetOptions{})
			require.NoError(t, err)
			if diff := cmp.Diff(want, summarizeNode(stored)); diff != "" {
				t.Errorf("node (-want +got):\n%s", diff)
			}
		})
	}
}

// fakeNodes is an in-memory Nodes API whose creates can be made to fail.
type fakeNodes struct {
	mu         sync.Mutex
	nodes      map[string]*corev1.Node
	createErrs []error
	creates    int
}

func newFakeNodes() *fakeNodes { return &fakeNodes{nodes: map[string]*corev1.Node{}} }

func (f *fakeNodes) Create(_ context.Context, node *corev1.Node, _ metav1.CreateOptions) (*corev1.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creates++
	if len(f.createErrs) > 0 {
		err := f.createErrs[0]
		f.createErrs = f.createErrs[1:]
		return nil, err
	}
	if _, ok := f.nodes[node.Name]; ok {
		return nil, apierrors.NewAlreadyExists(corev1.Resource("nodes"), node.Name)
	}
	f.nodes[node.Name] = node.DeepCopy()
	return node, nil
}

func (f *fakeNodes) Get(_ context.Context, name string, _ metav1.GetOptions) (*corev1.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	node, ok := f.nodes[name]
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
	}
	return node.DeepCopy(), nil
}

func (f *fakeNodes) Delete(_ context.Context, name string, _ metav1.DeleteOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.nodes[name]; !ok {
		return apierrors.NewNotFound(corev1.Resource("nodes"), name)
	}
	delete(f.nodes, name)
	return nil
}

// names lists the Nodes and their provider ids.
func (f *fakeNodes) names() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for name, n := range f.nodes {
		out[name] = n.Spec.ProviderID
	}
	return out
}

func TestNodeRegistration(t *testing.T) {
	h := newHarness(t, Options{BootDelay: 2 * time.Second, ShutdownDelay: 3 * time.Second})
	nodes := newFakeNodes()
	h.server.nodes = nodes
	h.launchTemplate(t, "nodes", h.imageID(t, al2023X86Parameter), mimeUserData("application/node.eks.aws\n\n"+nodeadmConfig))
	out := h.fleet(t, "nodes", ec2types.DefaultTargetCapacityTypeSpot, 1, override("m5.large", h.subnets(t)["us-east-1a"]))
	id := launchedIDs(out)[0]
	name := "ip-10-0-0-4.ec2.internal"
	providerID := "aws:///us-east-1a/" + id
	nodes.createErrs = []error{errors.New("connection refused")}

	steps := []struct {
		name        string
		advance     time.Duration
		terminate   bool
		want        map[string]string
		wantCreates int
	}{
		{name: "booting", want: map[string]string{}},
		{name: "booted, but the API server refuses", advance: 2 * time.Second, want: map[string]string{}, wantCreates: 1},
		{name: "backing off", advance: 100 * time.Millisecond, want: map[string]string{}, wantCreates: 1},
		{name: "retried", advance: 400 * time.Millisecond, want: map[string]string{name: providerID}, wantCreates: 2},
		{name: "steady", advance: time.Minute, want: map[string]string{name: providerID}, wantCreates: 2},
		{name: "shutting down keeps the node", terminate: true, want: map[string]string{name: providerID}, wantCreates: 2},
		{name: "terminated deletes the node", advance: 3 * time.Second, want: map[string]string{}, wantCreates: 2},
	}
	for _, step := range steps {
		h.clock.Step(step.advance)
		if step.terminate {
			_, err := h.ec2.TerminateInstances(h.ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
			require.NoError(t, err)
		}
		h.server.sync(h.ctx)
		if diff := cmp.Diff(step.want, nodes.names()); diff != "" {
			t.Errorf("%s: nodes (-want +got):\n%s", step.name, diff)
		}
		require.Equal(t, step.wantCreates, nodes.creates, step.name)
		require.Equal(t, len(step.want) == 1, h.server.Instances()[0].NodeRegistered, step.name)
	}
}

func TestNodeRegistrationReplacesAStaleNode(t *testing.T) {
	h := newHarness(t, Options{})
	nodes := newFakeNodes()
	nodes.nodes["ip-10-0-0-4.ec2.internal"] = &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-4.ec2.internal"},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0000000000000000f"},
	}
	h.server.nodes = nodes
	h.launchTemplate(t, "nodes", h.imageID(t, al2023X86Parameter), "")
	id := launchedIDs(h.fleet(t, "nodes", ec2types.DefaultTargetCapacityTypeOnDemand, 1, override("m5.large", h.subnets(t)["us-east-1a"])))[0]

	h.server.sync(h.ctx)
	require.Empty(t, nodes.names(), "the stale node is deleted first")
	h.clock.Step(registrationBackoff)
	h.server.sync(h.ctx)
	require.Equal(t, map[string]string{"ip-10-0-0-4.ec2.internal": "aws:///us-east-1a/" + id}, nodes.names())
}

func TestRunRegistersNodesAsTheClockAdvances(t *testing.T) {
	h := newHarness(t, Options{BootDelay: time.Second})
	nodes := newFakeNodes()
	h.server.nodes = nodes
	h.launchTemplate(t, "nodes", h.imageID(t, al2023X86Parameter), "")
	h.fleet(t, "nodes", ec2types.DefaultTargetCapacityTypeOnDemand, 1, override("m5.large", h.subnets(t)["us-east-1a"]))

	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.server.Run(ctx)
	}()
	require.Eventually(t, h.clock.HasWaiters, 5*time.Second, time.Millisecond)
	require.Empty(t, nodes.names())

	h.clock.Step(time.Second)
	require.Eventually(t, func() bool { return len(nodes.names()) == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	<-done
}
