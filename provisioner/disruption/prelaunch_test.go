package disruption

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPrelaunchLaunchesRoomForTheInterruptedNodesPods(t *testing.T) {
	f := newFixture(t, "prelaunch")
	f.node("spot", "small.xlarge", "3")
	f.node("idle", "small.xlarge")
	f.node("busy", "small.xlarge", "3")
	// The idle node takes one of the two nodes' pods; the other needs new capacity.
	if err := f.ctrl.Prelaunch(f.ctx, f.prefix+"-spot"); err != nil {
		t.Fatal(err)
	}
	if f.launched != 0 {
		t.Fatalf("launched %d NodeClaims for pods that fit on the idle node, want 0", f.launched)
	}
	f.pods[f.prefix+"-idle"] = f.pods[f.prefix+"-busy"]
	if err := f.ctrl.Prelaunch(f.ctx, f.prefix+"-spot"); err != nil {
		t.Fatal(err)
	}
	if f.launched != 1 {
		t.Errorf("launched %d NodeClaims when no node has room, want 1", f.launched)
	}
	if diff := cmp.Diff(map[string]string{"spot": "kept", "idle": "kept", "busy": "kept"}, f.state("spot", "idle", "busy")); diff != "" {
		t.Errorf("Prelaunch touched nodes (-want +got):\n%s", diff)
	}
}
