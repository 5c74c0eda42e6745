package top

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Layout limits of a frame.
const (
	minBar       = 4
	maxBar       = 30
	maxNameWidth = 44
	cpuText      = 14 // "100% 12.25/16"
	memoryText   = 20 // "100% 123.4Gi/256Gi"
	hoursInMonth = 730
)

// Render draws a frame of the model for a terminal width columns wide. The CPU and
// memory bars take the width the other columns leave.
func Render(m Model, width int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d node(s), %s, %d pod(s) bound, %d pending\n",
		m.Cluster.Nodes, price(m.Cluster.PricePerHour, m.Cluster.UnpricedNodes, true), m.Cluster.Resources.Pods, m.PendingPods)

	nameW := len("NODE")
	typeW, zoneW := len("TYPE"), len("ZONE")
	for _, p := range m.NodePools {
		for _, n := range p.Nodes {
			nameW = max(nameW, utf8.RuneCountInString(n.Name))
			typeW = max(typeW, len(n.InstanceType))
			zoneW = max(zoneW, len(n.Zone))
		}
	}
	nameW = min(nameW, maxNameWidth)
	const capW, priceW, podsW, readyW = 9, 8, 4, 5
	fixed := nameW + typeW + zoneW + capW + priceW + podsW + readyW + 2*8 + 2*(3+1) + cpuText + memoryText
	bar := max(minBar, min(maxBar, (width-fixed)/2))
	row := func(name, typ, zone, capacity, price, cpu, memory, pods, ready string) {
		line := fmt.Sprintf("%s  %s  %s  %s  %s  %s  %s  %s  %s",
			pad(name, nameW), pad(typ, typeW), pad(zone, zoneW), pad(capacity, capW), padLeft(price, priceW),
			pad(cpu, bar+3+cpuText), pad(memory, bar+3+memoryText), padLeft(pods, podsW), ready)
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	row("NODE", "TYPE", "ZONE", "CAPACITY", "$/HOUR", "CPU", "MEMORY", "PODS", "READY")
	for _, p := range m.NodePools {
		title := "no NodePool"
		if p.Name != "" {
			title = "NodePool " + p.Name
		}
		fmt.Fprintf(&b, "── %s: %s\n", title, summary(p.Totals))
		for _, n := range p.Nodes {
			r := n.Resources
			nodePrice := "-"
			if n.PriceKnown {
				nodePrice = fmt.Sprintf("%.4f", n.PricePerHour)
			}
			ready := "no"
			if n.Ready {
				ready = "yes"
			}
			row(truncate(n.Name, nameW), orDash(n.InstanceType), orDash(n.Zone), n.CapacityType, nodePrice,
				usage(r.CPURequested, r.CPUAllocatable, bar, cores(r.CPURequested)+"/"+cores(r.CPUAllocatable)),
				usage(r.MemoryRequested, r.MemoryAllocatable, bar, bytes(r.MemoryRequested)+"/"+bytes(r.MemoryAllocatable)),
				strconv.Itoa(r.Pods), ready)
		}
	}
	fmt.Fprintf(&b, "Cluster: %s\n", summary(m.Cluster))
	return b.String()
}

// summary is the one-line totals of nodes.
func summary(t Totals) string {
	r := t.Resources
	return fmt.Sprintf("%d node(s), %s, cpu %s %s/%s, memory %s %s/%s, %d pod(s)",
		t.Nodes, price(t.PricePerHour, t.UnpricedNodes, false),
		percent(r.CPURequested, r.CPUAllocatable), cores(r.CPURequested), cores(r.CPUAllocatable),
		percent(r.MemoryRequested, r.MemoryAllocatable), bytes(r.MemoryRequested), bytes(r.MemoryAllocatable), r.Pods)
}

func price(perHour float64, unpriced int, monthly bool) string {
	s := fmt.Sprintf("$%.4f/hour", perHour)
	if monthly {
		s += fmt.Sprintf(" ($%.2f/month)", perHour*hoursInMonth)
	}
	if unpriced > 0 {
		s += fmt.Sprintf(" + %d unpriced node(s)", unpriced)
	}
	return s
}

// usage is a bar, the percentage and the amounts.
func usage(used, allocatable int64, width int, amounts string) string {
	filled := 0
	if allocatable > 0 {
		filled = int(math.Round(float64(used) / float64(allocatable) * float64(width)))
	}
	filled = max(0, min(width, filled))
	return "[" + strings.Repeat("█", filled) + strings.Repeat("░", width-filled) + "] " + percent(used, allocatable) + " " + amounts
}

func percent(used, allocatable int64) string {
	if allocatable <= 0 {
		return "  -%"
	}
	return fmt.Sprintf("%3.0f%%", float64(used)*100/float64(allocatable))
}

// cores renders millicores as cores, as precise as they are (0.25, 2).
func cores(milli int64) string {
	return strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64)
}

// bytes renders memory in Gi with one decimal, or in Mi below 1Gi.
func bytes(b int64) string {
	const mi, gi = 1 << 20, 1 << 30
	if b < gi {
		return fmt.Sprintf("%dMi", b/mi)
	}
	return fmt.Sprintf("%.1fGi", float64(b)/gi)
}

func pad(s string, w int) string {
	if n := utf8.RuneCountInString(s); n < w {
		return s + strings.Repeat(" ", w-n)
	}
	return s
}

func padLeft(s string, w int) string {
	if n := utf8.RuneCountInString(s); n < w {
		return strings.Repeat(" ", w-n) + s
	}
	return s
}

func truncate(s string, w int) string {
	if utf8.RuneCountInString(s) <= w {
		return s
	}
	return string([]rune(s)[:w-1]) + "…"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
