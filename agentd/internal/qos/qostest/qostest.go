// Package qostest gives tests of other packages what the QoS controllers'
// real-machine tests need — this kernel's pressure stall information and
// stress-ng for a synthetic load — or skips them, in one place and with
// one message.
package qostest

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
)

// RequirePSI skips a test that needs this machine's pressure stall
// information when the kernel has none (built without CONFIG_PSI, or
// booted with psi=0: /proc/pressure exists and every read fails).
func RequirePSI(tb testing.TB) {
	tb.Helper()
	data, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		tb.Skipf("needs a kernel with PSI: %v", err)
	}
	if !bytes.HasPrefix(data, []byte("some avg10=")) {
		tb.Skipf("needs a kernel with PSI: /proc/pressure/cpu reads %q", data)
	}
}

// RequireStressNG returns the path of stress-ng, installing the Debian
// package when it is missing (the GNUmakefile's test-deps does too), or
// skips the test when it cannot be had.
func RequireStressNG(tb testing.TB) string {
	tb.Helper()
	if path, err := exec.LookPath("stress-ng"); err == nil {
		return path
	}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("apt-get", "install", "-y", "stress-ng").CombinedOutput(); err != nil {
			tb.Logf("apt-get install -y stress-ng: %v\n%s", err, out)
		}
	}
	path, err := exec.LookPath("stress-ng")
	if err != nil {
		tb.Skipf("needs stress-ng (Debian package stress-ng), which could not be installed: %v", err)
	}
	return path
}
