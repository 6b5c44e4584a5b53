package containerizer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// defaultPath is searched when a task's environment has no PATH, as a
// shell does.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// lookPath resolves a task's program as execvp would with the task's own
// environment, not agentd's: a name with a slash is used as it is (a
// relative one from the sandbox, the task's cwd); a bare name is searched
// in the PATH of env. Relative PATH entries are skipped: they would name
// files in whatever directory the search ran in.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	search := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			search = v // the last one wins, as in exec
		}
	}
	for _, dir := range filepath.SplitList(search) {
		if !filepath.IsAbs(dir) {
			continue
		}
		path := filepath.Join(dir, name)
		if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return path, nil
		}
	}
	return "", fmt.Errorf("program %q: not found in the task's PATH %q", name, search)
}

func sigOf(n int) syscall.Signal { return syscall.Signal(n) }
