package containerizer

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// spareMonitors is how many monitors wait, started ahead, for the next
// launches.
//
// Why: measured on this project's 2-core test machine, a launch took
// ≈9 ms, of which ≈4 ms were the monitor's exec and Go runtime and package
// initialization before its main ran. A monitor started before it is
// needed takes that off the launch path: Launch hands it the container's
// records directory on its stdin and starts the next spare in the
// background. Two spares keep a burst of launches from catching up with
// the refill. A spare costs one idle process (≈1.3 MiB PSS); one whose
// agentd goes away reads EOF on its stdin and exits.
const spareMonitors = 2

// monitorProcess is a started monitor: assign is the write end of its
// stdin, on which it gets its records directory; report is the read end of
// its fd 3, on which it answers.
type monitorProcess struct {
	cmd    *exec.Cmd
	assign *os.File
	report *os.File
}

// startMonitorProcess starts a monitor that waits for its assignment.
func (c *Containerizer) startMonitorProcess() (*monitorProcess, error) {
	assignR, assignW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start monitor: %w", err)
	}
	reportR, reportW, err := os.Pipe()
	if err != nil {
		assignR.Close()
		assignW.Close()
		return nil, fmt.Errorf("start monitor: %w", err)
	}
	defer assignR.Close() // the monitor has its own copies
	defer reportW.Close()
	cmd := exec.Command(c.cfg.MonitorCommand[0], c.cfg.MonitorCommand[1:]...)
	cmd.Stdin = assignR
	// Until it knows its container, the monitor's output goes nowhere;
	// then to monitor.log in the records directory. Never to a pipe to
	// agentd: a monitor writing to a pipe whose reader (agentd) died
	// would die of SIGPIPE with its task unrecorded.
	cmd.Stdout, cmd.Stderr = nil, nil
	cmd.ExtraFiles = []*os.File{reportW} // fd 3
	cmd.Env = monitorEnv()
	// A session of its own: agentd's end (kill -9, its terminal or its
	// process group going away) never reaches the monitor.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		assignW.Close()
		reportR.Close()
		return nil, fmt.Errorf("start monitor: %w", err)
	}
	return &monitorProcess{cmd: cmd, assign: assignW, report: reportR}, nil
}

// discard ends a monitor that has no container (yet): EOF on its stdin
// makes it exit.
func (m *monitorProcess) discard() {
	m.assign.Close()
	m.report.Close()
	_ = m.cmd.Wait()
}

// assignMonitor gives the container whose records are in dir a monitor: a
// spare when one is there, else a new one.
//
// monitor.log is created before the assignment is written: a spare reads
// its stdin only when it next runs, so an agentd killed just after writing
// left a monitor about to start the task with nothing on disk yet, and the
// next agentd's recovery took the container for gone (reported lost while
// its task then ran: TestAgentdKilledMidLaunch). With the file there,
// recovery waits for the monitor to record itself (see recovery.assigned).
func (c *Containerizer) assignMonitor(dir string) (*monitorProcess, error) {
	if err := createEmpty(filepath.Join(dir, monitorLog)); err != nil {
		return nil, fmt.Errorf("assign a monitor: %w", err)
	}
	c.mu.Lock()
	var m *monitorProcess
	if n := len(c.spares); n > 0 {
		m, c.spares = c.spares[n-1], c.spares[:n-1]
	}
	c.mu.Unlock()
	c.startRefill()
	for attempt := 0; ; attempt++ {
		if m == nil {
			var err error
			if m, err = c.startMonitorProcess(); err != nil {
				return nil, err
			}
		}
		_, err := io.WriteString(m.assign, dir+"\n")
		m.assign.Close()
		if err == nil {
			return m, nil
		}
		// A spare that died while waiting (EPIPE): a new one, once.
		m.report.Close()
		_ = m.cmd.Wait()
		m = nil
		if attempt > 0 {
			return nil, fmt.Errorf("assign a monitor: %w", err)
		}
	}
}

// createEmpty creates path if it does not exist, leaving it as it is if it
// does.
func createEmpty(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

// startRefill starts spares in the background, unless closed.
func (c *Containerizer) startRefill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.refills.Add(1)
	go func() {
		defer c.refills.Done()
		c.refillSpares()
	}()
}

// refillSpares starts spares until spareMonitors wait.
func (c *Containerizer) refillSpares() {
	for {
		c.mu.Lock()
		if c.closed || len(c.spares)+c.sparesStarting >= spareMonitors {
			c.mu.Unlock()
			return
		}
		c.sparesStarting++
		c.mu.Unlock()
		m, err := c.startMonitorProcess()
		c.mu.Lock()
		c.sparesStarting--
		if err != nil {
			c.mu.Unlock()
			c.log.Warn("start a spare monitor", "error", err)
			return
		}
		if c.closed {
			c.mu.Unlock()
			m.discard()
			return
		}
		c.spares = append(c.spares, m)
		c.mu.Unlock()
	}
}

// discardSpares ends the spare monitors (Close).
func (c *Containerizer) discardSpares() error {
	c.mu.Lock()
	spares := c.spares
	c.spares = nil
	c.mu.Unlock()
	var errs []error
	for _, m := range spares {
		m.discard()
		if code := m.cmd.ProcessState.ExitCode(); code != 0 {
			errs = append(errs, fmt.Errorf("spare monitor %d exited with %d", m.cmd.Process.Pid, code))
		}
	}
	return errors.Join(errs...)
}
