package containerizer

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/allot/allot/agentd/internal/atomicfile"
	"github.com/allot/allot/agentd/internal/cgroups"
)

// The monitor's report to agentd on fd 3, one line: "started <pid>" once
// the task runs in its cgroup, or "error <why>" when it could not start.
const (
	reportStarted = "started"
	reportError   = "error"
	reportFD      = 3
)

// reapWait bounds how long a monitor collects the exit statuses of
// processes it adopted (as a subreaper) after its task's end.
const reapWait = 2 * time.Second

// RunMonitor is the monitor process's main: agentd re-executed with
// MonitorCommand. It never returns.
//
// Started as a spare (no args), the monitor prepares what it can and waits
// for its container's records directory on stdin; EOF there means agentd
// went away before needing it, and it exits. With the records directory as
// its one argument it runs that container at once (for a person debugging
// a container by hand).
//
// The monitor reads container.json there, starts the task in its cgroup,
// records itself in monitor.json, tells agentd on fd 3, waits for the
// task, kills whatever is left of it, and records how it ended in
// exit.json. It needs nothing from agentd after the start: agentd may die
// and come back at any time.
func RunMonitor(args []string) {
	log := hclog.New(&hclog.LoggerOptions{Name: "monitor", Output: os.Stderr, TimeFormat: time.RFC3339Nano})
	// The cgroup manager is opened while the spare waits, off the launch
	// path; an error is reported once there is a container to report it to.
	mgr, mgrErr := newManager()
	var dir string
	switch len(args) {
	case 0:
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err != nil {
			os.Exit(0) // agentd is gone or closed; no container for us
		}
		dir = strings.TrimSuffix(line, "\n")
		if err := redirectOutput(filepath.Join(dir, monitorLog)); err != nil {
			mgrErr = errors.Join(mgrErr, err)
		}
	case 1:
		dir = args[0]
	default:
		log.Error("usage: monitor [records dir]", "args", args)
		os.Exit(2)
	}
	m := &monitor{dir: dir, log: log.With("records", dir), report: os.NewFile(reportFD, "report"), mgr: mgr}
	if err := m.run(mgrErr); err != nil {
		m.log.Error("monitor failed", "error", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// redirectOutput points the monitor's stdout and stderr at its log file.
func redirectOutput(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("monitor log: %w", err)
	}
	defer f.Close()
	for _, fd := range []int{1, 2} {
		if err := unix.Dup3(int(f.Fd()), fd, 0); err != nil {
			return fmt.Errorf("monitor log: %w", err)
		}
	}
	return nil
}

type monitor struct {
	dir    string
	log    hclog.Logger
	report *os.File // nil once closed
	mgr    cgroups.Manager

	rec    launchRecord
	cg     cgroups.Cgroup   // where the task runs
	limits []cgroups.Cgroup // whose own OOMs are the task's limit OOMs
	// baseOOMKills is the OOM kill count of a shared cgroup before the
	// task started; kills before it are not the task's.
	baseOOMKills uint64
}

func (m *monitor) run(setupErr error) error {
	// As a subreaper the monitor adopts what the task's processes leave
	// behind (a daemonizing child), as containerd's shim does, and reaps
	// it, instead of leaving zombies to an init that may not reap them.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		m.log.Warn("cannot become a subreaper", "error", err)
	}
	// The records directory is the monitor's cwd: a restarted agentd
	// that cannot read monitor.json finds the monitor by it
	// (/proc/<pid>/cwd).
	err := setupErr
	if err == nil && (!filepath.IsAbs(m.dir) || filepath.Clean(m.dir) != m.dir) {
		err = fmt.Errorf("records directory %q: want a clean absolute path", m.dir)
	}
	if err == nil {
		err = os.Chdir(m.dir)
	}
	var cmd *exec.Cmd
	if err == nil {
		cmd, err = m.prepare()
	}
	if err == nil {
		err = m.start(cmd)
	}
	if err != nil {
		// Nothing ran. The record serves a restarted agentd, if the one
		// that launched the task is gone.
		m.writeExit(exitRecordData{StartError: err.Error(), EndedAt: time.Now()})
		m.sendReport(reportError + " " + oneLine(err.Error()))
		return err
	}
	pid := cmd.Process.Pid
	if err := m.recordSelf(pid); err != nil {
		// Unrecorded, the task could not be found again after an agentd
		// restart: it does not run at all.
		m.killTask(pid)
		m.reapAll(pid)
		m.writeExit(exitRecordData{StartError: err.Error(), EndedAt: time.Now()})
		m.sendReport(reportError + " " + oneLine(err.Error()))
		return err
	}
	m.sendReport(reportStarted + " " + strconv.Itoa(pid))
	if m.report != nil {
		m.report.Close()
		m.report = nil
	}
	_ = cmd.Process.Release() // the monitor reaps with wait4 (see reapAll)

	ws := m.reapAll(pid)
	m.writeExit(m.exitRecord(ws))
	return nil
}

// prepare reads the launch record, opens the cgroups and the task's output
// files and builds the task's command.
func (m *monitor) prepare() (*exec.Cmd, error) {
	if err := readRecord(filepath.Join(m.dir, containerRecord), &m.rec); err != nil {
		return nil, fmt.Errorf("read launch record: %w", err)
	}
	mgr := m.mgr
	var err error
	// The cgroups are opened before the task starts: their OOM counts
	// (LimitOOMs) run from the moment the handle is opened.
	if m.cg, err = mgr.Load(m.rec.Cgroup); err != nil {
		return nil, err
	}
	for _, p := range m.rec.LimitCgroups {
		if p == m.rec.Cgroup {
			m.limits = append(m.limits, m.cg)
			continue
		}
		cg, err := mgr.Load(p)
		if err != nil {
			return nil, err
		}
		m.limits = append(m.limits, cg)
	}
	if !m.rec.OwnCgroup {
		st, err := m.cg.Stats()
		if err != nil {
			return nil, err
		}
		m.baseOOMKills = st.OOMKills
	}
	stdout, err := os.OpenFile(filepath.Join(m.rec.Sandbox, stdoutFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	stderr, err := os.OpenFile(filepath.Join(m.rec.Sandbox, stderrFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		stdout.Close()
		return nil, err
	}
	return &exec.Cmd{
		Path:   m.rec.Program,
		Args:   m.rec.Argv,
		Env:    m.rec.Env,
		Dir:    m.rec.Sandbox,
		Stdout: stdout, // *os.File: passed as is, no copying goroutine
		Stderr: stderr,
		// Its own process group: a task sharing its group's cgroup is
		// signalled through it.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}, nil
}

// start starts the task in its cgroup with its oom_score_adj.
//
// The task must have its oom_score_adj before it runs any code, and Go
// cannot run code in the child between fork and exec. A child inherits
// oom_score_adj at fork, so the monitor takes the task's value itself for
// the moment of the fork, then goes back to its own: the monitor is small
// and must outlive its task to record its end, so it should not be the OOM
// killer's choice whenever the task is. (The monitor is in agentd's
// cgroup, not the task's, so an OOM of the task's cgroups never picks it.)
func (m *monitor) start(cmd *exec.Cmd) error {
	defer closeFiles(cmd.Stdout, cmd.Stderr)
	own, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return err
	}
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(m.rec.OOMScoreAdj)), 0); err != nil {
		return fmt.Errorf("set oom_score_adj %d: %w", m.rec.OOMScoreAdj, err)
	}
	startErr := m.cg.Start(cmd)
	if err := os.WriteFile("/proc/self/oom_score_adj", own, 0); err != nil {
		m.log.Warn("restore the monitor's own oom_score_adj", "value", strings.TrimSpace(string(own)), "error", err)
	}
	return startErr
}

func closeFiles(ws ...io.Writer) {
	for _, w := range ws {
		if f, ok := w.(*os.File); ok {
			f.Close()
		}
	}
}

// recordSelf writes monitor.json, which lets a restarted agentd find this
// monitor again and tell it from a process that reused its pid.
func (m *monitor) recordSelf(pid int) error {
	self, err := readProcStat(os.Getpid())
	if err != nil {
		return fmt.Errorf("record the monitor: %w", err)
	}
	return writeRecord(filepath.Join(m.dir, monitorRecord), monitorRecordData{
		MonitorPid: os.Getpid(), MonitorStartTime: self.StartTime, Pid: pid, StartedAt: time.Now(),
	})
}

// reapAll waits for the task, pid, then kills whatever is left of it and
// collects every child the monitor has, adopted ones included. It returns
// the task's wait status.
func (m *monitor) reapAll(pid int) unix.WaitStatus {
	var task unix.WaitStatus
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			m.log.Error("wait for the task", "pid", pid, "error", err)
			break // ECHILD: nothing to wait for any more
		}
		if got == pid {
			task = ws
			break
		}
	}
	m.killTask(pid)
	deadline := time.Now().Add(reapWait)
	for time.Now().Before(deadline) {
		got, err := unix.Wait4(-1, nil, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil { // ECHILD: all collected
			break
		}
		if got == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	return task
}

// killTask kills what is left of the task: its whole cgroup when it has
// one of its own, else its process group.
func (m *monitor) killTask(pid int) {
	if m.rec.OwnCgroup {
		if err := m.cg.KillAll(); err != nil {
			m.log.Error("kill what is left of the task", "error", err)
		}
		return
	}
	if err := signalGroup(pid, syscall.SIGKILL); err != nil {
		m.log.Error("kill what is left of the task", "error", err)
	}
}

// exitRecord is how the task ended, from its wait status and the cgroups'
// own OOM accounting, read before anything deletes them.
func (m *monitor) exitRecord(ws unix.WaitStatus) exitRecordData {
	rec := exitRecordData{EndedAt: time.Now()}
	switch {
	case ws.Exited():
		rec.ExitCode = ws.ExitStatus()
	case ws.Signaled():
		rec.Signal = int(ws.Signal())
	}
	st, err := m.cg.Stats()
	if err != nil {
		m.log.Error("read the task's cgroup statistics", "error", err)
		return rec
	}
	rec.MemoryPeakBytes = st.MemoryMaxBytes
	if m.rec.OwnCgroup {
		rec.OOMKilled = st.OOMKills > 0
	} else {
		// The count is the whole group's: a kill in it is the task's
		// only if the task itself died of SIGKILL.
		rec.OOMKilled = st.OOMKills > m.baseOOMKills && ws.Signaled() && ws.Signal() == unix.SIGKILL
	}
	for _, cg := range m.limits {
		s := st
		if cg != m.cg {
			if s, err = cg.Stats(); err != nil {
				m.log.Error("read the group's cgroup statistics", "error", err)
				continue
			}
		}
		if s.LimitOOMs > 0 {
			rec.LimitOOM = true
		}
	}
	return rec
}

// writeExit writes exit.json, fsynced: it is the only place the task's end
// is known until agentd has read it.
func (m *monitor) writeExit(rec exitRecordData) {
	if err := atomicfile.WriteJSON(filepath.Join(m.dir, exitRecord), rec); err != nil {
		m.log.Error("write exit record", "error", err)
	}
}

// sendReport tells agentd; an agentd that is gone (EPIPE) is no error: the
// records tell a restarted one.
func (m *monitor) sendReport(line string) {
	if m.report == nil {
		return
	}
	if _, err := io.WriteString(m.report, line+"\n"); err != nil && !errors.Is(err, syscall.EPIPE) {
		m.log.Warn("report to agentd", "error", err)
	}
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// newManager opens this host's cgroups in the monitor process: the same
// mode agentd detected, from the same mountinfo.
func newManager() (cgroups.Manager, error) { return cgroups.NewManager(nil) }
