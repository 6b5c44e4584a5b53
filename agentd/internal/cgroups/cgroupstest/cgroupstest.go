// Package cgroupstest gives tests of other packages this host's cgroups,
// or skips them, in one place and with one message.
package cgroupstest

import (
	"fmt"
	"os"
	"testing"

	"github.com/allot/allot/agentd/internal/cgroups"
)

// Manager returns this host's cgroup Manager, or skips the test when the
// machine cannot run real cgroups: not root, or no writable hierarchy.
func Manager(tb testing.TB) cgroups.Manager {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root: the test creates real cgroups")
	}
	m, err := cgroups.NewManager(nil)
	if err != nil {
		tb.Skipf("needs a writable cgroup hierarchy: %v", err)
	}
	probe := fmt.Sprintf("/allot-probe-%d", os.Getpid())
	cg, err := m.Create(probe, cgroups.Spec{})
	if err != nil {
		tb.Skipf("needs a writable cgroup hierarchy: %v", err)
	}
	if err := cg.Delete(); err != nil {
		tb.Fatalf("remove probe cgroup %s: %v", probe, err)
	}
	return m
}
