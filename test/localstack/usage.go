package localstack

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Usage is what one process of the stack used since it started.
type Usage struct {
	// PeakRSSBytes is the peak resident set (VmHWM).
	PeakRSSBytes int64
	// CPUSeconds is the user and system CPU time.
	CPUSeconds float64
}

// clockTicks is the unit of /proc/<pid>/stat's CPU times (USER_HZ), 100 on every Linux ABI.
const clockTicks = 100

// Usage reads from /proc the peak memory and the CPU time of a running component.
func (s *Stack) Usage(name string) (Usage, error) {
	p, ok := s.procs[name]
	if !ok {
		return Usage{}, fmt.Errorf("%s is not running", name)
	}
	return ProcessUsage(p.cmd.Process.Pid)
}

// ProcessUsage reads from /proc the peak memory and the CPU time of the process pid.
func ProcessUsage(pid int) (Usage, error) {
	var u Usage
	status, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, fmt.Errorf("reading the usage of process %d: %w", pid, err)
	}
	defer status.Close()
	sc := bufio.NewScanner(status)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return u, fmt.Errorf("reading VmHWM of process %d: %w", pid, err)
			}
			u.PeakRSSBytes = kb * 1024
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, fmt.Errorf("reading the usage of process %d: %w", pid, err)
	}
	// The command name, in parentheses, may hold spaces: fields count from after it.
	_, rest, ok := strings.Cut(string(stat), ") ")
	fields := strings.Fields(rest)
	if !ok || len(fields) < 13 {
		return u, fmt.Errorf("reading /proc/%d/stat: too few fields", pid)
	}
	// utime and stime are the stat file's fields 14 and 15, the 12th and 13th after the name.
	for _, f := range fields[11:13] {
		ticks, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return u, fmt.Errorf("reading the CPU time of process %d: %w", pid, err)
		}
		u.CPUSeconds += float64(ticks) / clockTicks
	}
	return u, nil
}
