package informers_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/deletioncost"
	"github.com/tailor-autoscaler/tailor/provisioner/informers"
	"github.com/tailor-autoscaler/tailor/provisioner/launchlimit"
	"github.com/tailor-autoscaler/tailor/provisioner/reservation"
	"github.com/tailor-autoscaler/tailor/provisioner/surge"
)

// Fates of a field under a transform.
const (
	kept    = "kept"
	dropped = "dropped"
	// cut: part of the field is kept.
	cut = "cut"
)

// section is a struct inside an object whose fields the transform decides on one by one.
type section struct {
	path string
	// new returns an object in which the struct exists.
	new func() any
	// at returns the struct in the object, false when the transform removed it.
	at func(obj any) (reflect.Value, bool)
}

func podSection(path string, with func(*corev1.Pod), at func(*corev1.Pod) (any, bool)) section {
	return section{
		path: path,
		new: func() any {
			p := &corev1.Pod{}
			with(p)
			return p
		},
		at: func(obj any) (reflect.Value, bool) {
			v, ok := at(obj.(*corev1.Pod))
			if !ok {
				return reflect.Value{}, false
			}
			return reflect.ValueOf(v).Elem(), true
		},
	}
}

func nodeSection(path string, at func(*corev1.Node) any) section {
	return section{
		path: path,
		new:  func() any { return &corev1.Node{} },
		at:   func(obj any) (reflect.Value, bool) { return reflect.ValueOf(at(obj.(*corev1.Node))).Elem(), true },
	}
}

func nothing(*corev1.Pod) {}

func oneContainer(p *corev1.Pod)     { p.Spec.Containers = []corev1.Container{{}} }
func oneInitContainer(p *corev1.Pod) { p.Spec.InitContainers = []corev1.Container{{}} }
func oneVolume(p *corev1.Pod)        { p.Spec.Volumes = []corev1.Volume{{Name: "data"}} }

