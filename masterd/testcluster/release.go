package testcluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// releaseBuilds caches one build per commit within a process; the binary on
// disk caches it across processes.
var releaseBuilds sync.Map

// BuildCommit compiles ./masterd as it was at commit (a hash, tag or other
// revision of the Git repository that holds the module containing dir, ""
// for the working directory) and returns the binary's path. Upgrade tests
// run it as the release they upgrade from.
//
// The tree of that commit is exported with git archive and built on its own,
// offline, from the module cache, with the environment's GOFLAGS. The binary
// is kept in the temporary directory under the commit's full hash, so later
// test runs start at once. A commit the repository lacks (a shallow clone) is
// an error that says how to fetch it.
func BuildCommit(dir, commit string) (string, error) {
	root, err := ModuleRoot(dir)
	if err != nil {
		return "", err
	}
	full, err := resolveCommit(root, commit)
	if err != nil {
		return "", err
	}
	v, _ := releaseBuilds.LoadOrStore(full, &build{})
	b := v.(*build)
	b.once.Do(func() { b.path, b.err = buildCommit(root, full) })
	return b.path, b.err
}

func resolveCommit(root, commit string) (string, error) {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--verify", "--quiet", commit+"^{commit}").Output()
	if errors.Is(err, exec.ErrNotFound) {
		return "", fmt.Errorf("building masterd at %s needs git: %w", commit, err)
	}
	if err != nil {
		return "", fmt.Errorf("commit %s is not in the repository at %s (a shallow clone has only recent history): "+
			"fetch it with `git -C %s fetch --unshallow` or `git -C %s fetch origin %s`: %w", commit, root, root, root, commit, err)
	}
	return strings.TrimSpace(string(out)), nil
}

func buildCommit(root, full string) (string, error) {
	// The directory's name does not start with a pid, so sweepStaleBuilds
	// leaves it: it is a cache shared by every test run.
	cache := filepath.Join(os.TempDir(), buildDirPrefix+"release-"+full)
	bin := filepath.Join(cache, "masterd")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("build masterd at %s: %w", full, err)
	}
	src, err := os.MkdirTemp("", buildDirPrefix+"src-")
	if err != nil {
		return "", fmt.Errorf("build masterd at %s: %w", full, err)
	}
	defer os.RemoveAll(src)
	if err := exportTree(root, full, src); err != nil {
		return "", err
	}
	// Built beside its final name and renamed, so that a concurrent test run
	// never starts a half-written binary.
	tmp := filepath.Join(cache, fmt.Sprintf("masterd.%d.tmp", os.Getpid()))
	cmd := exec.Command(goTool(), "build", "-ldflags", "-X main.version="+full[:12], "-o", tmp, "./masterd")
	cmd.Dir = src
	if output, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build ./masterd at %s (exported to %s): %w\n%s", full, src, err, output)
	}
	if err := os.Rename(tmp, bin); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("build masterd at %s: %w", full, err)
	}
	return bin, nil
}

// exportTree writes the files of commit into dir: git archive | tar -x.
func exportTree(root, commit, dir string) error {
	archive := exec.Command("git", "-C", root, "archive", "--format=tar", commit)
	extract := exec.Command("tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return fmt.Errorf("export %s: %w", commit, err)
	}
	extract.Stdin = pipe
	var archiveErr, extractErr bytes.Buffer
	archive.Stderr, extract.Stderr = &archiveErr, &extractErr
	if err := extract.Start(); err != nil {
		return fmt.Errorf("export %s: tar: %w", commit, err)
	}
	if err := archive.Run(); err != nil {
		extract.Wait()
		return fmt.Errorf("export %s: git archive: %w: %s", commit, err, archiveErr.Bytes())
	}
	if err := extract.Wait(); err != nil {
		return fmt.Errorf("export %s: tar -x: %w: %s", commit, err, extractErr.Bytes())
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return errors.New("export " + commit + ": no go.mod at the root of its tree")
	}
	return nil
}
