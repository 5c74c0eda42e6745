package operator

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/tailor-autoscaler/tailor/provisioner/capacityblock"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/measured"
	"github.com/tailor-autoscaler/tailor/provisioner/interruption"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/drain"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/drift"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/expiration"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/garbagecollection"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/lifecycle"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/nodetermination"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/repair"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclaim/termination"
	"github.com/tailor-autoscaler/tailor/provisioner/nodeclass"
	"github.com/tailor-autoscaler/tailor/provisioner/nodepool"
	"github.com/tailor-autoscaler/tailor/provisioner/nodepool/static"
	"github.com/tailor-autoscaler/tailor/provisioner/overlay"
)

// controller is one of the sidecar's controllers: its name (the one it logs under), whether
// it runs (its feature gate or setting), and how it registers with the manager.
type controller struct {
	name     string
	enabled  bool
	register func(ctrl.Manager) error
}

// controllers are the sidecar's controllers, each built from the parts it needs.
func (s *sidecar) controllers() []controller {
	kube, api, gates := s.mgr.GetClient(), s.mgr.GetAPIReader(), s.opts.FeatureGates
	return []controller{
		{"nodeoverlay.status", gates.Enabled(GateNodeOverlay), overlay.NewController(kube, s.provider).Register},
		{"disruption", true, added(s.disruptions)},
		{"nodeclaim.garbagecollection", true, built(garbagecollection.NewController(kube, api, measured.New(s.provider, "nodeclaim.garbagecollection"), s.recorder, s.clk, s.opts.GarbageCollection))},
		{"interruption", s.opts.InterruptionQueue != "", s.registerInterruption},
		{"nodeclaim.lifecycle", true, lifecycle.NewController(kube, measured.New(s.provider, "nodeclaim.lifecycle"), s.recorder, s.clk).Register},
		{"nodeclaim.termination", true, termination.NewController(kube, api, measured.New(s.provider, "nodeclaim.termination"), drain.New(kube, api, s.kube), s.recorder, s.clk).Register},
		{"node.termination", true, nodetermination.NewController(kube, s.recorder).Register},
		{"nodeclaim.expiration", true, expiration.NewController(kube, s.recorder, s.clk).Register},
		{"nodeclaim.drift", true, drift.NewController(kube).Register},
		{"nomination", true, s.nominations.Register},
		{"nodeclass.status", true, nodeclass.NewController(kube, s.provider, s.provider, s.recorder, s.clk).Register},
		{"nodepool.status", true, nodepool.NewController(kube, s.recorder).Register},
		{"nodepool.static", gates.Enabled(GateStaticCapacity), static.NewController(kube, s.prov, s.recorder, s.clk).Register},
		{"capacityblock", gates.Enabled(GateReservedCapacity), capacityblock.NewController(kube, s.recorder, s.clk, s.disruptions).Register},
		{"nodeclaim.repair", gates.Enabled(GateNodeRepair), repair.NewController(kube, s.recorder, s.clk, s.opts.RepairPolicies).Register},
		{"provisioning.gangs", true, s.prov.RegisterGangRetry},
	}
}

// registerControllers registers the enabled controllers with mgr, in order; an error names
// the controller.
func registerControllers(mgr ctrl.Manager, controllers []controller) error {
	for _, c := range controllers {
		if !c.enabled {
			continue
		}
		if err := c.register(mgr); err != nil {
			return fmt.Errorf("registering the %s controller: %w", c.name, err)
		}
	}
	return nil
}

// registerInterruption reads the interruption queue with the provider's SQS client; the
// disruption controller replaces the nodes of interrupted instances.
func (s *sidecar) registerInterruption(mgr ctrl.Manager) error {
	queue, err := interruption.NewSQSQueue(s.sqs, s.opts.InterruptionQueue, 0)
	if err != nil {
		return err
	}
	c, err := interruption.NewController(mgr.GetClient(), queue, s.recorder, s.clk, interruption.Options{Replacer: s.disruptions})
	if err != nil {
		return err
	}
	return c.Register(mgr)
}

// added registers a controller that is a runnable of its own.
func added(r manager.Runnable) func(ctrl.Manager) error {
	return func(mgr ctrl.Manager) error { return mgr.Add(r) }
}

// built registers a controller whose constructor may fail, or returns its error.
func built[C interface{ Register(ctrl.Manager) error }](c C, err error) func(ctrl.Manager) error {
	if err != nil {
		return func(ctrl.Manager) error { return err }
	}
	return c.Register
}
