package testcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// BinaryEnv names a prebuilt masterd binary to use instead of building one, so
// that a make target can build once for every package it tests.
const BinaryEnv = "ALLOT_TESTCLUSTER_MASTERD"

const buildDirPrefix = "allot-testcluster-"

type build struct {
	once sync.Once
	path string
	err  error
}

// builds caches one build per module root: every test of a package, and every
// cluster of a benchmark run, share one binary.
var builds sync.Map

// Build compiles ./masterd of the Go module that contains dir ("" is the
// working directory) and returns the binary's path. It builds once per module
// per process; BinaryEnv, when set, short-circuits the build.
func Build(dir string) (string, error) {
	if bin := os.Getenv(BinaryEnv); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("%s: %w", BinaryEnv, err)
		}
		return bin, nil
	}
	root, err := ModuleRoot(dir)
	if err != nil {
		return "", err
	}
	v, _ := builds.LoadOrStore(root, &build{})
	b := v.(*build)
	b.once.Do(func() { b.path, b.err = buildMasterd(root) })
	return b.path, b.err
}

func buildMasterd(root string) (string, error) {
	sweepStaleBuilds()
	// The pid in the name lets a later process remove this directory once we
	// are gone: test binaries have no hook that runs after the last test.
	out, err := os.MkdirTemp("", buildDirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", fmt.Errorf("build masterd: %w", err)
	}
	bin := filepath.Join(out, "masterd")
	cmd := exec.Command(goTool(), "build", "-o", bin, "./masterd")
	cmd.Dir = root
	if output, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(out)
		return "", fmt.Errorf("go build ./masterd in %s: %w\n%s", root, err, output)
	}
	return bin, nil
}

// sweepStaleBuilds removes the build directories of processes that no longer run.
func sweepStaleBuilds() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), buildDirPrefix+"*"))
	for _, dir := range dirs {
		rest := strings.TrimPrefix(filepath.Base(dir), buildDirPrefix)
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		if err != nil || pid == os.Getpid() || pidAlive(pid) {
			continue
		}
		os.RemoveAll(dir)
	}
}

func goTool() string {
	if path, err := exec.LookPath("go"); err == nil {
		return path
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// ModuleRoot walks up from dir ("" is the working directory) to the directory
// holding go.mod.
func ModuleRoot(dir string) (string, error) {
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("module root: %w", err)
		}
		dir = wd
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("module root: %w", err)
	}
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("module root: %w", err)
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("module root: no go.mod above %s", dir)
		}
		d = parent
	}
}
