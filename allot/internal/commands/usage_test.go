package commands

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/urfave/cli/v3"

	"github.com/allot/allot/masterd/api"
)

// Every command answers -h with exit 0, its usage, an example, and flags
// spelled with one dash, as allot's other programs spell theirs.
func TestHelpOnEveryCommand(t *testing.T) {
	a := &app{}
	var walk func(path []string, cmd *cli.Command)
	count := 0
	walk = func(path []string, cmd *cli.Command) {
		for _, sub := range cmd.Commands {
			if sub.Name == "completion" {
				continue // urfave's own, tested below
			}
			p := append(append([]string(nil), path...), sub.Name)
			r := run(t, nil, append(p, "-h")...)
			if r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, "USAGE:") {
				t.Errorf("-h:\n%s", r)
			}
			if len(sub.Commands) == 0 {
				count++
				if !strings.Contains(r.stdout, "Example") {
					t.Errorf("allot %s -h has no example:\n%s", strings.Join(p, " "), r.stdout)
				}
				if !strings.Contains(r.stdout, "allot "+strings.Join(p, " ")) {
					t.Errorf("allot %s -h does not show how to call it:\n%s", strings.Join(p, " "), r.stdout)
				}
			}
			for _, line := range strings.Split(r.stdout, "\n") {
				if strings.HasPrefix(strings.TrimSpace(line), "--") {
					t.Errorf("allot %s -h shows a double-dash flag: %q", strings.Join(p, " "), line)
				}
			}
			walk(p, sub)
		}
	}
	walk(nil, a.root("test"))
	if count < 25 {
		t.Errorf("walked %d commands, want every one of the 25 or more", count)
	}

	r := ok(t, nil, "-version")
	if strings.TrimSpace(r.stdout) != "allot version test" {
		t.Errorf("-version printed %q", r.stdout)
	}
}

// Shell completion scripts come out for bash, zsh and fish, and the tool
// answers their completion requests with its commands.
func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		r := ok(t, nil, "completion", shell)
		if !strings.Contains(r.stdout, "allot") || len(r.stdout) < 200 {
			t.Errorf("completion %s:\n%s", shell, r.stdout)
		}
	}
	for _, args := range [][]string{{"completion", "tcsh"}, {"completion"}} {
		msg := fails(t, ExitUsage, nil, args...)
		if !strings.Contains(msg, "bash, zsh, fish, pwsh") {
			t.Errorf("allot %s: %q does not list the shells", strings.Join(args, " "), msg)
		}
	}
	r := ok(t, nil, "quota", "--generate-shell-completion")
	for _, want := range []string{"list", "get", "set", "delete"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("completing `allot quota` offers %q, not %s", r.stdout, want)
		}
	}
}

