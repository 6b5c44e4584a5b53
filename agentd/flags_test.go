package main

import (
	"os"
	"strings"
	"testing"
)

// Bad oversubscription and QoS flags are refused with an error that names
// the flag, before agentd touches anything (no work dir, no cgroup).
func TestOversubscriptionFlagsRefused(t *testing.T) {
	// A bad flag the agent wrongly took would go on to the -master check
	// and fail there, rather than run agentd until the test times out.
	if err := run(baseArgs(t.TempDir() + "/never-made")); err == nil || !strings.Contains(err.Error(), "-master") {
		t.Fatalf("agentd with good flags and a master that is no URL: %v, want the -master error", err)
	}
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"unknown estimator":         {[]string{"-estimator", "magic"}, `unknown estimator "magic"`},
		"fixed without resources":   {[]string{"-estimator", "fixed"}, "-estimator-fixed names no resources"},
		"fixed resources for noop":  {[]string{"-estimator-fixed", "cpus:1"}, "applies to the fixed estimator only"},
		"fixed mem without opt-in":  {[]string{"-estimator", "fixed", "-estimator-fixed", "cpus:1;mem:512"}, "-estimator-memory"},
		"fixed resources malformed": {[]string{"-estimator", "fixed", "-estimator-fixed", "cpus=1"}, `-estimator-fixed "cpus=1"`},
		"fixed gpus":                {[]string{"-estimator", "fixed", "-estimator-fixed", "gpus:1"}, `only cpus and mem`},
		"margin too big":            {[]string{"-estimator", "usage", "-estimator-margin", "1.5"}, "-estimator-margin 1.5"},
		"negative window":           {[]string{"-estimator", "usage", "-estimator-window", "-1m"}, "-estimator-window"},
		"margin for fixed":          {[]string{"-estimator", "fixed", "-estimator-fixed", "cpus:1", "-estimator-margin", "0.2"}, "-estimator-margin: set for an estimator other than -estimator fixed"},
		"window for noop":           {[]string{"-estimator-window", "1m"}, "-estimator-window: set for an estimator other than -estimator noop"},
		"memory for noop":           {[]string{"-estimator-memory"}, "-estimator-memory: set for an estimator other than -estimator noop"},
		"zero interval":             {[]string{"-oversubscribed-interval", "0s"}, "-oversubscribed-interval 0s"},
		"not a duration":            {[]string{"-oversubscribed-interval", "often"}, "-oversubscribed-interval"},
		"unknown qos":               {[]string{"-qos", "magic"}, `unknown qos controller "magic"`},
		"load without thresholds":   {[]string{"-qos", "load"}, "needs -qos-load-5min or -qos-load-15min"},
		"negative load":             {[]string{"-qos", "load", "-qos-load-5min", "-1"}, "-qos-load-5min -1"},
		"load threshold for noop":   {[]string{"-qos-load-5min", "3"}, "-qos-load-5min: set for a QoS controller other than -qos noop"},
		"pressure flag for load":    {[]string{"-qos", "load", "-qos-load-15min", "4", "-qos-pressure-cpu-some", "30"}, "-qos-pressure-cpu-some: set for a QoS controller other than -qos load"},
		"fraction over one":         {[]string{"-qos", "pressure", "-qos-pressure-memory-fraction", "2"}, "-qos-pressure-memory-fraction 2"},
		"percent over 100":          {[]string{"-qos", "pressure", "-qos-pressure-cpu-some", "150"}, "-qos-pressure-cpu-some 150"},
		"every pressure signal off": {[]string{"-qos", "pressure", "-qos-pressure-cpu-some", "0", "-qos-pressure-memory-some", "0", "-qos-pressure-memory-full", "0", "-qos-pressure-memory-fraction", "0"}, "every threshold is off"},
		"negative qos interval":     {[]string{"-qos-interval", "-1s"}, "-qos-interval -1s"},
		"load not a number":         {[]string{"-qos", "load", "-qos-load-5min", "high"}, "-qos-load-5min"},
	} {
		t.Run(name, func(t *testing.T) {
			workDir := t.TempDir() + "/never-made"
			err := run(append(baseArgs(workDir), c.args...))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("agentd %s: %v, want an error with %q", strings.Join(c.args, " "), err, c.want)
			}
			if _, err := os.Stat(workDir); !os.IsNotExist(err) {
				t.Errorf("the work dir was made (%v)", err)
			}
		})
	}
}

// baseArgs are good agentd flags but for -master, which is no URL: run
// checks it after every oversubscription and QoS flag and before it starts
// anything, so a bad flag that is not refused fails the test at once.
func baseArgs(workDir string) []string {
	return []string{"-master", "no-master-url", "-name", "flags", "-work-dir", workDir, "-resources", "cpus:1;mem:128"}
}