// TestTransformsDecideEveryField sets each field of pods and nodes on its own, transforms
// the object, and checks what became of the field: kept, dropped or cut (partly kept). A
// field Kubernetes adds fails the test until it is decided on here and in the transform;
// a field Tailor starts to read must be kept.
func TestTransformsDecideEveryField(t *testing.T) {
	pod := []section{
		podSection("metadata", nothing, func(p *corev1.Pod) (any, bool) { return &p.ObjectMeta, true }),
		podSection("spec", nothing, func(p *corev1.Pod) (any, bool) { return &p.Spec, true }),
		podSection("spec.containers[]", oneContainer, func(p *corev1.Pod) (any, bool) {
			if len(p.Spec.Containers) == 0 {
				return nil, false
			}
			return &p.Spec.Containers[0], true
		}),
		podSection("spec.initContainers[]", oneInitContainer, func(p *corev1.Pod) (any, bool) {
			if len(p.Spec.InitContainers) == 0 {
				return nil, false
			}
			return &p.Spec.InitContainers[0], true
		}),
		podSection("spec.containers[].resources", oneContainer, func(p *corev1.Pod) (any, bool) {
			if len(p.Spec.Containers) == 0 {
				return nil, false
			}
			return &p.Spec.Containers[0].Resources, true
		}),
		podSection("spec.volumes[]", oneVolume, func(p *corev1.Pod) (any, bool) {
			if len(p.Spec.Volumes) == 0 {
				return nil, false
			}
			return &p.Spec.Volumes[0].VolumeSource, true
		}),
		podSection("status", nothing, func(p *corev1.Pod) (any, bool) { return &p.Status, true }),
	}
	node := []section{
		nodeSection("metadata", func(n *corev1.Node) any { return &n.ObjectMeta }),
		nodeSection("spec", func(n *corev1.Node) any { return &n.Spec }),
		nodeSection("status", func(n *corev1.Node) any { return &n.Status }),
	}
	metadata := func(prefix string, annotations string) map[string]string {
		out := map[string]string{}
		for _, f := range []string{"name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
			"creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "ownerReferences", "finalizers"} {
			out[prefix+f] = kept
		}
		out[prefix+"annotations"] = annotations
		out[prefix+"managedFields"] = dropped
		return out
	}
	wantPod := metadata("metadata.", dropped)
	for f, fate := range map[string]string{
		// Read by the planner, as the scheduler's filters read them.
		"volumes": cut, "initContainers": cut, "containers": cut, "nodeSelector": kept, "nodeName": kept,
		"affinity": kept, "tolerations": kept, "overhead": kept, "topologySpreadConstraints": kept, "resources": cut,
		// Read by the drain.
		"terminationGracePeriodSeconds": kept, "priorityClassName": kept,
		"ephemeralContainers": dropped, "restartPolicy": dropped, "activeDeadlineSeconds": dropped, "dnsPolicy": dropped,
		"serviceAccountName": dropped, "serviceAccount": dropped, "automountServiceAccountToken": dropped,
		"hostNetwork": dropped, "hostPID": dropped, "hostIPC": dropped, "shareProcessNamespace": dropped,
		"securityContext": dropped, "imagePullSecrets": dropped, "hostname": dropped, "subdomain": dropped,
		"schedulerName": kept, "hostAliases": dropped, "priority": kept, "dnsConfig": dropped,
		"readinessGates": dropped, "runtimeClassName": dropped, "enableServiceLinks": dropped, "preemptionPolicy": kept,
		"setHostnameAsFQDN": dropped, "os": dropped, "hostUsers": dropped, "schedulingGates": kept,
		"resourceClaims": kept, "hostnameOverride": dropped,
		// The Workload API (1.35's gang scheduling) is alpha and off.
		"workloadRef": dropped,
	} {
		wantPod["spec."+f] = fate
	}
	for _, c := range []string{"spec.containers[].", "spec.initContainers[]."} {
		for f, fate := range map[string]string{
			"name": kept, "resources": cut, "ports": kept, "restartPolicy": kept,
			"image": dropped, "command": dropped, "args": dropped, "workingDir": dropped, "envFrom": dropped, "env": dropped,
			"resizePolicy": dropped, "restartPolicyRules": dropped, "volumeMounts": dropped, "volumeDevices": dropped,
			"livenessProbe": dropped, "readinessProbe": dropped, "startupProbe": dropped, "lifecycle": dropped,
			"terminationMessagePath": dropped, "terminationMessagePolicy": dropped, "imagePullPolicy": dropped,
			"securityContext": dropped, "stdin": dropped, "stdinOnce": dropped, "tty": dropped,
		} {
			wantPod[c+f] = fate
		}
	}
	for f, fate := range map[string]string{"requests": kept, "limits": dropped, "claims": dropped} {
		wantPod["spec.containers[].resources."+f] = fate
	}
	for _, f := range []string{"hostPath", "emptyDir", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "secret", "nfs",
		"iscsi", "glusterfs", "rbd", "flexVolume", "cinder", "cephfs", "flocker", "downwardAPI", "fc", "azureFile", "configMap",
		"vsphereVolume", "quobyte", "azureDisk", "photonPersistentDisk", "projected", "portworxVolume", "scaleIO", "storageos",
		"csi", "image"} {
		wantPod["spec.volumes[]."+f] = dropped
	}
	wantPod["spec.volumes[].persistentVolumeClaim"] = kept
	wantPod["spec.volumes[].ephemeral"] = kept
	for _, f := range []string{"observedGeneration", "conditions", "message", "reason", "nominatedNodeName", "hostIP", "hostIPs",
		"podIP", "podIPs", "startTime", "qosClass", "ephemeralContainerStatuses",
		"resize", "extendedResourceClaimStatus",
		// Pod-level resources resized in place: alpha and off in 1.35.
		"allocatedResources", "resources"} {
		wantPod["status."+f] = dropped
	}
	wantPod["status.phase"] = kept
	wantPod["status.resourceClaimStatuses"] = kept
	// Of container statuses, what a resize in place changes the scheduler's count by.
	wantPod["status.containerStatuses"] = cut
	wantPod["status.initContainerStatuses"] = cut

	wantNode := metadata("metadata.", kept)
	for _, f := range []string{"podCIDR", "podCIDRs", "providerID", "unschedulable", "taints", "configSource", "externalID"} {
		wantNode["spec."+f] = kept
	}
	for _, f := range []string{"capacity", "phase", "addresses", "daemonEndpoints", "nodeInfo", "images", "volumesInUse",
		"volumesAttached", "config", "runtimeHandlers", "features", "declaredFeatures"} {
		wantNode["status."+f] = dropped
	}
	wantNode["status.allocatable"] = kept
	// Only the Ready condition is kept; the filled condition has another type.
	wantNode["status.conditions"] = dropped

	tests := []struct {
		name      string
		sections  []section
		transform toolscache.TransformFunc
		want      map[string]string
	}{
		{name: "pods", sections: pod, transform: informers.Pod, want: wantPod},
		{name: "nodes", sections: node, transform: informers.Node, want: wantNode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]string{}
			for _, s := range tt.sections {
				for f, fate := range fates(t, s, tt.transform) {
					got[s.path+"."+f] = fate
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("fates of the fields (-want +got):\n%s", diff)
			}
		})
	}
}

