package api

import (
	"fmt"
	"math"
	"strings"
)

// Bounds of what one task may carry. They keep a task's command within what
// execve takes (MAX_ARG_STRLEN is 128 KiB per string) and keep hostile
// tasks from making the master and agents hold or checkpoint megabytes.
const (
	MaxTaskNameBytes          = 1024
	MaxCommandBytes           = 64 << 10 // value plus every argument
	MaxCommandArguments       = 1024
	MaxEnvironmentBytes       = 64 << 10 // every name and value
	MaxEnvironmentVariables   = 1024
	MaxKillGracePeriodSeconds = 3600
	// DefaultKillGracePeriodSeconds is the grace period of a task without
	// kill_policy.
	DefaultKillGracePeriodSeconds = 5
)

// ValidateTaskInfo checks what a task says about itself, as API.md's rules
// for TaskInfo put it; inGroup says whether it is a task of a LAUNCH_GROUP.
// The master checks it before launching and the agent again before running
// it. What depends on the cluster (ids in use, the agent's capabilities) is
// the caller's to check.
func ValidateTaskInfo(t TaskInfo, inGroup bool) error {
	if err := ValidateName("task_id", t.TaskID); err != nil {
		return err
	}
	if len(t.Name) > MaxTaskNameBytes || strings.ContainsRune(t.Name, 0) {
		return fmt.Errorf("name must be at most %d bytes without NUL", MaxTaskNameBytes)
	}
	if err := t.Resources.Validate("resources"); err != nil {
		return err
	}
	if t.Resources.Normalized().IsZero() {
		return fmt.Errorf("a task needs resources (at least 0.001 of one)")
	}
	if err := validateCommand(t.Command); err != nil {
		return err
	}
	if kp := t.KillPolicy; kp != nil && kp.GracePeriodSeconds != nil {
		g := *kp.GracePeriodSeconds
		if math.IsNaN(g) || g < 0 || g > MaxKillGracePeriodSeconds {
			return fmt.Errorf("kill_policy.grace_period_seconds must be between 0 and %d", MaxKillGracePeriodSeconds)
		}
	}
	shareCgroups := t.ShareCgroups()
	if !shareCgroups && !inGroup {
		return fmt.Errorf("share_cgroups: false is allowed only for the tasks of a LAUNCH_GROUP")
	}
	if len(t.Limits) > 0 {
		if err := t.Limits.Validate(t.Resources.Normalized()); err != nil {
			return err
		}
		for name, lim := range t.Limits {
			if !lim.Infinite && (math.IsNaN(lim.Value) || lim.Value <= 0) {
				return fmt.Errorf("limits: %s limit must be positive", name)
			}
		}
		if inGroup && shareCgroups {
			return fmt.Errorf("a task of a task group may set limits only with share_cgroups: false")
		}
	}
	return nil
}

func validateCommand(c *CommandInfo) error {
	if c == nil || strings.TrimSpace(c.Value) == "" {
		return fmt.Errorf("a task needs command.value")
	}
	shell := c.Shell == nil || *c.Shell
	if shell && len(c.Arguments) > 0 {
		return fmt.Errorf("command.arguments are used only with shell: false")
	}
	if len(c.Arguments) > MaxCommandArguments {
		return fmt.Errorf("command.arguments: at most %d", MaxCommandArguments)
	}
	size := len(c.Value)
	if strings.ContainsRune(c.Value, 0) {
		return fmt.Errorf("command.value contains a NUL byte")
	}
	for i, arg := range c.Arguments {
		if strings.ContainsRune(arg, 0) {
			return fmt.Errorf("command.arguments[%d] contains a NUL byte", i)
		}
		size += len(arg)
	}
	if size > MaxCommandBytes {
		return fmt.Errorf("command: value and arguments are %d bytes, more than %d", size, MaxCommandBytes)
	}
	if len(c.Environment) > MaxEnvironmentVariables {
		return fmt.Errorf("command.environment: at most %d variables", MaxEnvironmentVariables)
	}
	size = 0
	for k, v := range c.Environment {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return fmt.Errorf("command.environment: %q is not a valid variable", truncate(k, 64))
		}
		size += len(k) + len(v)
	}
	if size > MaxEnvironmentBytes {
		return fmt.Errorf("command.environment: %d bytes, more than %d", size, MaxEnvironmentBytes)
	}
	return nil
}

// ShareCgroups reports whether the task shares its task group's cgroup
// (container.linux_info.share_cgroups, true when absent).
func (t TaskInfo) ShareCgroups() bool {
	if c := t.Container; c != nil && c.LinuxInfo != nil && c.LinuxInfo.ShareCgroups != nil {
		return *c.LinuxInfo.ShareCgroups
	}
	return true
}

// KillGracePeriodSeconds is the task's grace period between SIGTERM and
// SIGKILL.
func (t TaskInfo) KillGracePeriodSeconds() float64 {
	if t.KillPolicy != nil && t.KillPolicy.GracePeriodSeconds != nil {
		return *t.KillPolicy.GracePeriodSeconds
	}
	return DefaultKillGracePeriodSeconds
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
