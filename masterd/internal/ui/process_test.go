package ui_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/allot/allot/masterd/testcluster"
	"github.com/allot/allot/tools/freeaddr"
)

// The end-to-end tests run the real programs: masterd (through
// masterd/testcluster, or -dev), agentd on this machine's cgroups, and the
// example framework.

var (
	builds   sync.Map // package → *built
	buildDir struct {
		sync.Once
		path string
		err  error
	}
)

// TestMain removes the binaries the tests built once every test is done.
func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir.path != "" {
		os.RemoveAll(buildDir.path)
	}
	os.Exit(code)
}

type built struct {
	once sync.Once
	path string
	err  error
}

// binary builds the main package pkg (./agentd) of this module once per test
// process and returns its path.
func binary(t testing.TB, pkg string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(pkg, &built{})
	b := v.(*built)
	b.once.Do(func() {
		root, err := testcluster.ModuleRoot("")
		if err != nil {
			b.err = err
			return
		}
		buildDir.Do(func() { buildDir.path, buildDir.err = os.MkdirTemp("", "allot-ui-bin-") })
		if buildDir.err != nil {
			b.err = buildDir.err
			return
		}
		b.path = filepath.Join(buildDir.path, filepath.Base(pkg))
		cmd := exec.Command("go", "build", "-o", b.path, pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// process is a program the test started; it is stopped when the test ends.
type process struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func start(t testing.TB, name, bin string, args ...string) *process {
	t.Helper()
	p := &process{t: t, name: name, log: filepath.Join(t.TempDir(), "output.log"), done: make(chan struct{})}
	out, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		out.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		out.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s output (last lines):\n%s", name, p.tail(40))
		}
	})
	return p
}

// stop asks the program to end (SIGTERM: a framework tears itself down,
// agentd leaves) and kills it if it has not within 15 s.
func (p *process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// kill ends the program at once, as a crash would.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) tail(n int) string {
	data, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func freeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeaddr.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func randomToken(t testing.TB) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const cgroupMount = "/sys/fs/cgroup"

// realAgentsOrSkip skips a test that runs agentd when this machine cannot
// run its tasks: agentd needs root and a writable cgroup hierarchy.
func realAgentsOrSkip(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: agentd runs the framework's tasks in real cgroups")
	}
	probe := filepath.Join(cgroupMount, "memory", fmt.Sprintf("allot-ui-probe-%d", os.Getpid()))
	if _, err := os.Stat(filepath.Join(cgroupMount, "cgroup.controllers")); err == nil {
		probe = filepath.Join(cgroupMount, fmt.Sprintf("allot-ui-probe-%d", os.Getpid())) // cgroup v2
	}
	if err := os.Mkdir(probe, 0o755); err != nil {
		t.Skipf("needs a writable cgroup hierarchy for agentd's tasks: %v", err)
	}
	if err := os.Remove(probe); err != nil {
		t.Fatalf("remove probe cgroup %s: %v", probe, err)
	}
}

// removeCgroups removes the agent's cgroup root in every hierarchy, killing
// what is left in it: a test leaves nothing behind, even when it fails.
func removeCgroups(t testing.TB, root string) {
	dirs := []string{filepath.Join(cgroupMount, root)}
	if hierarchies, err := os.ReadDir(cgroupMount); err == nil {
		for _, h := range hierarchies {
			dirs = append(dirs, filepath.Join(cgroupMount, h.Name(), root))
		}
	}
	for _, dir := range dirs {
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		// Children before parents.
		var cgroups []string
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				cgroups = append(cgroups, p)
			}
			return nil
		})
		for i := len(cgroups) - 1; i >= 0; i-- {
			if err := removeCgroup(cgroups[i]); err != nil {
				t.Logf("remove cgroup %s: %v", cgroups[i], err)
			}
		}
	}
}

func removeCgroup(dir string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, f := range strings.Fields(string(procs)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		err := os.Remove(dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond) // the killed processes are being reaped
	}
}
