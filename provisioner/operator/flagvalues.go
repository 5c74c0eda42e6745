package operator

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tailor-autoscaler/tailor/provisioner/packing"
)

// Feature gate names, Karpenter's.
const (
	GateSpotToSpotConsolidation = "SpotToSpotConsolidation"
	GateNodeRepair              = "NodeRepair"
	GateReservedCapacity        = "ReservedCapacity"
	GateNodeOverlay             = "NodeOverlay"
	GateStaticCapacity          = "StaticCapacity"
	GateCapacityBuffer          = "CapacityBuffer"
)

// builtGates are the gates Tailor implements; the others of knownGates are accepted for a
// Karpenter configuration to apply, and reported when enabled.
var (
	builtGates = map[string]bool{GateSpotToSpotConsolidation: true, GateNodeRepair: true, GateStaticCapacity: true, GateNodeOverlay: true, GateReservedCapacity: true}
	knownGates = map[string]bool{
		GateSpotToSpotConsolidation: true, GateNodeRepair: true, GateReservedCapacity: true,
		GateNodeOverlay: true, GateStaticCapacity: true, GateCapacityBuffer: true,
	}
)

// FeatureGates are Karpenter's feature gates, Name=bool; a flag.Value.
type FeatureGates map[string]bool

// DefaultFeatureGates are Karpenter v1's defaults.
func DefaultFeatureGates() FeatureGates {
	return FeatureGates{
		GateSpotToSpotConsolidation: false, GateNodeRepair: false, GateReservedCapacity: true,
		GateNodeOverlay: false, GateStaticCapacity: false, GateCapacityBuffer: false,
	}
}

// Set parses Name=true,Other=false over the gates already set.
func (g *FeatureGates) Set(s string) error {
	if *g == nil {
		*g = DefaultFeatureGates()
	}
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		name, value, ok := strings.Cut(kv, "=")
		name = strings.TrimSpace(name)
		if !ok {
			return fmt.Errorf("feature gate %q has no value: write %s=true or %s=false", name, name, name)
		}
		if !knownGates[name] {
			return fmt.Errorf("unknown feature gate %q: known gates are %s", name, strings.Join(slices.Sorted(maps.Keys(knownGates)), ", "))
		}
		on, err := strconv.ParseBool(strings.TrimSpace(value))
		if err != nil {
			return fmt.Errorf("feature gate %s=%q: want true or false", name, value)
		}
		(*g)[name] = on
	}
	return nil
}

// String is the gates as Name=bool, sorted by name.
func (g *FeatureGates) String() string {
	if g == nil {
		return ""
	}
	parts := make([]string, 0, len(*g))
	for _, name := range slices.Sorted(maps.Keys(*g)) {
		parts = append(parts, fmt.Sprintf("%s=%t", name, (*g)[name]))
	}
	return strings.Join(parts, ",")
}

// Enabled reports whether the gate is on.
func (g FeatureGates) Enabled(name string) bool { return g[name] }

// Unbuilt lists the enabled gates Tailor does not implement, sorted.
func (g FeatureGates) Unbuilt() []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(g)) {
		if g[name] && !builtGates[name] {
			out = append(out, name)
		}
	}
	return out
}

// MinValuesPolicy is Karpenter's minValuesPolicy; a flag.Value.
type MinValuesPolicy string

// Karpenter's minValues policies.
const (
	// MinValuesStrict refuses a NodeClaim whose minValues cannot be met.
	MinValuesStrict = MinValuesPolicy(packing.MinValuesStrict)
	// MinValuesBestEffort relaxes minValues when they cannot be met, and says so.
	MinValuesBestEffort = MinValuesPolicy(packing.MinValuesBestEffort)
)

// Set accepts Strict or BestEffort.
func (p *MinValuesPolicy) Set(s string) error {
	switch v := MinValuesPolicy(s); v {
	case MinValuesStrict, MinValuesBestEffort:
		*p = v
		return nil
	}
	return fmt.Errorf("min values policy %q: want %s or %s", s, MinValuesStrict, MinValuesBestEffort)
}

func (p *MinValuesPolicy) String() string {
	if p == nil {
		return ""
	}
	return string(*p)
}

// LogLevel is Karpenter's log level; a flag.Value.
type LogLevel string

// Karpenter's log levels; empty leaves the verbosity to -v.
const (
	LogDebug LogLevel = "debug"
	LogInfo  LogLevel = "info"
	LogError LogLevel = "error"
)

// DebugVerbosity is the klog verbosity of LogDebug: Tailor logs at V(1) and V(2).
const DebugVerbosity = 2

// Set accepts debug, info or error.
func (l *LogLevel) Set(s string) error {
	switch v := LogLevel(s); v {
	case LogDebug, LogInfo, LogError:
		*l = v
		return nil
	}
	return fmt.Errorf("log level %q: want %s, %s or %s", s, LogDebug, LogInfo, LogError)
}

func (l *LogLevel) String() string {
	if l == nil {
		return ""
	}
	return string(*l)
}

// NameList is a comma-separated list of names; a flag.Value. Setting it replaces the list,
// and an empty value empties it.
type NameList []string

// Set parses a,b,c.
func (l *NameList) Set(s string) error {
	*l = nil
	for _, name := range strings.Split(s, ",") {
		if name = strings.TrimSpace(name); name != "" {
			*l = append(*l, name)
		}
	}
	return nil
}

func (l *NameList) String() string { return strings.Join(*l, ",") }
