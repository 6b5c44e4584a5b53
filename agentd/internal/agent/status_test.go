package agent

import (
	"strings"
	"syscall"
	"testing"

	"github.com/allot/allot/agentd/internal/containerizer"
	"github.com/allot/allot/masterd/api"
)

func TestEndStatus(t *testing.T) {
	const mib = 1 << 20
	tests := map[string]struct {
		exit              containerizer.ExitStatus
		killed            bool
		state, reason, in string
	}{
		"exit 0":                       {exit: containerizer.ExitStatus{}, state: api.TaskFinished, in: "code 0"},
		"exit 3":                       {exit: containerizer.ExitStatus{ExitCode: 3}, state: api.TaskFailed, in: "code 3"},
		"segfault":                     {exit: containerizer.ExitStatus{Signal: syscall.SIGSEGV}, state: api.TaskFailed, in: "SIGSEGV"},
		"cannot start":                 {exit: containerizer.ExitStatus{StartError: "exec: no such file"}, state: api.TaskFailed, in: "no such file"},
		"own limit":                    {exit: containerizer.ExitStatus{OOMKilled: true, LimitOOM: true, MemoryPeakBytes: 64 * mib}, state: api.TaskFailed, reason: api.ReasonContainerLimitationMemory, in: "128 MiB"},
		"node pressure":                {exit: containerizer.ExitStatus{OOMKilled: true, MemoryPeakBytes: 100 * mib}, state: api.TaskFailed, reason: api.ReasonMemoryRequestExceeded, in: "above its memory request of 64 MiB"},
		"node pressure within request": {exit: containerizer.ExitStatus{OOMKilled: true, MemoryPeakBytes: 10 * mib}, state: api.TaskFailed, in: "within its memory request"},
		// An OOM kill is reported as one even when a kill was asked for:
		// the kernel got there first.
		"killed but OOM": {exit: containerizer.ExitStatus{OOMKilled: true, LimitOOM: true}, killed: true, state: api.TaskFailed, reason: api.ReasonContainerLimitationMemory},
		"killed":         {exit: containerizer.ExitStatus{Signal: syscall.SIGTERM}, killed: true, state: api.TaskKilled, in: "SIGTERM"},
		"killed exit 0":  {exit: containerizer.ExitStatus{}, killed: true, state: api.TaskKilled, in: "exited"},
		"lost":           {exit: containerizer.ExitStatus{Lost: true}, state: api.TaskFailed, reason: api.ReasonCommandExecutorFailed, in: "monitor"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			state, reason, message := endStatus(tc.exit, tc.killed, 64, 128)
			if state != tc.state || reason != tc.reason || !strings.Contains(message, tc.in) {
				t.Fatalf("got %s %q %q; want %s %q containing %q", state, reason, message, tc.state, tc.reason, tc.in)
			}
		})
	}
}
