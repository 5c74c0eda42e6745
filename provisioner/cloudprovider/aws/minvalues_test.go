package aws

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/launch"
)

// fleetRecorder keeps the form of every CreateFleet request the SDK sends.
type fleetRecorder struct {
	base  http.RoundTripper
	mu    sync.Mutex
	forms []url.Values
}

func (r *fleetRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if form, err := url.ParseQuery(string(body)); err == nil && form.Get("Action") == "CreateFleet" {
			r.mu.Lock()
			r.forms = append(r.forms, form)
			r.mu.Unlock()
		}
	}
	return r.base.RoundTrip(req)
}

var overrideTypeKey = regexp.MustCompile(`^LaunchTemplateConfigs\.\d+\.Overrides\.\d+\.InstanceType$`)

// requestedTypes are the instance types of a CreateFleet request's overrides.
func requestedTypes(form url.Values) []string {
	var out []string
	for k, v := range form {
		if overrideTypeKey.MatchString(k) {
			out = append(out, v...)
		}
	}
	return out
}

func TestCreateFleetKeepsMinValuesFamilies(t *testing.T) {
	const minFamilies = 80
	h := newHarness(t)
	rec := &fleetRecorder{base: http.DefaultTransport}
	h.cfg.HTTPClient = &http.Client{Transport: rec}
	p := h.newProvider(t, clock.RealClock{})
	ctx := context.Background()
	nc := nodeClaim("diverse", nil, karpv1.CapacityTypeOnDemand)
	nc.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
		{Key: karpv1.InstanceFamilyLabelKey, Operator: corev1.NodeSelectorOpExists, MinValues: ptr.To(minFamilies)},
	}
	lc, err := p.launchContext(ctx, nc.Spec.NodeClassRef)
	if err != nil {
		t.Fatal(err)
	}
	familyOf := map[string]string{}
	for _, it := range lc.types {
		familyOf[it.Name] = it.Labels[karpv1.InstanceFamilyLabelKey]
	}
	cheapest := map[string]bool{}
	for _, c := range launch.AllowedOfferings(nc, lc.types)[:launch.MaxOverrides] {
		cheapest[familyOf[c.InstanceType.Name]] = true
	}
	all := map[string]bool{}
	for _, f := range familyOf {
		all[f] = true
	}
	t.Logf("%d families, %d among the cheapest %d offerings", len(all), len(cheapest), launch.MaxOverrides)
	if len(cheapest) >= minFamilies {
		t.Fatalf("the %d cheapest offerings already hold %d families: the test needs a higher minValues", launch.MaxOverrides, len(cheapest))
	}
	if _, err := p.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	if len(rec.forms) == 0 {
		t.Fatal("no CreateFleet request was sent")
	}
	for i, form := range rec.forms {
		types := requestedTypes(form)
		families := map[string]bool{}
		for _, it := range types {
			families[familyOf[it]] = true
		}
		if len(types) > launch.MaxOverrides {
			t.Errorf("CreateFleet request %d has %d overrides, want at most %d", i, len(types), launch.MaxOverrides)
		}
		if len(families) < minFamilies {
			t.Errorf("CreateFleet request %d offers %d families (the cheapest %d offerings hold %d), want at least minValues %d", i, len(families), launch.MaxOverrides, len(cheapest), minFamilies)
		}
	}
}
