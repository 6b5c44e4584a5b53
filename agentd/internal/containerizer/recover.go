package containerizer

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/allot/allot/agentd/internal/cgroups"
)

// strayMonitorWait bounds how long Recover waits for the monitor of a
// container it killed to record the end and exit.
const strayMonitorWait = 10 * time.Second

// Recover re-attaches, after an agentd restart, to the containers with these
// ids (from the agent's checkpoint): a live monitor is watched again, a
// container that ended while agentd was down gets OnExit with its real exit
// status. Groups lists the executor containers to keep. Every other cgroup
// under the root, and every process in it, is killed and removed.
//
// Damaged records never lose a running task:
//   - container.json damaged: the cgroup is looked up by the container's id
//     (/<root>/<id>, or /<root>/<group>/<id> in any group);
//   - monitor.json damaged or missing: the monitor is found by its command
//     line, which names the container's records directory;
//   - exit.json damaged: the end is reported as Lost, after killing
//     whatever is left.
//
// A container in ids of which nothing is found (no monitor, no exit
// record) is reported Lost; whatever is left of it is killed first.
func (c *Containerizer) Recover(ids []string, groups []string) error {
	r := &recovery{c: c, keep: map[string]bool{}, keepGroups: map[string]bool{}}
	for _, g := range groups {
		if err := checkID("group", g); err != nil {
			c.log.Error("recover: ignoring a group with a bad id", "error", err)
			continue
		}
		r.keepGroups[g] = true
		cg, err := c.cfg.Cgroups.Load(c.cgroupPath(g))
		if err != nil {
			// Its tasks cannot have survived either (a host reboot
			// removes every cgroup): they are found ended below.
			c.log.Warn("recover: the cgroup of a task group is gone", "group", g, "error", err)
			continue
		}
		c.mu.Lock()
		c.groups[g] = cg
		c.mu.Unlock()
	}
	for _, id := range ids {
		if err := checkID("container", id); err != nil {
			c.log.Error("recover: a container with a bad id is reported lost", "error", err)
			r.ended = append(r.ended, endedContainer{id, ExitStatus{Lost: true}})
			continue
		}
		r.keep[id] = true
		r.recoverContainer(id)
	}
	if err := r.removeStrays(); err != nil {
		return err
	}
	if len(r.ended) > 0 {
		go func() {
			for _, e := range r.ended {
				c.mu.Lock()
				closed := c.closed
				c.mu.Unlock()
				if closed {
					return
				}
				c.cfg.OnExit(e.id, e.status)
			}
		}()
	}
	return nil
}

type endedContainer struct {
	id     string
	status ExitStatus
}

type recovery struct {
	c                *Containerizer
	keep, keepGroups map[string]bool
	ended            []endedContainer
	// monitors found by their command line, scanned once when needed.
	monitors map[string]monitorProc
	scanned  bool
}

// found is what recovery knows of one container from its records, its
// cgroup and its monitor.
type found struct {
	rec     launchRecord
	recErr  error
	mon     monitorRecordData
	monErr  error
	exit    exitRecordData
	exitErr error
	own     bool
	cg      cgroups.Cgroup // nil when there is none
	cgPath  string
	monitor *os.File // pidfd of the live monitor, or nil
}

func (r *recovery) inspect(id string) *found {
	c := r.c
	log := c.log.With("container_id", id)
	dir := c.recordsDir(id)
	f := &found{}
	f.recErr = readRecord(filepath.Join(dir, containerRecord), &f.rec)
	f.monErr = readRecord(filepath.Join(dir, monitorRecord), &f.mon)
	f.exitErr = readRecord(filepath.Join(dir, exitRecord), &f.exit)
	for _, err := range []error{f.recErr, f.monErr, f.exitErr} {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Error("recover: damaged container record", "error", err)
		}
	}

	// The cgroup: from the record when it is sound and names a cgroup
	// under our root, else by the container's id.
	if f.recErr == nil && c.underRoot(f.rec.Cgroup) {
		f.own, f.cgPath = f.rec.OwnCgroup, f.rec.Cgroup
		if f.own {
			f.cg = r.load(f.cgPath)
		} else {
			c.mu.Lock()
			f.cg = c.groups[f.rec.Group]
			c.mu.Unlock()
		}
	} else {
		if f.recErr == nil {
			log.Error("recover: the record names a cgroup outside the agent's root; ignoring it", "cgroup", f.rec.Cgroup)
		}
		f.own = true
		for _, p := range r.cgroupCandidates(id) {
			if f.cg = r.load(p); f.cg != nil {
				f.cgPath = p
				break
			}
		}
		if f.cg == nil {
			f.own = false // shared, or never created: only the process group is known
		}
	}

	// The monitor: from its record, checked against pid reuse, else by its
	// command line.
	if f.monErr == nil {
		f.monitor = openIfSame(f.mon.MonitorPid, f.mon.MonitorStartTime)
	} else if m, ok := r.findMonitor(dir); ok {
		f.monitor = openIfSame(m.Pid, m.StartTime)
		if f.monitor != nil {
			f.mon.MonitorPid = m.Pid
			if children := childrenOf(m.Pid); len(children) > 0 {
				f.mon.Pid = children[0]
			}
			log.Warn("recover: found the monitor by its command line", "monitor_pid", m.Pid, "pid", f.mon.Pid)
		}
	}
	return f
}

