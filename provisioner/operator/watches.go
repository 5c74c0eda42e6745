package operator

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/provisioning"
)

// forgetBoundPods drops pods from the provisioning queue and tracker once they are bound or
// deleted.
func forgetBoundPods(ctx context.Context, mgr ctrl.Manager, prov *provisioning.Provisioner, clk clock.PassiveClock) error {
	informer, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return fmt.Errorf("getting pod informer: %w", err)
	}
	_, err = informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
				prov.Bound(pod, clk.Now())
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				prov.Forget(pod.UID)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	return nil
}

// replanOnNodePoolChanges tells the provisioner when a NodePool is created or changes: pods
// held back at their launch limit may fit it now.
func replanOnNodePoolChanges(ctx context.Context, mgr ctrl.Manager, prov *provisioning.Provisioner) error {
	informer, err := mgr.GetCache().GetInformer(ctx, &karpv1.NodePool{})
	if err != nil {
		return fmt.Errorf("getting NodePool informer: %w", err)
	}
	_, err = informer.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(_ any, isInInitialList bool) {
			if !isInInitialList {
				prov.NodePoolsChanged()
			}
		},
		UpdateFunc: func(old, obj any) {
			if o, n := old.(*karpv1.NodePool), obj.(*karpv1.NodePool); o.Generation != n.Generation || !maps.Equal(o.Labels, n.Labels) {
				prov.NodePoolsChanged()
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watching NodePools: %w", err)
	}
	return nil
}

// takeInCreatedPods hands pods to the provisioner as they are created (see
// provisioning.Provisioner.Intake). The pods that exist already have been or will be tried by
// the scheduler.
func takeInCreatedPods(ctx context.Context, mgr ctrl.Manager, prov *provisioning.Provisioner) error {
	informer, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return fmt.Errorf("getting pod informer: %w", err)
	}
	_, err = informer.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			if pod, ok := obj.(*corev1.Pod); ok && !isInInitialList {
				prov.Intake(pod)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watching created pods: %w", err)
	}
	return nil
}
