package simulate

// For the tests of package simulate_test, which plan the workloads of test/workloads, a
// package that imports this one.
var (
	RunDecoded = run
	CheckPlan  = checkPlan
)
