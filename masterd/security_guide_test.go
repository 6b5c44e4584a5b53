package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/allot/allot/masterd/testcluster"
)

// guideBlock returns the first block fenced as lang after heading in a guide.
func guideBlock(t *testing.T, guide, heading, lang string) string {
	t.Helper()
	root, err := testcluster.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, guide))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	at := strings.Index(text, "\n"+heading+"\n")
	if at < 0 {
		t.Fatalf("%s has no heading %q", guide, heading)
	}
	text = text[at:]
	fence := "```" + lang + "\n"
	start := strings.Index(text, fence)
	if start < 0 {
		t.Fatalf("%s: no %s block after %q", guide, lang, heading)
	}
	text = text[start+len(fence):]
	return text[:strings.Index(text, "```")]
}

// The security guide's walk-through runs as written (on a free port) and
// prints what the guide says it prints.
func TestSecurityGuideWalkThrough(t *testing.T) {
	for _, tool := range []string{"curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (make test-deps installs it): the guide's script uses it", tool)
		}
	}
	const guide = "docs/guides/security.md"
	script := guideBlock(t, guide, "## Try it on one machine", "sh")
	want := guideBlock(t, guide, "It prints (after the names of the files `masterd tls` wrote):", "text")

	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(masterdBinary(t), filepath.Join(dir, "bin", "masterd")); err != nil {
		t.Fatal(err)
	}
	script = strings.ReplaceAll(script, "127.0.0.1:5050", freeAddr(t))
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the guide's script failed: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	// masterd tls names the files it wrote, under a temporary directory.
	var got strings.Builder
	for _, line := range strings.SplitAfter(string(out), "\n") {
		if !strings.HasPrefix(line, "wrote ") {
			got.WriteString(line)
		}
	}
	if got.String() != want {
		t.Errorf("the guide's script printed:\n%s\nthe guide says:\n%s\nstderr:\n%s", got.String(), want, stderr.String())
	}
}
