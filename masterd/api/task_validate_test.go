package api

import (
	"strings"
	"testing"
)

func TestValidateTaskInfo(t *testing.T) {
	valid := func() TaskInfo {
		return TaskInfo{TaskID: "t1", Resources: Resources{"cpus": 1, "mem": 64}, Command: &CommandInfo{Value: "sleep 1"}}
	}
	no, grace := false, 10.0
	tests := map[string]struct {
		change  func(*TaskInfo)
		inGroup bool
		want    string // "" = valid
	}{
		"valid":                        {change: func(*TaskInfo) {}},
		"id with a slash":              {change: func(t *TaskInfo) { t.TaskID = "../etc" }, want: "task_id"},
		"id dot dot":                   {change: func(t *TaskInfo) { t.TaskID = ".." }, want: "task_id"},
		"id with NUL":                  {change: func(t *TaskInfo) { t.TaskID = "a\x00b" }, want: "task_id"},
		"absolute id":                  {change: func(t *TaskInfo) { t.TaskID = "/tmp/x" }, want: "task_id"},
		"no command":                   {change: func(t *TaskInfo) { t.Command = nil }, want: "command.value"},
		"blank command":                {change: func(t *TaskInfo) { t.Command.Value = "  " }, want: "command.value"},
		"NUL in command":               {change: func(t *TaskInfo) { t.Command.Value = "echo a\x00b" }, want: "NUL"},
		"1 MiB command":                {change: func(t *TaskInfo) { t.Command.Value = strings.Repeat("x", 1<<20) }, want: "more than"},
		"arguments with shell":         {change: func(t *TaskInfo) { t.Command.Arguments = []string{"a"} }, want: "shell: false"},
		"NUL in argument":              {change: func(t *TaskInfo) { t.Command.Shell = &no; t.Command.Arguments = []string{"a", "b\x00"} }, want: "arguments[1]"},
		"arguments without shell":      {change: func(t *TaskInfo) { t.Command.Shell = &no; t.Command.Arguments = []string{"sleep", "1"} }},
		"env name with =":              {change: func(t *TaskInfo) { t.Command.Environment = map[string]string{"A=B": "c"} }, want: "environment"},
		"env value with NUL":           {change: func(t *TaskInfo) { t.Command.Environment = map[string]string{"A": "c\x00"} }, want: "environment"},
		"huge environment":             {change: func(t *TaskInfo) { t.Command.Environment = map[string]string{"A": strings.Repeat("v", 1<<20)} }, want: "environment"},
		"no resources":                 {change: func(t *TaskInfo) { t.Resources = Resources{} }, want: "needs resources"},
		"limit below request":          {change: func(t *TaskInfo) { t.Limits = Limits{"mem": {Value: 32}} }, want: "below its request"},
		"limit on disk":                {change: func(t *TaskInfo) { t.Limits = Limits{"disk": {Value: 32}} }, want: "only cpus and mem"},
		"infinite limit":               {change: func(t *TaskInfo) { t.Limits = Limits{"mem": {Infinite: true}} }},
		"negative grace":               {change: func(t *TaskInfo) { g := -1.0; t.KillPolicy = &KillPolicy{GracePeriodSeconds: &g} }, want: "grace_period_seconds"},
		"grace":                        {change: func(t *TaskInfo) { t.KillPolicy = &KillPolicy{GracePeriodSeconds: &grace} }},
		"share_cgroups false alone":    {change: func(t *TaskInfo) { t.Container = &ContainerInfo{LinuxInfo: &LinuxInfo{ShareCgroups: &no}} }, want: "LAUNCH_GROUP"},
		"share_cgroups false in group": {change: func(t *TaskInfo) { t.Container = &ContainerInfo{LinuxInfo: &LinuxInfo{ShareCgroups: &no}} }, inGroup: true},
		"limits in a shared group":     {change: func(t *TaskInfo) { t.Limits = Limits{"mem": {Value: 128}} }, inGroup: true, want: "share_cgroups: false"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			task := valid()
			tc.change(&task)
			err := ValidateTaskInfo(task, tc.inGroup)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want an error with %q, got %v", tc.want, err)
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	l, err := ParseLimits("cpus:1.5; mem:Infinity")
	if err != nil || len(l) != 2 || l["cpus"].Value != 1.5 || !l["mem"].Infinite {
		t.Fatalf("got %v, %v", l, err)
	}
	if got := l.String(); got != "cpus:1.5;mem:Infinity" {
		t.Fatalf("String() = %q", got)
	}
	for _, bad := range []string{"cpus", "mem:lots", "mem:+Inf"} {
		if _, err := ParseLimits(bad); err == nil {
			t.Errorf("ParseLimits(%q) accepted", bad)
		}
	}
}