// Mistakes on the command line exit 2 with "Error: …" and a hint naming
// the command's -h, send nothing, and store nothing.
func TestUsageErrors(t *testing.T) {
	c := shared(t)
	e := clusterEnv(c)
	cl := client(t, c)
	missingFile := filepath.Join(t.TempDir(), "nope")
	emptyFile := filepath.Join(t.TempDir(), "empty")
	junkFile := filepath.Join(t.TempDir(), "junk")
	if err := os.WriteFile(emptyFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(junkFile, []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := map[string]struct {
		env  env
		args []string
		want string
	}{
		"no command":           {e, nil, "allot needs a command"},
		"unknown command":      {e, []string{"quotas"}, `no command "quotas"`},
		"unknown subcommand":   {e, []string{"quota", "show", "x"}, `allot quota has no command "show"`},
		"group without one":    {e, []string{"ratelimit", "default"}, "allot ratelimit default needs a command: get, set, delete"},
		"unknown flag":         {e, []string{"quota", "list", "-bogus"}, "flag provided but not defined: -bogus"},
		"global -json":         {e, []string{"-json", "quota", "list"}, "-json"},
		"missing argument":     {e, []string{"quota", "get"}, "allot quota get needs ROLE"},
		"extra argument":       {e, []string{"quota", "get", "a", "b"}, "takes 1 argument(s)"},
		"bad role":             {e, []string{"quota", "set", "eng/../x", "-limit", "cpus=1"}, `role "eng/../x" must be a path of segments`},
		"bad role syntax":      {e, []string{"role", "get", "a b"}, `role "a b" must be a path of segments of letters, digits, _ . and - joined by /`},
		"resources syntax":     {e, []string{"quota", "set", "u-eng", "-guarantee", "cpus"}, `-guarantee "cpus": resource "cpus": want name=value`},
		"resources value":      {e, []string{"quota", "set", "u-eng", "-limit", "cpus=two"}, `value "two" is not a number`},
		"negative resource":    {e, []string{"quota", "set", "u-eng", "-limit", "cpus=-1"}, "must not be negative"},
		"resource name":        {e, []string{"quota", "set", "u-eng", "-limit", "CPUs=1"}, `resource name "CPUs" must be lower-case letters`},
		"named twice":          {e, []string{"quota", "set", "u-eng", "-limit", "cpus=1,cpus=2"}, "named twice"},
		"empty resources":      {e, []string{"quota", "set", "u-eng", "-guarantee", ""}, "-guarantee is empty"},
		"quota set bare":       {e, []string{"quota", "set", "u-eng"}, "quota set needs -guarantee or -limit (or both); to remove the quota, run allot quota delete u-eng"},
		"bad if-match":         {e, []string{"quota", "delete", "u-eng", "-if-match", "v3"}, `-if-match wants a version (a whole number), not "v3"`},
		"bad since":            {e, []string{"audit", "-since", "abc"}, `-since wants an audit index (a whole number), not "abc"`},
		"fractional burst":     {e, []string{"ratelimit", "set", "u-p", "-burst", "1.5"}, `-burst wants a whole number, not "1.5"`},
		"bad qps":              {e, []string{"ratelimit", "set", "u-p", "-qps", "x"}, `-qps wants a number, not "x"`},
		"duration unit":        {e, []string{"audit", "-follow", "-interval", "5"}, `-interval wants a duration with its unit (500ms, 10s, 2m), not "5"`},
		"bad retry-for":        {e, []string{"-retry-for", "x", "status"}, `-retry-for wants a duration with its unit (500ms, 10s, 2m), not "x"`},
		"retry-for after":      {e, []string{"status", "-retry-for", "soon"}, `-retry-for wants a duration`},
		"weight zero":          {e, []string{"role", "set", "u-eng", "-weight", "0"}, "-weight 0: want a number above 0"},
		"lending limit":        {e, []string{"role", "set", "u-eng", "-lending-limit", "cpus"}, "-lending-limit"},
		"missing -agent":       {e, []string{"reservation", "set", "u-r", "-role", "db", "-resources", "cpus=1"}, "reservation set needs -agent"},
		"missing -resources":   {e, []string{"reservation", "set", "u-r", "-agent", "a", "-role", "db"}, "reservation set needs -resources"},
		"missing all three":    {e, []string{"reservation", "set", "u-r"}, "reservation set needs -agent, -role and -resources"},
		"bad reservation name": {e, []string{"reservation", "get", "a/b"}, `reservation name "a/b" must be letters, digits and _ . : @ -`},
		"qps zero":             {e, []string{"ratelimit", "set", "u-p", "-qps", "0"}, "-qps 0: want a number above 0"},
		"negative burst":       {e, []string{"ratelimit", "default", "set", "-burst", "-1"}, "-burst -1: must not be negative"},
		"bad label":            {e, []string{"ratelimit", "get", "u-p", "-label", "a b"}, "-label"},
		"bad state":            {e, []string{"task", "list", "-state", "RUNNING,DONE"}, "TASK_DONE is not a task state"},
		"audit interval":       {e, []string{"audit", "-follow", "-interval", "0s"}, "-interval 0s"},
		"empty address":        {env{EnvAddress: " , "}, []string{"quota", "list"}, "names no server"},
		"bad address":          {env{EnvAddress: "127.0.0.1:5050"}, []string{"quota", "list"}, "want http://host:port"},
		"token file missing":   {e, []string{"-token-file", missingFile, "quota", "list"}, "-token-file: open " + missingFile},
		"token file empty":     {e, []string{"-token-file", emptyFile, "quota", "list"}, "-token-file: " + emptyFile + " is empty"},
		"token file from env":  {env{EnvAddress: e[EnvAddress], EnvTokenFile: missingFile}, []string{"quota", "list"}, EnvTokenFile},
		"CA file missing":      {e, []string{"-ca-file", missingFile, "quota", "list"}, "-ca-file"},
		"key without cert":     {e, []string{"-client-key", junkFile, "quota", "list"}, "a client key needs its certificate"},
		"restore missing file": {e, []string{"snapshot", "restore", missingFile}, "no such file"},
		"save into no dir":     {e, []string{"snapshot", "save", filepath.Join(missingFile, "x.snap")}, "no such file"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			msg := fails(t, ExitUsage, tc.env, tc.args...)
			if !strings.Contains(msg, tc.want) {
				t.Errorf("stderr %q does not say %q", msg, tc.want)
			}
			if !strings.Contains(msg, "Hint: run 'allot") || !strings.Contains(msg, " -h' for usage") {
				t.Errorf("stderr %q does not point at -h", msg)
			}
			// The parser's and the name checks' own words stay out.
			for _, leak := range []string{"strconv.", "time: ", "Required flag", "must match", "^", "$"} {
				if strings.Contains(msg, leak) {
					t.Errorf("stderr %q shows the internals' words %q", msg, leak)
				}
			}
		})
	}

	// None of them reached the cluster.
	if _, err := cl.Quota(context.Background(), "u-eng", api.ReadOptions{}); !api.IsNotFound(err) {
		t.Errorf("quota u-eng after the usage errors: %v, want not found", err)
	}
	if r, err := cl.Role(context.Background(), "u-eng", api.ReadOptions{}); err != nil || r.Version != 0 {
		t.Errorf("role u-eng after the usage errors: %+v, %v, want never configured", r, err)
	}
}

// The guide (templates/guides/cli.md, copied to docs/guides/cli.md) names
// every command and flag, and every exit code: users cannot see this code.
func TestGuideCoversEveryCommandAndFlag(t *testing.T) {
	root, err := os.ReadFile(filepath.Join("..", "..", "..", "templates", "guides", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "guides", "cli.md"))
	if err != nil || string(docs) != string(root) {
		t.Errorf("docs/guides/cli.md is not a copy of templates/guides/cli.md (%v): run make docs", err)
	}
	guide := string(root)
	var walk func(path string, cmd *cli.Command)
	walk = func(path string, cmd *cli.Command) {
		for _, f := range cmd.Flags {
			name := f.Names()[0]
			if name != "help" && name != "version" && !strings.Contains(guide, "`-"+name) && !strings.Contains(guide, " -"+name) {
				t.Errorf("the guide does not mention %s -%s", path, name)
			}
		}
		for _, sub := range cmd.Commands {
			if !strings.Contains(guide, sub.Name) {
				t.Errorf("the guide does not mention %s %s", path, sub.Name)
			}
			walk(path+" "+sub.Name, sub)
		}
	}
	walk("allot", (&app{}).root("test"))
	for code := ExitOK; code <= ExitUnavailable; code++ {
		if !strings.Contains(guide, "| "+strconv.Itoa(code)+" | ") {
			t.Errorf("the guide's exit code table lacks %d", code)
		}
	}
}
