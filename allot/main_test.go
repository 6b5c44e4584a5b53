package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/allot/allot/masterd/testcluster"
)

// buildAllot builds this command as `make build` does, with a version.
func buildAllot(t *testing.T) string {
	t.Helper()
	root, err := testcluster.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "allot")
	cmd := exec.Command("go", "build", "-ldflags", "-X main.version=v9.9.9-test", "-o", bin, "./allot")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./allot: %v\n%s", err, out)
	}
	return bin
}

// The exit codes scripts rely on, through the built binary and a real
// masterd that wants a token (-operator-token).
func TestExitCodesOfTheBinary(t *testing.T) {
	bin := buildAllot(t)
	const token = "cli-binary-test-token"
	c := testcluster.Start(t, 1, testcluster.WithOperatorToken(token))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	addr := "ALLOT_ADDR=" + strings.Join(c.Addresses(), ",")
	withToken := []string{addr, "ALLOT_TOKEN=" + token}

	run := func(env []string, args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &exit):
			code = exit.ExitCode()
		default:
			t.Fatalf("run allot %v: %v", args, err)
		}
		return out.String(), errOut.String(), code
	}

	out, _, code := run(nil, "-version")
	if code != 0 || strings.TrimSpace(out) != "allot version v9.9.9-test" {
		t.Errorf("-version: exit %d, %q", code, out)
	}
	out, _, code = run(withToken, "quota", "set", "bin-eng", "-limit", "cpus=2")
	if code != 0 || !strings.Contains(out, "bin-eng") {
		t.Fatalf("quota set: exit %d, %q", code, out)
	}

	for _, tc := range []struct {
		name string
		env  []string
		args []string
		code int
	}{
		{"ok", withToken, []string{"quota", "list"}, 0},
		{"help", nil, []string{"quota", "set", "-h"}, 0},
		{"server refuses (400)", withToken, []string{"quota", "set", "bin-eng/ml", "-limit", "cpus=4"}, 1},
		{"unknown flag", withToken, []string{"quota", "list", "-bogus"}, 2},
		{"missing argument", withToken, []string{"quota", "get"}, 2},
		{"bad resources", withToken, []string{"quota", "set", "bin-eng", "-limit", "cpus=lots"}, 2},
		{"not found", withToken, []string{"quota", "get", "bin-nosuch"}, 3},
		{"stale -if-match (412)", withToken, []string{"quota", "delete", "bin-eng", "-if-match", "1"}, 4},
		{"no token (401)", []string{addr}, []string{"quota", "list"}, 5},
		{"unreachable", []string{"ALLOT_ADDR=http://127.0.0.1:1"}, []string{"-retry-for", "0s", "status"}, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := run(tc.env, tc.args...)
			if code != tc.code {
				t.Errorf("allot %v: exit %d, want %d\nstdout: %s\nstderr: %s", tc.args, code, tc.code, out, errOut)
			}
			if tc.code != 0 && (!strings.HasPrefix(errOut, "Error: ") || strings.Contains(errOut, "goroutine")) {
				t.Errorf("allot %v: stderr %q, want an Error: line", tc.args, errOut)
			}
		})
	}
}

// Ctrl-C ends `allot audit -follow` with exit 0: that is how it is meant
// to end.
func TestInterruptEndsAuditFollow(t *testing.T) {
	bin := buildAllot(t)
	c := testcluster.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, "audit", "-follow", "-interval", "100ms")
	cmd.Env = []string{"ALLOT_ADDR=" + c.Address(0)}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The header, then the cluster's own first entries: it is following.
	lines := bufio.NewScanner(stdout)
	for i := 0; i < 2; i++ {
		if !lines.Scan() {
			t.Fatalf("audit -follow printed no entry (stderr %q)", stderr.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("after SIGINT: %v, want exit 0 (stderr %q)", err, stderr.String())
	}
}
