package containerizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/allot/allot/agentd/internal/atomicfile"
)

// On-disk layout under the work dir:
//
//	sandboxes/<id>/            the task's cwd: stdout, stderr, whatever it writes
//	containers/<id>/           the containerizer's records of one container
//	    container.json         what to run and where (agentd, before the cgroup exists)
//	    monitor.json           who runs it (the monitor, once the task runs)
//	    exit.json              how it ended (the monitor, once it ended)
//	    monitor.log            the monitor's own stdout and stderr
//	containers/<group>/group.json   an executor cgroup of a task group
//
// The records are kept out of the sandbox, as Mesos keeps its meta
// directory apart from sandboxes: a task owns its cwd and may write or
// delete anything in it (a file named exit.json, rm -rf .), and nothing it
// does there may change what agentd believes about it.
//
// Every record has one writer, and a records directory exists before the
// cgroup it describes, so that recovery finds every cgroup allot created
// from the records alone.
const (
	sandboxesDir    = "sandboxes"
	recordsDir      = "containers"
	containerRecord = "container.json"
	monitorRecord   = "monitor.json"
	exitRecord      = "exit.json"
	groupRecord     = "group.json"
	monitorLog      = "monitor.log"
	stdoutFile      = "stdout"
	stderrFile      = "stderr"
	maxIDLength     = 200
)

// launchRecord is container.json: everything the monitor needs to start the
// task, written by agentd before the container's cgroup is created.
type launchRecord struct {
	ID        string `json:"id"`
	Group     string `json:"group,omitempty"`
	OwnCgroup bool   `json:"own_cgroup"`
	// Cgroup is where the task runs: its own cgroup, or its group's.
	Cgroup string `json:"cgroup"`
	// LimitCgroups are the cgroups between the task and the agent's root
	// whose own limits count as the task's limits (LimitOOM): its own
	// cgroup and, nested in a group, the group's.
	LimitCgroups []string `json:"limit_cgroups"`
	Sandbox      string   `json:"sandbox"`
	// Program is Argv[0] resolved in the task's PATH.
	Program            string   `json:"program"`
	Argv               []string `json:"argv"`
	Env                []string `json:"env"`
	MemoryRequestBytes int64    `json:"memory_request_bytes"`
	// MemoryLimitBytes is the cgroup's memory limit at launch (0 or
	// cgroups.Unlimited: none), which tells Recover whether the task can
	// burst past its request. Records of earlier releases lack it.
	MemoryLimitBytes int64     `json:"memory_limit_bytes,omitempty"`
	OOMScoreAdj      int       `json:"oom_score_adj"`
	CreatedAt        time.Time `json:"created_at"`
}

// monitorRecordData is monitor.json, written by the monitor once the task
// runs and before it tells agentd so.
type monitorRecordData struct {
	MonitorPid       int       `json:"monitor_pid"`
	MonitorStartTime uint64    `json:"monitor_start_time"`
	Pid              int       `json:"pid"`
	StartedAt        time.Time `json:"started_at"`
}

// exitRecordData is exit.json, written by the monitor when the task ended
// (or could not start) and everything left of it was killed.
type exitRecordData struct {
	StartError      string    `json:"start_error,omitempty"`
	ExitCode        int       `json:"exit_code"`
	Signal          int       `json:"signal,omitempty"`
	OOMKilled       bool      `json:"oom_killed,omitempty"`
	LimitOOM        bool      `json:"limit_oom,omitempty"`
	MemoryPeakBytes uint64    `json:"memory_peak_bytes,omitempty"`
	EndedAt         time.Time `json:"ended_at"`
}

func (e exitRecordData) status() ExitStatus {
	return ExitStatus{
		StartError:      e.StartError,
		ExitCode:        e.ExitCode,
		Signal:          sigOf(e.Signal),
		OOMKilled:       e.OOMKilled,
		LimitOOM:        e.LimitOOM,
		MemoryPeakBytes: e.MemoryPeakBytes,
	}
}

// groupRecordData is group.json.
type groupRecordData struct {
	Cgroup    string    `json:"cgroup"`
	CreatedAt time.Time `json:"created_at"`
}

// checkID refuses ids that are not one safe path component: an id names a
// directory in the work dir and a cgroup under the agent's root, and
// neither may ever escape them.
func checkID(kind, id string) error {
	if id == "" || len(id) > maxIDLength || id == "." || id == ".." {
		return fmt.Errorf("%s id %q: want 1 to %d characters of A-Z a-z 0-9 . _ -, not . or ..", kind, id, maxIDLength)
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			return fmt.Errorf("%s id %q: character %q is not allowed (A-Z a-z 0-9 . _ -)", kind, id, r)
		}
	}
	return nil
}

func (c *Containerizer) sandboxDir(id string) string {
	return filepath.Join(c.cfg.WorkDir, sandboxesDir, id)
}

func (c *Containerizer) recordsDir(id string) string {
	return filepath.Join(c.cfg.WorkDir, recordsDir, id)
}

// writeRecord writes a record atomically (temporary file, rename) but
// without fsync. A record only has to survive agentd's crash, which the
// page cache does; after a host crash no task survives, and a record that
// is lost or torn then leads to the same answer as one that is not: the
// container is reported lost. This keeps fsync (milliseconds on a busy
// disk) off the launch path. exit.json, written when a task ends, is
// fsynced: it is the only place its exit status exists.
func writeRecord(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// readRecord reads a record; errors.Is(err, fs.ErrNotExist) when it is
// absent, any other error means it is damaged.
func readRecord(path string, v any) error {
	err := atomicfile.ReadJSON(path, v)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("damaged record: %w", err)
	}
	return err
}

// removeContainerFiles removes a container's records and sandbox.
func (c *Containerizer) removeContainerFiles(id string) error {
	return errors.Join(os.RemoveAll(c.recordsDir(id)), os.RemoveAll(c.sandboxDir(id)))
}
