package operator

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	ctrl "sigs.k8s.io/controller-runtime"
)

func TestRegisterControllersSkipsTheDisabledAndNamesTheOneThatFails(t *testing.T) {
	var registered []string
	ok := func(name string) func(ctrl.Manager) error {
		return func(ctrl.Manager) error { registered = append(registered, name); return nil }
	}
	err := registerControllers(nil, []controller{
		{"nodeclaim.lifecycle", true, ok("nodeclaim.lifecycle")},
		{"nodeclaim.repair", false, ok("nodeclaim.repair")},
		{"nodeclaim.garbagecollection", true, built[*fakeController](nil, errors.New("--orphan-instance-grace must be positive"))},
		{"nodepool.status", true, ok("nodepool.status")},
	})
	if diff := cmp.Diff([]string{"nodeclaim.lifecycle"}, registered); diff != "" {
		t.Errorf("registered (-want +got):\n%s", diff)
	}
	want := "registering the nodeclaim.garbagecollection controller: --orphan-instance-grace must be positive"
	if err == nil || err.Error() != want {
		t.Errorf("registerControllers() = %v, want %q", err, want)
	}
}

// fakeController stands for a controller whose constructor failed.
type fakeController struct{}

func (*fakeController) Register(ctrl.Manager) error { return nil }
