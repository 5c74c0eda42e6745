package nodeclaim

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
)

// Cache index names.
const (
	// NodeProviderIDIndex indexes Nodes by spec.providerID.
	NodeProviderIDIndex = "spec.providerID"
	// NodeClaimProviderIDIndex indexes NodeClaims by status.providerID.
	NodeClaimProviderIDIndex = "status.providerID"
	// NodeClaimInstanceIDIndex indexes NodeClaims by the instance ID that ends their
	// status.providerID (aws:///us-east-1a/i-0123 under i-0123), for EC2 events, which name
	// the instance but not its zone.
	NodeClaimInstanceIDIndex = "status.providerID.instanceID"
	// PodNodeNameIndex indexes pods by spec.nodeName: bound pods under their node's name,
	// unbound pods under "". It answers like the API server's spec.nodeName field selector,
	// so a client reads the same through the cache or straight from the server.
	PodNodeNameIndex = "spec.nodeName"
	// VolumeAttachmentNodeNameIndex indexes VolumeAttachments by spec.nodeName. The API
	// server has no such field selector: read it through the cache.
	VolumeAttachmentNodeNameIndex = "spec.nodeName"
)

// RegisterIndexes adds every index above to the cache of indexer, as the sidecar's
// manager has them.
func RegisterIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	for _, idx := range []struct {
		obj   client.Object
		field string
		index client.IndexerFunc
	}{
		{&corev1.Node{}, NodeProviderIDIndex, NodeProviderID},
		{&karpv1.NodeClaim{}, NodeClaimProviderIDIndex, NodeClaimProviderID},
		{&karpv1.NodeClaim{}, NodeClaimInstanceIDIndex, NodeClaimInstanceID},
		{&corev1.Pod{}, PodNodeNameIndex, PodNodeName},
		{&storagev1.VolumeAttachment{}, VolumeAttachmentNodeNameIndex, VolumeAttachmentNodeName},
	} {
		if err := indexer.IndexField(ctx, idx.obj, idx.field, idx.index); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", idx.obj, idx.field, err)
		}
	}
	return nil
}

// PodNodeName is the index function of PodNodeNameIndex.
func PodNodeName(o client.Object) []string {
	return []string{o.(*corev1.Pod).Spec.NodeName}
}

// NodeProviderID is the index function of NodeProviderIDIndex.
func NodeProviderID(o client.Object) []string {
	if id := o.(*corev1.Node).Spec.ProviderID; id != "" {
		return []string{id}
	}
	return nil
}

// NodeClaimProviderID is the index function of NodeClaimProviderIDIndex.
func NodeClaimProviderID(o client.Object) []string { //nolint:revive // named as NodeProviderID and PodNodeName, the index functions of the other kinds
	if id := o.(*karpv1.NodeClaim).Status.ProviderID; id != "" {
		return []string{id}
	}
	return nil
}

// NodeClaimInstanceID is the index function of NodeClaimInstanceIDIndex.
func NodeClaimInstanceID(o client.Object) []string { //nolint:revive // named as NodeProviderID and PodNodeName, the index functions of the other kinds
	id := o.(*karpv1.NodeClaim).Status.ProviderID
	if i := strings.LastIndex(id, "/"); i >= 0 && i < len(id)-1 {
		return []string{id[i+1:]}
	}
	return nil
}

// VolumeAttachmentNodeName is the index function of VolumeAttachmentNodeNameIndex.
func VolumeAttachmentNodeName(o client.Object) []string {
	return []string{o.(*storagev1.VolumeAttachment).Spec.NodeName}
}
