package reservation

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	want := Reservation{Until: metav1.NewTime(time.Date(2026, 11, 23, 12, 15, 0, 0, time.UTC)), Pods: map[types.UID]int{"rs-web": 3, "sts-db": 1},
		Requests: map[types.UID]corev1.ResourceList{"rs-web": {corev1.ResourceCPU: resource.MustParse("500m")}, "sts-db": {corev1.ResourceMemory: resource.MustParse("4Gi")}}}
	value, err := Encode(want)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{AnnotationKey: value}}}
	got, ok, err := Of(node)
	if err != nil || !ok {
		t.Fatalf("Of = %v, %v, want the reservation", ok, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoded reservation (-want +got):\n%s", diff)
	}
}

func TestOfNamesTheNodeAndTheExpectedShape(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-1", Annotations: map[string]string{AnnotationKey: `{"pods": 3}`}}}
	_, _, err := Of(node)
	if err == nil {
		t.Fatal("Of accepted a malformed reservation")
	}
	for _, part := range []string{"ip-10-0-0-1", AnnotationKey, `"pods": {controller UID: count}`} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not mention %q", err, part)
		}
	}
	if _, ok, err := Of(&corev1.Node{}); ok || err != nil {
		t.Errorf("Of(node without the annotation) = %v, %v, want none", ok, err)
	}
}

func TestWants(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	r := Reservation{Until: metav1.NewTime(now.Add(time.Minute)), Pods: map[types.UID]int{"rs-web": 2}}
	tests := []struct {
		name       string
		controller types.UID
		running    int
		at         time.Time
		want       bool
	}{
		{name: "fewer pods running than reserved", controller: "rs-web", running: 1, at: now, want: true},
		{name: "as many running as reserved", controller: "rs-web", running: 2, at: now, want: false},
		{name: "another controller", controller: "rs-api", running: 0, at: now, want: false},
		{name: "lapsed", controller: "rs-web", running: 0, at: now.Add(time.Minute), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Wants(tt.controller, tt.running, tt.at); got != tt.want {
				t.Errorf("Wants(%s, %d) = %v, want %v", tt.controller, tt.running, got, tt.want)
			}
		})
	}
}

func TestKeptFor(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	requests := func(cpu, memory string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
	}
	r := Reservation{
		Until:    metav1.NewTime(now.Add(time.Minute)),
		Pods:     map[types.UID]int{"rs-web": 3, "rs-api": 2, "sts-db": 1},
		Requests: map[types.UID]corev1.ResourceList{"rs-web": requests("500m", "1Gi"), "rs-api": requests("1", "2Gi"), "sts-db": requests("2", "4Gi")},
	}
	running := map[types.UID]int{"rs-web": 1, "sts-db": 1}
	tests := []struct {
		name     string
		except   types.UID
		at       time.Time
		want     corev1.ResourceList
		wantPods int
	}{
		{name: "a pod without a controller: every pod still to come", at: now, want: requests("3", "6Gi"), wantPods: 4},
		{name: "a web pod: the api pods still to come", except: "rs-web", at: now, want: requests("2", "4Gi"), wantPods: 2},
		{name: "an api pod: the web pods still to come", except: "rs-api", at: now, want: requests("1", "2Gi"), wantPods: 2},
		{name: "lapsed", at: now.Add(time.Minute), want: corev1.ResourceList{}, wantPods: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, pods := r.KeptFor(tt.except, func(c types.UID) int { return running[c] }, tt.at)
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("room kept (-want +got):\n%s", diff)
			}
			if pods != tt.wantPods {
				t.Errorf("pods kept for = %d, want %d", pods, tt.wantPods)
			}
		})
	}
}
