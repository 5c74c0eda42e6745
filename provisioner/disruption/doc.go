// Package disruption takes capacity away, voluntarily and safely: it replaces drifted
// nodes, removes empty ones and consolidates underutilized ones, deleting a node whose pods
// fit elsewhere or replacing several nodes by a cheaper one. Decisions are made with the
// planner that provisions (package packing), so pods really fit where a decision says, and
// within the NodePools' disruption budgets.
//
// The package reads in three parts. Deciding is pure, over a Cluster: decide.go is the
// entry (Decide, and the order of the methods), and each method has a file holding which
// candidates it takes and why: drift.go, emptiness.go, consolidation.go (a node consolidated
// is there: which nodes are weighed and in what order, what a consolidation must save). The
// consolidation planner behind it is planner.go (a plan made over passes), course.go (a plan
// carried out as planned), zones.go (the zones moved pods keep) and simulation.go (the
// what-ifs on a packing.Snapshot); budget.go is what the disruption budgets allow.
// Carrying a decision out is the Controller's: candidates.go turns the cluster into
// candidates (which nodes may be disrupted at all), execute.go validates a decision,
// launches its replacements and deletes the originals once they are up, reserve.go holds
// room for the moved pods, cordon.go taints and cordons the nodes, prelaunch.go launches
// room ahead of an interruption, and metrics.go records what was decided. controller.go
// wires these together and runs the passes. Expiry is not decided here: package
// nodeclaim/expiration deletes expired NodeClaims itself.
package disruption