// fates fills each field of the section on its own in a new object, transforms the object
// and reports what became of the field, by its JSON name.
func fates(t *testing.T, s section, transform toolscache.TransformFunc) map[string]string {
	t.Helper()
	probe, _ := s.at(s.new())
	out := map[string]string{}
	for i := range probe.NumField() {
		f := probe.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		if name == "" {
			name = f.Name
		}
		want, obj := s.new(), s.new()
		for _, o := range []any{want, obj} {
			v, _ := s.at(o)
			fill(v.Field(i), 0)
		}
		if _, err := transform(obj); err != nil {
			t.Fatal(err)
		}
		wantField, _ := s.at(want)
		v, ok := s.at(obj)
		switch {
		case !ok || v.Field(i).IsZero():
			out[name] = dropped
		case equality.Semantic.DeepEqual(wantField.Field(i).Interface(), v.Field(i).Interface()):
			out[name] = kept
		default:
			out[name] = cut
		}
	}
	return out
}

var (
	quantityType = reflect.TypeFor[resource.Quantity]()
	timeType     = reflect.TypeFor[metav1.Time]()
	intstrType   = reflect.TypeFor[intstr.IntOrString]()
)

// fill sets v, and every exported field reachable from it, to a value that is not zero:
// slices and maps get one element.
func fill(v reflect.Value, depth int) {
	if depth > 16 {
		return
	}
	switch v.Type() {
	case quantityType:
		v.Set(reflect.ValueOf(resource.MustParse("1")))
		return
	case timeType:
		v.Set(reflect.ValueOf(metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))))
		return
	case intstrType:
		v.Set(reflect.ValueOf(intstr.FromInt32(1)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), depth+1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, depth+1)
		fill(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	}
}

