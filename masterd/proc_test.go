package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/allot/allot/masterd/testcluster"
	"github.com/allot/allot/tools/freeaddr"
)

// Helpers that run the masterd binary itself, for what is about the binary:
// its flags, its exit codes, its logs.

func masterdBinary(t *testing.T) string {
	t.Helper()
	bin, err := testcluster.Build("")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// runMasterd runs a masterd that is expected to exit by itself.
func runMasterd(t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.Dir = t.TempDir()
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("masterd %s did not exit; stderr:\n%s", strings.Join(args, " "), errOut.String())
		return "", "", -1
	}
}

// daemon is a masterd process that runs until the test stops it.
type daemon struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startDaemon(t *testing.T, bin string, args ...string) *daemon {
	t.Helper()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "masterd.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		f.Close()
		close(d.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-d.done
		if t.Failed() {
			t.Logf("log of masterd %s:\n%s", strings.Join(args, " "), d.logText())
		}
	})
	return d
}

func (d *daemon) logText() string {
	data, _ := os.ReadFile(d.log)
	return string(data)
}

func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// waitLog waits until the log holds every one of want, or the process exits.
func (d *daemon) waitLog(t *testing.T, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		text := d.logText()
		missing := ""
		for _, w := range want {
			if !strings.Contains(text, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return text
		}
		if d.exited() || time.Now().After(deadline) {
			t.Fatalf("masterd log never showed %q (exited: %v):\n%s", missing, d.exited(), text)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitExit waits for the process to end and returns its exit code.
func (d *daemon) waitExit(t *testing.T) int {
	t.Helper()
	select {
	case <-d.done:
		return d.cmd.ProcessState.ExitCode()
	case <-time.After(60 * time.Second):
		t.Fatalf("masterd did not exit:\n%s", d.logText())
		return -1
	}
}

func (d *daemon) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// freeAddr is a loopback address nothing listens on (a moment ago).
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := freeaddr.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
