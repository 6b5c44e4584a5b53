package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestACLFlagsAreListedByHelp(t *testing.T) {
	stdout, stderr, code := runMasterd(t, masterdBinary(t), "-h")
	if code != 0 {
		t.Fatalf("masterd -h exited %d: %s", code, stderr)
	}
	for _, flag := range []string{"-acl", "-operator-token-file", "-operator-token"} {
		if !strings.Contains(stdout, "  "+flag+"\n") && !strings.Contains(stdout, "  "+flag+" ") {
			t.Errorf("masterd -h does not list %s:\n%s", flag, stdout)
		}
	}
}

func TestOperatorTokenFileFlag(t *testing.T) {
	bin := masterdBinary(t)
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}

	for name, tc := range map[string]struct {
		args []string
		env  string
		want string
	}{
		"empty file":       {args: []string{"-operator-token-file", write("empty", "")}, want: "is empty"},
		"only a newline":   {args: []string{"-operator-token-file", write("newline", "\n")}, want: "is empty"},
		"two lines":        {args: []string{"-operator-token-file", write("two", "a\nb\n")}, want: "more than one line"},
		"missing file":     {args: []string{"-operator-token-file", filepath.Join(dir, "nothing")}, want: "no such file"},
		"file and flag":    {args: []string{"-operator-token-file", write("tok", "t\n"), "-operator-token", "x"}, want: "give one"},
		"file and the env": {args: []string{"-operator-token-file", write("tok2", "t\n")}, env: "ALLOT_OPERATOR_TOKEN=x", want: "give one"},
	} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"-dev", "-http", freeAddr(t)}, tc.args...)
			if k, v, ok := strings.Cut(tc.env, "="); ok {
				t.Setenv(k, v)
			}
			_, stderr, code := runMasterd(t, bin, args...)
			if code != 2 || !strings.Contains(stderr, "-operator-token-file") || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q: want exit 2 naming -operator-token-file and %q", code, stderr, tc.want)
			}
		})
	}

	// A token file as an editor writes it: the trailing newline is not part
	// of the token, and the token is never logged.
	const token = "from-a-file-0123456789"
	addr := freeAddr(t)
	d := startDaemon(t, bin, "-dev", "-acl", "-http", addr, "-log-level", "trace", "-operator-token-file", write("operator", token+"\r\n"))
	d.waitLog(t, "serving")
	waitHealthy(t, "http://"+addr)
	eventually(t, "GET /v1/quotas with the file's token", func() error {
		if r, err := getIndexed("http://"+addr+"/v1/quotas", token); err != nil || r.status != 200 {
			return fmt.Errorf("%+v %v", r, err)
		}
		return nil
	})
	if a := aclDo(t, "GET", "http://"+addr+"/v1/quotas", "", ""); a.status != 401 {
		t.Errorf("GET /v1/quotas without a token: %d %s, want 401", a.status, a.body)
	}
	if log := d.logText(); strings.Contains(log, token) || strings.Contains(log, "visible") {
		t.Errorf("the log shows the token or warns about argv for a token from a file:\n%s", log)
	}

	// From argv: it works, and a warning says ps shows it.
	addr = freeAddr(t)
	d = startDaemon(t, bin, "-dev", "-http", addr, "-operator-token", token)
	d.waitLog(t, "serving", "-operator-token on the command line is visible")
	if strings.Count(d.logText(), token) != 0 {
		t.Errorf("the log shows the token:\n%s", d.logText())
	}
}

// waitHealthy waits until the server at addr answers GET /v1/health.
func waitHealthy(t *testing.T, addr string) {
	t.Helper()
	eventually(t, "masterd healthy", func() error {
		r, err := getIndexed(addr+"/v1/health", "")
		if err == nil && r.status != 200 {
			return os.ErrNotExist
		}
		return err
	})
}