func TestPodTransform(t *testing.T) {
	requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
	claim := corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want *corev1.Pod
	}{
		{
			name: "only the annotations Tailor reads stay",
			pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{
				karpv1.DoNotDisruptAnnotationKey: "true", corev1.MirrorPodAnnotationKey: "abc", "prometheus.io/scrape": "true",
			}}},
			want: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{
				karpv1.DoNotDisruptAnnotationKey: "true", corev1.MirrorPodAnnotationKey: "abc",
			}}},
		},
		{
			name: "deletion costs, their record, and replace before evict's opt-in and marks stay",
			pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{
				deletioncost.PodDeletionCostAnnotationKey: "100", deletioncost.ManagedAnnotationKey: "-7500",
				surge.AnnotationKey: "true", surge.ReplacesAnnotationKey: "web-old", surge.DeadlineAnnotationKey: "2026-12-04T21:10:00Z",
				reservation.ControllerAnnotationKey: "uid-rs", "deployment.kubernetes.io/revision": "3",
			}}},
			want: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{
				deletioncost.PodDeletionCostAnnotationKey: "100", deletioncost.ManagedAnnotationKey: "-7500",
				surge.AnnotationKey: "true", surge.ReplacesAnnotationKey: "web-old", surge.DeadlineAnnotationKey: "2026-12-04T21:10:00Z",
				reservation.ControllerAnnotationKey: "uid-rs",
			}}},
		},
		{
			name: "of the conditions, Ready's status and the launch limit's whole stay",
			pod: &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable"},
				{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady"},
				{Type: launchlimit.PodCondition, Status: corev1.ConditionTrue, Reason: "LaunchLimitReached", Message: "planned capacity did not fit: DynamicResources: cannot allocate all claims"},
			}}},
			want: &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionFalse},
				{Type: launchlimit.PodCondition, Status: corev1.ConditionTrue, Reason: "LaunchLimitReached", Message: "planned capacity did not fit: DynamicResources: cannot allocate all claims"},
			}}},
		},
		{
			name: "no annotation Tailor reads leaves none",
			pod:  &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{"prometheus.io/scrape": "true"}}},
			want: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}},
		},
		{
			name: "container ports stay only when bound on the node",
			pod: &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Ports: []corev1.ContainerPort{
				{Name: "http", ContainerPort: 8080}, {Name: "metrics", ContainerPort: 9100, HostPort: 9100, Protocol: corev1.ProtocolTCP},
			}}}}},
			want: &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Ports: []corev1.ContainerPort{
				{Name: "metrics", ContainerPort: 9100, HostPort: 9100, Protocol: corev1.ProtocolTCP},
			}}}}},
		},
		{
			name: "a sidecar keeps its restart policy and requests, not its limits",
			pod: &corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{
				Name: "proxy", Image: "envoy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
				Resources: corev1.ResourceRequirements{Requests: requests, Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
			}}}},
			want: &corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{
				Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Resources: corev1.ResourceRequirements{Requests: requests},
			}}}},
		},
		{
			name: "pod-level limits alone leave no pod-level resources",
			pod:  &corev1.Pod{Spec: corev1.PodSpec{Resources: &corev1.ResourceRequirements{Limits: requests}}},
			want: &corev1.Pod{},
		},
		{
			name: "only volumes of claims stay",
			pod: &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{
				{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
				{Name: "data", VolumeSource: claim},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
			}}},
			want: &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: claim},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
			}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			once, err := informers.Pod(tt.pod.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, once); diff != "" {
				t.Errorf("transformed pod (-want +got):\n%s", diff)
			}
			twice, err := informers.Pod(once)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, twice); diff != "" {
				t.Errorf("pod transformed twice (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodeTransformKeepsTheReadyCondition(t *testing.T) {
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}
	node := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}, ready, {Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse},
	}}}
	got, err := informers.Node(node)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("transformed node (-want +got):\n%s", diff)
	}
}

func TestTransformsPassOtherObjectsThrough(t *testing.T) {
	tombstone := toolscache.DeletedFinalStateUnknown{Key: "default/web", Obj: &corev1.Pod{}}
	for name, transform := range map[string]toolscache.TransformFunc{"pod": informers.Pod, "node": informers.Node} {
		got, err := transform(tombstone)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(any(tombstone), got); diff != "" {
			t.Errorf("%s transform of a tombstone (-want +got):\n%s", name, diff)
		}
	}
}

func TestUnfinishedPodsSelectsAsTheScheduler(t *testing.T) {
	tests := []struct {
		phase corev1.PodPhase
		want  bool
	}{
		{phase: corev1.PodPending, want: true},
		{phase: corev1.PodRunning, want: true},
		{phase: corev1.PodUnknown, want: true},
		{phase: corev1.PodSucceeded, want: false},
		{phase: corev1.PodFailed, want: false},
	}
	for _, tt := range tests {
		t.Run(string(tt.phase), func(t *testing.T) {
			got := informers.UnfinishedPods.Matches(fields.Set{"status.phase": string(tt.phase)})
			if got != tt.want {
				t.Errorf("UnfinishedPods matches a %s pod: %v, want %v", tt.phase, got, tt.want)
			}
		})
	}
}
