package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/allot/allot/agentd/internal/atomicfile"
	"github.com/allot/allot/masterd/api"
)

// The agent's checkpoints, in <work-dir>/meta:
//
//	agent.json                 the agent id of the last registration
//	tasks/<container_id>.json  one per task not yet settled: what it is,
//	                           its latest state, its unacknowledged updates
//	executors/<container_id>.json  one per task-group executor
//	launch/<container_id>.json     a task record as it was launched
//
// Each file is written atomically (atomicfile), so a crash leaves the old
// record or the new one. The launch copy is written once, when the task
// runs: when its task record is damaged, the copy still says whose task a
// live container is, so recovery never has to kill a running task it can
// no longer name.

// agentRecord is meta/agent.json.
type agentRecord struct {
	AgentID string `json:"agent_id"`
	Name    string `json:"name"`
}

// taskRecord is meta/tasks/<container_id>.json.
type taskRecord struct {
	ContainerID string        `json:"container_id"`
	Task        api.AgentTask `json:"task"` // Task.State is the latest state
	// Group is the container id of the task's executor ("" for a lone task).
	Group string `json:"group,omitempty"`
	// Killing is set once a kill was asked for: the task's end is
	// TASK_KILLED, whatever its exit status.
	Killing bool `json:"killing,omitempty"`
	// Ended is set once the container is gone; the record stays until its
	// last update is acknowledged.
	Ended bool `json:"ended,omitempty"`
	// Pending are the updates the master has not acknowledged, oldest first.
	Pending []api.TaskStatus `json:"pending,omitempty"`
	// Waiting is set while the task's launch waits for tasks evicted to
	// make room for it to be gone (it has no container yet); WaitingSince
	// orders such launches (admission.go).
	Waiting      bool      `json:"waiting,omitempty"`
	WaitingSince time.Time `json:"waiting_since,omitzero"`
	// Started is when the agent began to start the task: borrowers are
	// evicted youngest first.
	Started time.Time `json:"started,omitzero"`
	// Preempted, once the agent kills the task to make room (for a lender,
	// or by its QoS controller), says why: the end is then TASK_KILLED,
	// REASON_CONTAINER_PREEMPTED with this message.
	Preempted string `json:"preempted,omitempty"`
}

// executorRecord is meta/executors/<container_id>.json.
type executorRecord struct {
	ContainerID  string            `json:"container_id"`
	Executor     api.AgentExecutor `json:"executor"`
	ShareCgroups bool              `json:"share_cgroups"`
}

// checkpoints reads and writes the records of one work dir.
type checkpoints struct {
	dir string // <work-dir>/meta
}

func newCheckpoints(workDir string) (*checkpoints, error) {
	c := &checkpoints{dir: filepath.Join(workDir, "meta")}
	for _, d := range []string{c.dir, c.tasksDir(), c.executorsDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create checkpoint dir %s: %w", d, err)
		}
	}
	return c, nil
}

func (c *checkpoints) tasksDir() string     { return filepath.Join(c.dir, "tasks") }
func (c *checkpoints) executorsDir() string { return filepath.Join(c.dir, "executors") }

func (c *checkpoints) saveAgent(r agentRecord) error {
	return atomicfile.WriteJSON(filepath.Join(c.dir, "agent.json"), r)
}

// loadAgent returns the saved agent record; a missing one is a new agent.
func (c *checkpoints) loadAgent() (agentRecord, error) {
	var r agentRecord
	err := atomicfile.ReadJSON(filepath.Join(c.dir, "agent.json"), &r)
	if errors.Is(err, fs.ErrNotExist) {
		return agentRecord{}, nil
	}
	return r, err
}

func (c *checkpoints) saveTask(r *taskRecord) error {
	return atomicfile.WriteJSON(filepath.Join(c.tasksDir(), r.ContainerID+".json"), r)
}

func (c *checkpoints) removeTask(containerID string) error {
	return removeRecord(filepath.Join(c.tasksDir(), containerID+".json"))
}

func (c *checkpoints) saveExecutor(r *executorRecord) error {
	return atomicfile.WriteJSON(filepath.Join(c.executorsDir(), r.ContainerID+".json"), r)
}

func (c *checkpoints) removeExecutor(containerID string) error {
	return removeRecord(filepath.Join(c.executorsDir(), containerID+".json"))
}

func removeRecord(path string) error {
	switch err := os.Remove(path); {
	case errors.Is(err, fs.ErrNotExist):
		// Nothing removed, nothing to sync; its directory may not even
		// exist (meta/launch before the first task ran).
		return nil
	case err != nil:
		return fmt.Errorf("remove checkpoint %s: %w", path, err)
	}
	return atomicfile.SyncDir(filepath.Dir(path))
}

// damaged is a record that could not be read: its container id (the file
// name) and why.
type damaged struct {
	containerID string
	err         error
}

func (r *taskRecord) containerID() string     { return r.ContainerID }
func (r *executorRecord) containerID() string { return r.ContainerID }

// loadTasks reads every task record; damaged ones are returned apart so
// the caller can rebuild them.
func (c *checkpoints) loadTasks() ([]*taskRecord, []damaged, error) {
	return loadRecords[taskRecord](c.tasksDir())
}

func (c *checkpoints) loadExecutors() ([]*executorRecord, []damaged, error) {
	return loadRecords[executorRecord](c.executorsDir())
}

// loadRecords reads the records of one directory, each named for its
// container id.
func loadRecords[R any, P interface {
	*R
	containerID() string
}](dir string) ([]*R, []damaged, error) {
	var out []*R
	var bad []damaged
	err := readRecords(dir, func(id, path string) {
		r := P(new(R))
		switch err := atomicfile.ReadJSON(path, r); {
		case err != nil:
			bad = append(bad, damaged{id, err})
		case r.containerID() != id:
			bad = append(bad, damaged{id, fmt.Errorf("%s names container %q", path, r.containerID())})
		default:
			out = append(out, (*R)(r))
		}
	})
	return out, bad, err
}

// readRecords calls fn for every <id>.json in dir, in name order; the
// temporary files of an interrupted write are removed.
func readRecords(dir string, fn func(id, path string)) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read checkpoints %s: %w", dir, err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(dir, name)
		switch {
		case strings.HasPrefix(name, "."):
			_ = os.Remove(path) // an interrupted atomic write
		case strings.HasSuffix(name, ".json") && validContainerID(strings.TrimSuffix(name, ".json")):
			fn(strings.TrimSuffix(name, ".json"), path)
		}
	}
	return nil
}

// quarantine moves a damaged record aside (kept for a person to look at)
// so that it is not read again.
func quarantine(path string) error {
	return os.Rename(path, path+".damaged")
}

// saveLaunchCopy keeps a copy of a task's record as it was launched (see
// checkpoint.go).
func (c *checkpoints) saveLaunchCopy(r *taskRecord) error {
	copyRec := *r
	copyRec.Pending = nil
	if err := os.MkdirAll(filepath.Join(c.dir, "launch"), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteJSON(filepath.Join(c.dir, "launch", r.ContainerID+".json"), &copyRec)
}

func (c *checkpoints) removeLaunchCopy(containerID string) error {
	return removeRecord(filepath.Join(c.dir, "launch", containerID+".json"))
}
