package scenario

import (
	karpv1 "github.com/tailor-autoscaler/tailor/provisioner/apis/karpenter/v1"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/tags"
	"github.com/tailor-autoscaler/tailor/test/localaws"
)

// WholeNodePrices are what the live instances cost per hour as whole nodes, by instance ID,
// priced the way a fresh plan prices its nodes: each its NodeClaim's price as launched
// (status.price: the instance and the node's volumes, public IPv4 and monitoring), or the
// price it was planned at while its launch is being recorded. An instance belongs to the
// NodeClaim whose provider ID names it or, before that is written, to the one its
// karpenter.sh/nodeclaim tag names. An instance no NodeClaim prices counts its instance
// price alone, and is returned in unpriced.
func WholeNodePrices(live []localaws.InstanceSummary, claims []karpv1.NodeClaim) (prices map[string]float64, unpriced []string) {
	byInstance := map[string]*karpv1.NodeClaim{}
	byName := map[string]*karpv1.NodeClaim{}
	for i := range claims {
		byName[claims[i].Name] = &claims[i]
		if id, err := aws.InstanceIDOf(claims[i].Status.ProviderID); err == nil {
			byInstance[id] = &claims[i]
		}
	}
	prices = make(map[string]float64, len(live))
	for _, i := range live {
		nc, ok := byInstance[i.ID]
		if name := i.Tags[tags.NodeClaim]; !ok && name != "" {
			nc, ok = byName[name]
		}
		if ok {
			if parts, ok := cloudprovider.NodeClaimPrice(nc); ok {
				prices[i.ID] = parts.Total()
				continue
			}
		}
		prices[i.ID] = i.PricePerHour
		unpriced = append(unpriced, i.ID)
	}
	return prices, unpriced
}

// WholeNodePrice is the sum of WholeNodePrices.
func WholeNodePrice(live []localaws.InstanceSummary, claims []karpv1.NodeClaim) (total float64, unpriced []string) {
	prices, unpriced := WholeNodePrices(live, claims)
	for _, p := range prices {
		total += p
	}
	return total, unpriced
}
