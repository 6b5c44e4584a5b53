//go:build linux

package cgroups

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	cgroupsv3 "github.com/containerd/cgroups/v3"
)

func TestModeFromMountinfo(t *testing.T) {
	for name, tc := range map[string]struct {
		fixture        string
		wantMode       Mode
		wantMountpoint string
		wantErr        string
	}{
		"legacy v1, co-mounted controllers and a named systemd hierarchy": {
			fixture: "mountinfo-legacy", wantMode: V1, wantMountpoint: "/sys/fs/cgroup",
		},
		"hybrid, systemd's empty cgroup2 at /sys/fs/cgroup/unified": {
			fixture: "mountinfo-hybrid-systemd", wantMode: V1, wantMountpoint: "/sys/fs/cgroup",
		},
		"hybrid, this host: v1 controllers one per mount, empty cgroup2 at unified": {
			fixture: "mountinfo-hybrid-this-host", wantMode: V1, wantMountpoint: "/sys/fs/cgroup",
		},
		"unified host": {
			fixture: "mountinfo-unified", wantMode: V2, wantMountpoint: "/sys/fs/cgroup",
		},
		"unified, in a container with its own cgroup namespace": {
			fixture: "mountinfo-unified-container", wantMode: V2, wantMountpoint: "/sys/fs/cgroup",
		},
		"no cgroup file system at all, only a tmpfs where it would be": {
			fixture: "mountinfo-none", wantMode: Unavailable,
		},
		"v1 controllers hidden by a tmpfs mounted over /sys/fs/cgroup": {
			fixture: "mountinfo-overmounted-v1", wantMode: Unavailable,
		},
		"cgroup2 mounted over a tmpfs that held v1 controllers": {
			fixture: "mountinfo-overmounted-unified", wantMode: V2, wantMountpoint: "/sys/fs/cgroup",
		},
		"a line without the separator": {
			fixture: "mountinfo-bad", wantErr: `mountinfo line 2: want "ID PARENT`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", "mode", tc.fixture))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			mode, mountpoint, err := ModeFromMountinfo(f)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, %q, error %v; want an error containing %q", mode, mountpoint, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if mode != tc.wantMode || mountpoint != tc.wantMountpoint {
				t.Errorf("got %v at %q, want %v at %q", mode, mountpoint, tc.wantMode, tc.wantMountpoint)
			}
		})
	}
}

func TestModeFromMountinfoUnescapesMountPoints(t *testing.T) {
	const mountinfo = "31 23 0:28 / /srv/cg\\040roups rw,relatime - tmpfs tmpfs rw\n" +
		"32 31 0:29 / /srv/cg\\040roups/memory rw,relatime - cgroup cgroup rw,memory\n"
	mode, mountpoint, err := ModeFromMountinfo(strings.NewReader(mountinfo))
	if err != nil {
		t.Fatal(err)
	}
	if mode != V1 || mountpoint != "/srv/cg roups" {
		t.Errorf("got %v at %q, want v1 at %q", mode, mountpoint, "/srv/cg roups")
	}
}

// TestDetectModeAgreesWithContainerd compares this host's mode with
// containerd's answer, which statfs(2)s /sys/fs/cgroup instead of reading
// mountinfo.
func TestDetectModeAgreesWithContainerd(t *testing.T) {
	want := map[cgroupsv3.CGMode]Mode{
		cgroupsv3.Unavailable: Unavailable,
		cgroupsv3.Legacy:      V1,
		cgroupsv3.Hybrid:      V1,
		cgroupsv3.Unified:     V2,
	}[cgroupsv3.Mode()]
	if got := DetectMode(); got != want {
		t.Errorf("DetectMode() = %v, containerd's cgroups.Mode() = %v (want %v)", got, cgroupsv3.Mode(), want)
	}
}

func TestNewManagerPicksTheHostsMode(t *testing.T) {
	mode, mountpoint, detectErr := detect()
	m, err := NewManager(nil)
	if detectErr != nil || mode == Unavailable {
		if err == nil {
			t.Fatalf("no cgroup hierarchy here (%v), yet NewManager gave a %v manager", detectErr, m.Mode())
		}
		return
	}
	if err != nil {
		// The mode's own constructor refused (a v1 host without a
		// required controller, a v2 one without cpu or memory): its
		// error must be the one NewManager returns.
		var direct error
		if mode == V1 {
			_, direct = NewV1()
		} else {
			_, direct = NewV2(mountpoint)
		}
		if direct == nil || direct.Error() != err.Error() {
			t.Fatalf("NewManager on a %v host: %v; the %v constructor says %v", mode, err, mode, direct)
		}
		return
	}
	if m.Mode() != mode {
		t.Errorf("NewManager gave a %v manager on a %v host", m.Mode(), mode)
	}
}
