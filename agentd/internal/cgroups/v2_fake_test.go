//go:build linux

package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeV2Kernel is a cgroup2 hierarchy in a plain directory, for the
// controllers this host cannot enable on its own cgroup2 (cpu and memory
// are bound to v1 here). It does what the kernel does on mkdir, rmdir and
// writes (cgroup-v2.rst): mkdir creates the core interface files and those
// of each controller the parent enables in cgroup.subtree_control, a write
// to cgroup.subtree_control checks what the parent offers and adds or
// removes the children's files, values are checked and read back in the
// kernel's format, rmdir refuses a cgroup with children or processes. It
// logs every write, so tests see exactly what was written, in order.
type fakeV2Kernel struct {
	t    testing.TB
	root string

	// Files of older kernels that are missing: cgroup.kill before 5.14,
	// memory.events.local before 5.2, memory.peak before 5.19.
	noKill, noLocalEvents, noPeak bool
	// refuse makes writes to a file (by base name) fail with that error.
	refuse map[string]error

	writes []string // "<path relative to root>: <value>"
	kills  int      // writes of "1" to a cgroup.kill
}

// controllerOrder is the order the kernel lists controllers in.
var controllerOrder = []string{"cpuset", "cpu", "io", "memory", "hugetlb", "pids", "rdma", "misc"}

// newFakeV2 makes a fake hierarchy whose root offers controllers (as in
// its cgroup.controllers) and a Manager on it.
func newFakeV2(t testing.TB, controllers string, configure ...func(*fakeV2Kernel)) (*fakeV2Kernel, *v2Manager) {
	t.Helper()
	k := &fakeV2Kernel{t: t, root: t.TempDir()}
	for _, c := range configure {
		c(k)
	}
	for file, content := range map[string]string{
		"cgroup.controllers":     controllers + "\n",
		"cgroup.subtree_control": "\n",
		"cgroup.procs":           "",
		"cgroup.threads":         "",
		"cgroup.stat":            "nr_descendants 0\nnr_dying_descendants 0\n",
		"cpu.stat":               "usage_usec 0\nuser_usec 0\nsystem_usec 0\n",
	} {
		k.put(k.root, file, content)
	}
	m, err := newV2Manager(k.root, k)
	if err != nil {
		t.Fatal(err)
	}
	return k, m
}

func (k *fakeV2Kernel) put(dir, file, content string) {
	k.t.Helper()
	if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
		k.t.Fatal(err)
	}
}

// read returns a file of the cgroup at path (relative to the root) as a
// test would cat it, without the trailing newline.
func (k *fakeV2Kernel) read(path, file string) string {
	k.t.Helper()
	b, err := os.ReadFile(filepath.Join(k.root, path, file))
	if err != nil {
		k.t.Fatal(err)
	}
	return strings.TrimSuffix(string(b), "\n")
}

func (k *fakeV2Kernel) rel(path string) string {
	r, err := filepath.Rel(k.root, path)
	if err != nil {
		k.t.Fatal(err)
	}
	return r
}

func (k *fakeV2Kernel) list(dir, file string) []string {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}

// controllerFiles are the interface files each controller adds to a
// non-root cgroup, with their defaults.
func (k *fakeV2Kernel) controllerFiles(controller string) map[string]string {
	switch controller {
	case "cpu":
		return map[string]string{"cpu.weight": "100\n", "cpu.weight.nice": "0\n", "cpu.max": "max 100000\n"}
	case "memory":
		events := "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n"
		files := map[string]string{
			"memory.current": "0\n", "memory.min": "0\n", "memory.low": "0\n", "memory.high": "max\n",
			"memory.max": "max\n", "memory.events": events, "memory.stat": "anon 0\nfile 0\n",
		}
		if !k.noLocalEvents {
			files["memory.events.local"] = events
		}
		if !k.noPeak {
			files["memory.peak"] = "0\n"
		}
		return files
	case "pids":
		return map[string]string{"pids.max": "max\n", "pids.current": "0\n"}
	}
	return map[string]string{}
}

func (k *fakeV2Kernel) Mkdir(dir string) error {
	parent := filepath.Dir(dir)
	if _, err := os.Stat(filepath.Join(parent, "cgroup.controllers")); err != nil {
		return unix.ENOENT
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return unwrapPathError(err)
	}
	enabled := k.list(parent, "cgroup.subtree_control")
	core := map[string]string{
		"cgroup.controllers":     strings.Join(enabled, " ") + "\n",
		"cgroup.subtree_control": "\n",
		"cgroup.procs":           "",
		"cgroup.threads":         "",
		"cgroup.events":          "populated 0\nfrozen 0\n",
		"cgroup.freeze":          "0\n",
		"cgroup.type":            "domain\n",
		"cgroup.max.depth":       "max\n",
		"cpu.stat":               "usage_usec 0\nuser_usec 0\nsystem_usec 0\n",
	}
	if !k.noKill {
		core["cgroup.kill"] = ""
	}
	for file, content := range core {
		k.put(dir, file, content)
	}
	for _, c := range enabled {
		for file, content := range k.controllerFiles(c) {
			k.put(dir, file, content)
		}
	}
	return nil
}

