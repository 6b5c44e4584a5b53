package containerizer

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseProcStat(t *testing.T) {
	for name, tc := range map[string]struct {
		file    string
		want    procStat
		wantErr bool
	}{
		"a shell":                        {file: "stat-bash", want: procStat{State: 'S', PPid: 3250, StartTime: 220005}},
		"spaces and parens in the name":  {file: "stat-parens", want: procStat{State: 'S', PPid: 1, StartTime: 987654321}},
		"a zombie":                       {file: "stat-zombie", want: procStat{State: 'Z', PPid: 1, StartTime: 123}},
		"truncated":                      {file: "stat-truncated", wantErr: true},
		"no command name in parentheses": {file: "stat-noparens", wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := parseProcStat(f)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("parseProcStat(%s) = %+v, %v; want %+v, error %v", tc.file, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestParseCmdline(t *testing.T) {
	for file, want := range map[string][]string{
		"cmdline-monitor": {"/usr/bin/agentd", "monitor", "/var/lib/allot/containers/c1"},
		"cmdline-empty":   nil,
	} {
		f, err := os.Open(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseCmdline(f)
		f.Close()
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("parseCmdline(%s) = %q, %v; want %q", file, got, err, want)
		}
	}
}

func TestOOMScoreAdj(t *testing.T) {
	const gib = 1 << 30
	for name, tc := range map[string]struct {
		request, node int64
		want          int
	}{
		"no request":            {request: 0, node: gib, want: 1000},
		"a quarter of the node": {request: gib / 4, node: gib, want: 750},
		"the whole node":        {request: gib, node: gib, want: 0},
		"more than the node":    {request: 2 * gib, node: gib, want: 0},
		"negative request":      {request: -1, node: gib, want: 1000},
		"rounds toward 1000":    {request: 1, node: 3, want: 667},
		"a 64 TiB node":         {request: 1 << 45, node: 1 << 46, want: 500},
	} {
		t.Run(name, func(t *testing.T) {
			if got := oomScoreAdj(tc.request, tc.node); got != tc.want {
				t.Errorf("oomScoreAdj(%d, %d) = %d, want %d", tc.request, tc.node, got, tc.want)
			}
		})
	}
}

func TestCheckID(t *testing.T) {
	for _, ok := range []string{"a", "task-1.2_x", "0f3c9a2e-8d1b-4c7e-9a6f-2b1d3e4f5a6b", strings.Repeat("x", maxIDLength)} {
		if err := checkID("container", ok); err != nil {
			t.Errorf("checkID(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "../x", "a/b", "/abs", "a\x00b", "sp ace", "é", strings.Repeat("x", maxIDLength+1)} {
		if err := checkID("container", bad); err == nil {
			t.Errorf("checkID(%q) accepted it", bad)
		}
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{"tool": 0o755, "data": 0o644} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "subdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		prog string
		env  []string
		want string // "" for an error
	}{
		"found in the task's PATH":          {prog: "tool", env: []string{"PATH=/nonexistent:" + dir}, want: filepath.Join(dir, "tool")},
		"the last PATH wins":                {prog: "tool", env: []string{"PATH=" + dir, "PATH=/nonexistent"}},
		"not executable":                    {prog: "data", env: []string{"PATH=" + dir}},
		"a directory":                       {prog: "subdir", env: []string{"PATH=" + dir}},
		"relative PATH entries are skipped": {prog: "tool", env: []string{"PATH=."}},
		"no PATH: the default":              {prog: "sh", env: nil, want: "/usr/bin/sh"},
		"a path is used as it is":           {prog: "./run.sh", env: nil, want: "./run.sh"},
		"an absolute path as it is":         {prog: "/no/such/file", env: nil, want: "/no/such/file"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := lookPath(tc.prog, tc.env)
			if tc.want == "" {
				if err == nil {
					t.Errorf("lookPath(%q, %q) = %q, want an error", tc.prog, tc.env, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("lookPath(%q, %q) = %q, %v; want %q", tc.prog, tc.env, got, err, tc.want)
			}
		})
	}
}
