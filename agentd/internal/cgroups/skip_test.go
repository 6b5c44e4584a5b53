//go:build linux

package cgroups

import (
	"fmt"
	"os"
	"testing"

	"github.com/containerd/cgroups/v3/cgroup1"
)

// requireV1 returns this host's cgroup v1 Manager, or skips the test when
// the machine cannot run it: not root, or no writable v1 memory and cpu
// hierarchies (a unified-only host, a container without cgroup mounts).
// It is the one place tests on real cgroups skip.
func requireV1(t testing.TB) *v1Manager {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test creates real cgroup v1 cgroups")
	}
	m, err := NewV1()
	if err != nil {
		t.Skipf("needs cgroup v1 hierarchies: %v", err)
	}
	v1 := m.(*v1Manager)
	for _, controller := range []cgroup1.Name{cgroup1.Memory, cgroup1.Cpu} {
		probe := v1.hierarchy(controller).dir(fmt.Sprintf("/allot-probe-%d", os.Getpid()))
		if err := os.Mkdir(probe, 0o755); err != nil {
			t.Skipf("needs a writable cgroup v1 %s hierarchy: %v", controller, err)
		}
		if err := os.Remove(probe); err != nil {
			t.Fatalf("remove probe cgroup: %v", err)
		}
	}
	return v1
}