func (k *fakeV2Kernel) Rmdir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return unwrapPathError(err)
	}
	if dir == k.root {
		return unix.EBUSY
	}
	for _, e := range entries {
		if e.IsDir() {
			return unix.EBUSY
		}
	}
	if len(k.list(dir, "cgroup.procs")) > 0 {
		return unix.EBUSY
	}
	return os.RemoveAll(dir)
}

func (k *fakeV2Kernel) WriteFile(path, value string) error {
	info, err := os.Stat(path)
	if err != nil {
		return unwrapPathError(err)
	}
	if info.IsDir() {
		return unix.EISDIR
	}
	file, dir := filepath.Base(path), filepath.Dir(path)
	if err := k.refuse[file]; err != nil {
		return err
	}
	stored, err := k.apply(dir, file, value)
	if err != nil {
		return err
	}
	k.writes = append(k.writes, k.rel(path)+": "+value)
	return os.WriteFile(path, []byte(stored), 0o644)
}

// apply checks value as the kernel would for file and returns what the
// file reads afterwards.
func (k *fakeV2Kernel) apply(dir, file, value string) (string, error) {
	switch file {
	case "cgroup.subtree_control":
		return k.subtreeControl(dir, value)
	case "cpu.weight":
		w, err := strconv.ParseUint(value, 10, 64)
		if err != nil {
			return "", unix.EINVAL
		}
		if w < 1 || w > 10000 {
			return "", unix.ERANGE
		}
		return value + "\n", nil
	case "cpu.max":
		fields := strings.Fields(value)
		if len(fields) < 1 || len(fields) > 2 {
			return "", unix.EINVAL
		}
		period := "100000"
		if len(fields) == 2 {
			period = fields[1]
		}
		p, err := strconv.ParseUint(period, 10, 64)
		if err != nil || p < 1000 || p > 1000000 {
			return "", unix.EINVAL
		}
		if fields[0] != "max" {
			q, err := strconv.ParseUint(fields[0], 10, 64)
			if err != nil || q < 1000 {
				return "", unix.EINVAL
			}
		}
		return fields[0] + " " + period + "\n", nil
	case "memory.low", "memory.max", "memory.min", "memory.high":
		if value == "max" {
			return "max\n", nil
		}
		b, err := strconv.ParseUint(value, 10, 64)
		if err != nil {
			return "", unix.EINVAL
		}
		// page_counter_memparse: whole pages.
		return strconv.FormatUint(b/4096*4096, 10) + "\n", nil
	case "cgroup.kill":
		if value != "1" {
			return "", unix.EINVAL
		}
		k.kills++
		return "", nil
	case "cgroup.freeze":
		if value != "0" && value != "1" {
			return "", unix.EINVAL
		}
		populated := "0"
		if len(k.list(dir, "cgroup.procs")) > 0 {
			populated = "1"
		}
		k.put(dir, "cgroup.events", fmt.Sprintf("populated %s\nfrozen %s\n", populated, value))
		return value + "\n", nil
	}
	return value, nil
}

func (k *fakeV2Kernel) subtreeControl(dir, value string) (string, error) {
	if dir != k.root && len(k.list(dir, "cgroup.procs")) > 0 {
		return "", unix.EBUSY // no internal processes
	}
	available := k.list(dir, "cgroup.controllers")
	enabled := k.list(dir, "cgroup.subtree_control")
	for _, token := range strings.Fields(value) {
		name := token[1:]
		if !slices.Contains(controllerOrder, name) || (token[0] != '+' && token[0] != '-') {
			return "", unix.EINVAL
		}
		if !slices.Contains(available, name) {
			return "", unix.ENOENT
		}
		if token[0] == '+' && !slices.Contains(enabled, name) {
			enabled = append(enabled, name)
		}
		if token[0] == '-' {
			enabled = slices.DeleteFunc(enabled, func(c string) bool { return c == name })
		}
	}
	slices.SortFunc(enabled, func(a, b string) int {
		return slices.Index(controllerOrder, a) - slices.Index(controllerOrder, b)
	})
	children, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	for _, child := range children {
		if !child.IsDir() {
			continue
		}
		childDir := filepath.Join(dir, child.Name())
		k.put(childDir, "cgroup.controllers", strings.Join(enabled, " ")+"\n")
		for _, c := range controllerOrder {
			for file, content := range k.controllerFiles(c) {
				path := filepath.Join(childDir, file)
				_, statErr := os.Stat(path)
				switch {
				case slices.Contains(enabled, c) && errors.Is(statErr, os.ErrNotExist):
					k.put(childDir, file, content)
				case !slices.Contains(enabled, c) && statErr == nil:
					os.Remove(path)
				}
			}
		}
	}
	return strings.Join(enabled, " ") + "\n", nil
}
