package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// The README's commands must work as written on a fresh cluster: these tests
// run them, with only the addresses changed to free loopback ports.

// readmeBlock returns the lines of the first ```sh block after heading.
func readmeBlock(t *testing.T, heading string) []string {
	t.Helper()
	root, err := testcluster.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	at := strings.Index(text, "\n"+heading+"\n")
	if at < 0 {
		t.Fatalf("README.md has no heading %q", heading)
	}
	text = text[at:]
	start := strings.Index(text, "```sh\n")
	end := strings.Index(text[start+6:], "```")
	if start < 0 || end < 0 {
		t.Fatalf("README.md: no sh block after %q", heading)
	}
	var lines []string
	for _, l := range strings.Split(text[start+6:start+6+end], "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// curl runs one README line in bash after setup, and returns the status and
// the body curl printed.
func curl(t *testing.T, setup, line string) (int, string) {
	t.Helper()
	status, body, err := tryCurl(t, setup, line)
	if err != nil {
		t.Fatal(err)
	}
	return status, body
}

// tryCurl is curl for a server that may not listen yet.
func tryCurl(t *testing.T, setup, line string) (int, string, error) {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed: the README's commands use it")
	}
	out, err := exec.Command("bash", "-c", setup+"\n"+line+" -w '\\n%{http_code}'").CombinedOutput()
	if err != nil {
		return 0, "", fmt.Errorf("README command %q failed: %v\n%s", line, err, out)
	}
	text := strings.TrimSpace(string(out))
	nl := strings.LastIndex(text, "\n")
	var status int
	fmt.Sscan(text[nl+1:], &status)
	return status, text[:max(nl, 0)], nil
}

func TestReadmeSingleServerCommandsWorkOnAFreshCluster(t *testing.T) {
	lines := readmeBlock(t, "## Trying it on one machine")
	lines = append(lines, readmeBlock(t, "it is forced:")...)
	addr := freeAddr(t)
	var setup string
	started := false
	for _, line := range lines {
		line = strings.ReplaceAll(line, "127.0.0.1:5050", addr)
		switch {
		case line == "make build":
		case strings.HasPrefix(line, "bin/masterd -dev &"):
			d := startDaemon(t, masterdBinary(t), "-dev", "-http", addr)
			d.waitLog(t, "leading")
			started = true
		case strings.HasPrefix(line, "server="):
			setup = line
		case strings.HasPrefix(line, "curl "):
			if !started || setup == "" {
				t.Fatalf("README runs %q before starting a server and naming it", line)
			}
			status, body := curl(t, setup, line)
			want := 200
			// The one command the README shows failing, to show why.
			if strings.Contains(line, "dry_run=true") && strings.Contains(line, `"guarantees"`) && !strings.Contains(line, "force") {
				want = 409
			}
			if status != want {
				t.Errorf("README command %q answered %d, want %d:\n%s", line, status, want, body)
			}
			if !json.Valid([]byte(body)) {
				t.Errorf("README command %q answered no JSON: %q", line, body)
			}
		default:
			t.Fatalf("README line %q: this test does not know how to run it", line)
		}
	}
}

func TestReadmeClusterCommandsWorkAsWritten(t *testing.T) {
	lines := readmeBlock(t, "## Running a 3-server cluster")
	dir := t.TempDir()
	ports := map[string]string{}
	loopback := func(line string) string {
		return regexp.MustCompile(`10\.0\.0\.\d:50[56]0`).ReplaceAllStringFunc(line, func(a string) string {
			if ports[a] == "" {
				ports[a] = freeAddr(t)
			}
			return ports[a]
		})
	}
	var setup []string
	var curls []string
	for _, line := range lines {
		line = strings.ReplaceAll(loopback(line), "/var/lib/allot", dir)
		switch {
		case strings.HasPrefix(line, "bin/masterd "):
			d := startDaemon(t, masterdBinary(t), strings.Fields(strings.TrimPrefix(line, "bin/masterd "))...)
			defer func() {
				if t.Failed() {
					t.Logf("%s:\n%s", line, d.logText())
				}
			}()
		case strings.HasPrefix(line, "export ") || strings.HasPrefix(line, "server="):
			setup = append(setup, line)
		case strings.HasPrefix(line, "curl "):
			curls = append(curls, line)
		default:
			t.Fatalf("README line %q: this test does not know how to run it", line)
		}
	}
	if len(curls) == 0 {
		t.Fatal("the README shows no curl command for the cluster")
	}
	// The servers join in the background: wait until the one curl talks to
	// sees three voters and a leader, then run the commands as written.
	eventually(t, "a 3-server cluster", func() error {
		status, body, err := tryCurl(t, strings.Join(setup, "\n"), curls[0])
		if err != nil {
			return err // not listening yet
		}
		var info api.Cluster
		if status != 200 || json.Unmarshal([]byte(body), &info) != nil || info.Leader == nil || len(info.Servers) != 3 {
			return fmt.Errorf("%d %s", status, body)
		}
		return nil
	})
	for _, line := range curls {
		if status, body := curl(t, strings.Join(setup, "\n"), line); status != 200 {
			t.Errorf("README command %q answered %d:\n%s", line, status, body)
		}
	}
	// ALLOT_ADDR, as exported, is what the Go client (provider, tools) takes.
	out, err := exec.Command("bash", "-c", strings.Join(setup, "\n")+"\nprintf %s \"$ALLOT_ADDR\"").Output()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.NewClient(api.SplitAddresses(string(out)), ""); err != nil || len(api.SplitAddresses(string(out))) != 3 {
		t.Fatalf("ALLOT_ADDR %q: %v", out, err)
	}
}
