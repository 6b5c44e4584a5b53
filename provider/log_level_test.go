package provider

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// clearTFLog unsets every TF_LOG* variable for the test, restoring them
// after.
func clearTFLog(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "TF_LOG") {
			t.Setenv(name, "") // restores the old value after the test
			os.Unsetenv(name)
		}
	}
	for _, name := range providerLogLevelVars {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
}

func TestSilenceUnreadLogsWithoutTFLog(t *testing.T) {
	clearTFLog(t)
	set := SilenceUnreadLogs()
	if !slices.Equal(set, providerLogLevelVars) {
		t.Fatalf("set %v, want %v", set, providerLogLevelVars)
	}
	for _, name := range providerLogLevelVars {
		if got := os.Getenv(name); got != "OFF" {
			t.Errorf("%s = %q, want OFF", name, got)
		}
	}
}

func TestSilenceUnreadLogsKeepsRequestedLogs(t *testing.T) {
	for _, name := range []string{"TF_LOG", "TF_LOG_PROVIDER", "TF_LOG_PROVIDER_ALLOT", "TF_LOG_SDK_FRAMEWORK"} {
		t.Run(name, func(t *testing.T) {
			clearTFLog(t)
			t.Setenv(name, "DEBUG")
			if set := SilenceUnreadLogs(); set != nil {
				t.Fatalf("with %s=DEBUG it set %v", name, set)
			}
			for _, other := range providerLogLevelVars {
				if other != name && os.Getenv(other) != "" {
					t.Errorf("with %s=DEBUG, %s = %q, want it unset", name, other, os.Getenv(other))
				}
			}
		})
	}
}
