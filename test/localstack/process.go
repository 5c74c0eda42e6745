package localstack

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one program of the stack, logging to dir/logs/<name>.log.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// startProcess runs a binary in its own process group, so a terminal's Ctrl-C reaches only
// the stack's controller, which then stops every process in order. Unless detached, the
// process is killed if the starting process dies.
func startProcess(dir, name, binary string, args, env []string, detach bool) (*process, error) {
	logPath := filepath.Join(dir, "logs", name+".log")
	for _, d := range []string{filepath.Dir(logPath), filepath.Dir(pidPath(dir, name))} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if !detach {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, binary, err)
	}
	logFile.Close()
	if err := os.WriteFile(pidPath(dir, name), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return nil, err
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func pidPath(dir, name string) string { return filepath.Join(dir, "pids", name) }

// exited reports whether the process ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop terminates the process group gracefully, then forcibly after the grace period.
// A grace of zero sends SIGKILL alone, as a crash would: the process gets no signal it could
// act on.
func (p *process) stop(dir string, grace time.Duration) {
	if grace == 0 {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		_ = os.Remove(pidPath(dir, p.name))
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	_ = os.Remove(pidPath(dir, p.name))
}

// stopRecorded stops processes of a detached stack from their pid files, newest first.
func stopRecorded(dir string, order []string, grace time.Duration) error {
	var errs []error
	for i := len(order) - 1; i >= 0; i-- {
		raw, err := os.ReadFile(pidPath(dir, order[i]))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil {
			errs = append(errs, fmt.Errorf("reading pid of %s: %w", order[i], err))
			continue
		}
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		deadline := time.Now().Add(grace)
		for time.Now().Before(deadline) && syscall.Kill(pid, 0) == nil {
			time.Sleep(50 * time.Millisecond)
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = os.Remove(pidPath(dir, order[i]))
	}
	return errors.Join(errs...)
}

// tail returns the last lines of a component's log, for error messages.
func tail(dir, name string, lines int) string {
	raw, err := os.ReadFile(filepath.Join(dir, "logs", name+".log"))
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
