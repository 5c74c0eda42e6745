#!/usr/bin/env bash
# What nodes really cost: per shared workload (tiny 3,000, diverse 1,000, webmix 1,000 pods;
# WORKLOADS="shape:pods ..." overrides), with the EKS add-ons' DaemonSets and the AL2023
# default 20 GiB gp3 root volume, the plan made by instance prices only (as Karpenter plans)
# beside the plan made by whole node prices, both priced the true way: instance, volumes,
# public IPv4 (PUBLIC_SUBNETS=1), monitoring and the DaemonSets' share. Prints a table and
# writes _output/bench/nodecost.json.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$TAILOR_ROOT"
# python3 sums the plans up below.
ensure_command python3 python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/tailor-provisioner" ./provisioner/cmd/tailor-provisioner
go build -o "$work/tailor-workloads" ./test/workloads/cmd/tailor-workloads
flags=(--eks-daemonsets)
[[ "${PUBLIC_SUBNETS:-0}" == 1 ]] && flags+=(--public-subnets)
for workload in ${WORKLOADS:-tiny:3000 diverse:1000 webmix:1000}; do
  shape=${workload%%:*} pods=${workload##*:}
  log "planning $shape $pods"
  "$work/tailor-workloads" "$shape" "$pods" > "$work/$shape-$pods.json"
  "$work/tailor-provisioner" simulate -f "$work/$shape-$pods.json" "${flags[@]}" --price-instances-only > "$work/$shape-$pods.instances.out"
  "$work/tailor-provisioner" simulate -f "$work/$shape-$pods.json" "${flags[@]}" > "$work/$shape-$pods.nodes.out"
done
mkdir -p _output/bench
python3 - "$work" "$TAILOR_ROOT/_output/bench/nodecost.json" ${WORKLOADS:-tiny:3000 diverse:1000 webmix:1000} <<'PY'
import json, sys
work, out, workloads = sys.argv[1], sys.argv[2], sys.argv[3:]
parts = ["instance", "volumes", "publicIPv4", "monitoring", "daemonSets"]
def summary(path):
    plan = json.load(open(path))
    total = {p: round(sum(nc["priceParts"][p] for nc in plan["nodeClaims"]), 4) for p in parts}
    return {"nodes": plan["nodes"], "pricePerHour": plan["totalPricePerHour"], "priceParts": total,
            "unschedulable": len(plan["unschedulable"]), "solveSeconds": plan["solveSeconds"]}
rows = []
for w in workloads:
    shape, pods = w.split(":")
    base = f"{work}/{shape}-{pods}"
    rows.append({"shape": shape, "pods": int(pods),
                 "instancePricesOnly": summary(base + ".instances.out"),
                 "wholeNodePrices": summary(base + ".nodes.out")})
json.dump({"workloads": rows}, open(out, "w"), indent=2)
print(f"{'workload':<14} {'plan':<16} {'nodes':>6} {'$/hour':>9} {'instance':>9} {'volumes':>8} {'publicIPv4':>10} {'daemonSets':>10}")
for r in rows:
    for name, key in (("instances only", "instancePricesOnly"), ("whole nodes", "wholeNodePrices")):
        s = r[key]
        p = s["priceParts"]
        print(f"{r['shape'] + ' ' + str(r['pods']):<14} {name:<16} {s['nodes']:>6} {s['pricePerHour']:>9.4f} {p['instance']:>9.4f} {p['volumes']:>8.4f} {p['publicIPv4']:>10.4f} {p['daemonSets']:>10.4f}")
    a, b = r["instancePricesOnly"]["pricePerHour"], r["wholeNodePrices"]["pricePerHour"]
    print(f"{'':<14} {'saving':<16} {'':>6} {(a - b) / a * 100:>8.1f}%")
PY
log "wrote _output/bench/nodecost.json"