// recoverContainer takes over one container the agent still knows.
func (r *recovery) recoverContainer(id string) {
	c := r.c
	log := c.log.With("container_id", id)
	c.mu.Lock()
	_, live := c.containers[id]
	c.mu.Unlock()
	if live {
		return
	}
	f := r.inspect(id)
	if f.monitor == nil && f.exitErr != nil && r.assigned(id) {
		f = r.awaitMonitor(id)
	}
	ct := &container{own: f.own, cg: f.cg, ended: make(chan struct{})}
	ct.info = Container{
		ID: id, Group: f.rec.Group, Cgroup: f.cgPath, Sandbox: c.sandboxDir(id),
		Pid: f.mon.Pid, MonitorPid: f.mon.MonitorPid, OOMScoreAdj: f.rec.OOMScoreAdj, StartedAt: f.mon.StartedAt,
	}
	if f.monitor != nil {
		c.mu.Lock()
		c.containers[id] = ct
		c.mu.Unlock()
		if f.recErr == nil {
			c.watchTaskMemory(ct, f.rec.MemoryRequestBytes, f.rec.MemoryLimitBytes, f.rec.OOMScoreAdj, false)
		}
		if err := c.watchPidfd(ct, id, f.monitor, nil); err != nil {
			c.stopTaskMemory(ct)
			log.Error("recover: cannot watch the monitor", "error", err)
			c.mu.Lock()
			delete(c.containers, id)
			c.mu.Unlock()
			return
		}
		log.Info("recover: re-attached", "monitor_pid", f.mon.MonitorPid, "pid", f.mon.Pid, "cgroup", f.cgPath)
		return
	}

	var status ExitStatus
	if f.exitErr == nil {
		status = f.exit.status()
		log.Info("recover: the container ended while agentd was down", "exit_code", status.ExitCode, "signal", status.Signal)
	} else {
		status = ExitStatus{Lost: true}
		log.Error("recover: no monitor and no exit record; killing what is left and reporting the container lost", "error", f.exitErr)
		c.killOrphaned(ct, f.mon.Pid)
	}
	if f.own && f.cg != nil {
		if err := errors.Join(f.cg.KillAll(), f.cg.Delete()); err != nil {
			log.Error("recover: remove the container's cgroup", "error", err)
		}
	}
	r.ended = append(r.ended, endedContainer{id, status})
}

// assignedMonitorWait bounds how long Recover waits for a monitor that
// took its container's assignment to record itself or the task's end.
const assignedMonitorWait = 5 * time.Second

// assigned reports whether a monitor may have taken the container's
// assignment: agentd creates monitor.log before it hands a monitor the
// records directory (assignMonitor), and the monitor writes its log there
// before it records itself.
func (r *recovery) assigned(id string) bool {
	_, err := os.Stat(filepath.Join(r.c.recordsDir(id), monitorLog))
	return err == nil
}

