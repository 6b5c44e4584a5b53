package agent

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/allot/allot/agentd/internal/containerizer"
	"github.com/allot/allot/masterd/api"
)

// endStatus turns why a container ended into the task's final state,
// reason and message. killed says the agent was asked to kill it;
// memRequestMiB is the task's memory request, the line between an OOM kill
// under node pressure that the task invited (REASON_MEMORY_REQUEST_EXCEEDED)
// and one it did not.
func endStatus(st containerizer.ExitStatus, killed bool, memRequestMiB, memLimitMiB float64) (state, reason, message string) {
	peak := fmt.Sprintf("%.1f MiB", float64(st.MemoryPeakBytes)/(1<<20))
	switch {
	case st.Lost:
		return api.TaskFailed, api.ReasonCommandExecutorFailed,
			"the task's monitor was gone without an exit record when the agent recovered; the task was killed"
	case st.StartError != "":
		return api.TaskFailed, "", "the command could not start: " + st.StartError
	case st.OOMKilled && st.LimitOOM:
		limit := "its memory limit"
		if memLimitMiB > 0 {
			limit = fmt.Sprintf("its memory limit of %g MiB", memLimitMiB)
		}
		return api.TaskFailed, api.ReasonContainerLimitationMemory,
			fmt.Sprintf("OOM-killed at %s (peak %s)", limit, peak)
	case st.OOMKilled && st.MemoryPeakBytes > uint64(memRequestMiB*(1<<20)):
		return api.TaskFailed, api.ReasonMemoryRequestExceeded,
			fmt.Sprintf("OOM-killed under node memory pressure while above its memory request of %g MiB (peak %s)", memRequestMiB, peak)
	case st.OOMKilled:
		return api.TaskFailed, "",
			fmt.Sprintf("OOM-killed under node memory pressure within its memory request of %g MiB (peak %s)", memRequestMiB, peak)
	case killed:
		return api.TaskKilled, "", "killed on request; the task " + howEnded(st)
	case st.Signal != 0:
		return api.TaskFailed, "", "the task was ended by " + signalName(st.Signal)
	case st.ExitCode != 0:
		return api.TaskFailed, "", fmt.Sprintf("the task exited with code %d", st.ExitCode)
	}
	return api.TaskFinished, "", "the task exited with code 0"
}

// howEnded says how a killed task's process ended: "ended by signal 15
// (SIGTERM)", "exited with code 1", "exited".
func howEnded(st containerizer.ExitStatus) string {
	switch {
	case st.Signal != 0:
		return "ended by " + signalName(st.Signal)
	case st.ExitCode != 0:
		return fmt.Sprintf("exited with code %d", st.ExitCode)
	}
	return "exited"
}

// signalName is "signal 9 (SIGKILL)".
func signalName(sig unix.Signal) string {
	name := unix.SignalName(sig)
	if name == "" {
		return fmt.Sprintf("signal %d", int(sig))
	}
	return fmt.Sprintf("signal %d (%s)", int(sig), strings.ToUpper(name))
}