// awaitMonitor waits for a monitor that took its assignment while the
// previous agentd died to write monitor.json or exit.json, then inspects
// the container again, scanning the processes afresh.
//
// Why: such a monitor starts the task moments later. Found neither by its
// record nor by the one scan of monitors (made before it entered the
// records directory), it was taken for gone: the task was killed and
// reported lost with its monitor alive (TestAgentdKilledMidLaunch).
func (r *recovery) awaitMonitor(id string) *found {
	dir := r.c.recordsDir(id)
	for deadline := time.Now().Add(assignedMonitorWait); time.Now().Before(deadline); {
		if fileExists(filepath.Join(dir, monitorRecord)) || fileExists(filepath.Join(dir, exitRecord)) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.scanned = false
	return r.inspect(id)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// removeStrays kills and removes every container and group with records
// that the agent did not ask to keep: containers first, so that their
// monitors record their end, then the groups they were in.
func (r *recovery) removeStrays() error {
	c := r.c
	entries, err := os.ReadDir(filepath.Join(c.cfg.WorkDir, recordsDir))
	if err != nil {
		return err
	}
	var strayGroups []string
	for _, e := range entries {
		id := e.Name()
		if !e.IsDir() || r.keep[id] || r.keepGroups[id] {
			continue
		}
		if err := checkID("container", id); err != nil {
			c.log.Warn("recover: ignoring a records directory with a bad name", "error", err)
			continue
		}
		if _, err := os.Stat(filepath.Join(c.recordsDir(id), groupRecord)); err == nil {
			strayGroups = append(strayGroups, id)
			continue
		}
		r.stopStray(id)
	}
	for _, g := range strayGroups {
		c.log.Info("recover: removing a task group the agent no longer has", "group", g)
		if err := c.DestroyGroup(g); err != nil {
			c.log.Error("recover: remove a task group", "group", g, "error", err)
		}
	}
	return nil
}

// stopStray kills a container the agent no longer knows, waits for its
// monitor to record the end, and removes its cgroup. Its records and
// sandbox stay for GCSandboxes.
func (r *recovery) stopStray(id string) {
	c := r.c
	log := c.log.With("container_id", id)
	f := r.inspect(id)
	ct := &container{own: f.own, cg: f.cg, info: Container{ID: id}}
	if f.monitor == nil && f.cg == nil {
		return // ended before, and cleaned up
	}
	switch {
	case f.monitor != nil:
		log.Info("recover: killing a container the agent no longer has", "monitor_pid", f.mon.MonitorPid)
		ct.info.Pid = f.mon.Pid
		c.killNow(ct)
	case f.exitErr != nil:
		log.Info("recover: killing what is left of a container the agent no longer has")
		c.killOrphaned(ct, f.mon.Pid)
	}
	if f.monitor != nil {
		fds := []unix.PollFd{{Fd: int32(f.monitor.Fd()), Events: unix.POLLIN}}
		for deadline := time.Now().Add(strayMonitorWait); time.Now().Before(deadline); {
			n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds())+1)
			if n > 0 || (err != nil && !errors.Is(err, unix.EINTR)) {
				break
			}
		}
		reapIfChild(f.monitor)
		f.monitor.Close()
	}
	if f.own && f.cg != nil {
		if err := errors.Join(f.cg.KillAll(), f.cg.Delete()); err != nil {
			log.Error("recover: remove the cgroup of a container the agent no longer has", "error", err)
		}
	}
}

// cgroupCandidates are where a container's own cgroup can be when its
// record does not say: directly under the root, or nested in any group
// known from the agent or from records.
func (r *recovery) cgroupCandidates(id string) []string {
	c := r.c
	out := []string{c.cgroupPath(id)}
	groups := map[string]bool{}
	for g := range r.keepGroups {
		groups[g] = true
	}
	entries, _ := os.ReadDir(filepath.Join(c.cfg.WorkDir, recordsDir))
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(c.recordsDir(e.Name()), groupRecord)); err == nil {
			groups[e.Name()] = true
		}
	}
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		out = append(out, c.cgroupPath(g, id))
	}
	return out
}

func (r *recovery) load(path string) cgroups.Cgroup {
	cg, err := r.c.cfg.Cgroups.Load(path)
	if err != nil {
		if !errors.Is(err, cgroups.ErrNotExist) {
			r.c.log.Error("recover: load cgroup", "cgroup", path, "error", err)
		}
		return nil
	}
	return cg
}

func (r *recovery) findMonitor(dir string) (monitorProc, bool) {
	if !r.scanned {
		r.scanned = true
		var err error
		if r.monitors, err = findMonitors(r.c.cfg.MonitorCommand); err != nil {
			r.c.log.Error("recover: scan for monitors", "error", err)
		}
	}
	m, ok := r.monitors[dir]
	return m, ok
}

// underRoot reports whether a cgroup path from a record is below the
// agent's root: a record must never make recovery touch another cgroup.
func (c *Containerizer) underRoot(p string) bool {
	root := c.cgroupPath()
	return p != root && strings.HasPrefix(p, root+"/") && filepath.Clean(p) == p
}

// openIfSame opens a pidfd for pid if it is still the process that started
// at startTime, else returns nil. The start time is checked after the
// pidfd is open, so the pidfd cannot name a process that took the pid
// afterwards.
func openIfSame(pid int, startTime uint64) *os.File {
	if pid <= 0 {
		return nil
	}
	f, err := openPidfd(pid)
	if err != nil {
		return nil
	}
	st, err := readProcStat(pid)
	if err != nil || st.StartTime != startTime {
		f.Close()
		return nil
	}
	return f
}
