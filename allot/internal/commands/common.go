package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/allot/allot/allot/internal/output"
	"github.com/allot/allot/masterd/api"
)

// readFlags are those of a read, writeFlags those of a write: -json on
// both, -dry-run and -if-match on writes. urfave keeps a flag's parsed value
// in the flag itself, so every command gets its own.
func readFlags(extra ...cli.Flag) []cli.Flag {
	return append(extra, &cli.BoolFlag{Name: "json", Usage: "print the API's JSON instead of a table"})
}

func writeFlags(extra ...cli.Flag) []cli.Flag {
	return readFlags(append(extra,
		&cli.BoolFlag{
			Name: "dry-run",
			Usage: "store nothing: print the object the write would store (or remove) and its effects " +
				"(rescinded offers, over-limit, warnings, evictions)",
		},
		&cli.Uint64Flag{
			Name:        "if-match",
			Usage:       "write only if the object is at this `VERSION` (else exit 4)",
			HideDefault: true,
		})...)
}

// args checks that the command got exactly the positional arguments named
// in its ArgsUsage and returns them.
func args(cmd *cli.Command, names ...string) ([]string, error) {
	got := cmd.Args().Slice()
	switch {
	case len(got) < len(names):
		return nil, usageErrorf(cmd, "%s needs %s", cmd.FullName(), strings.Join(names[len(got):], " "))
	case len(got) > len(names):
		return nil, usageErrorf(cmd, "%s takes %d argument(s), got %q", cmd.FullName(), len(names), got)
	}
	for i, v := range got {
		if strings.TrimSpace(v) == "" {
			return nil, usageErrorf(cmd, "%s must not be empty", names[i])
		}
	}
	return got, nil
}

// parseResources reads a resources flag: "cpus=2,mem=1024". agentd's
// spelling, "cpus:2;mem:1024", is accepted too. Names and values are
// checked as the API checks them, so a typo never reaches the cluster.
func parseResources(cmd *cli.Command, flag string) (api.Resources, error) {
	s := cmd.String(flag)
	if strings.TrimSpace(s) == "" {
		return nil, usageErrorf(cmd, "-%s is empty: want name=value[,name=value…], e.g. cpus=2,mem=1024", flag)
	}
	r, err := api.ParseResources(strings.NewReplacer("=", ":", ",", ";").Replace(s))
	if err != nil {
		// ParseResources speaks its own syntax; name the flag and ours.
		msg := plainName(strings.NewReplacer("name:value", "name=value", "resources: ", "").Replace(err.Error()), resourceRule)
		return nil, usageErrorf(cmd, "-%s %q: %s", flag, s, msg)
	}
	return r, nil
}

// optionalResources is parseResources for a flag that may be left out (nil).
func optionalResources(cmd *cli.Command, flag string) (api.Resources, error) {
	if !cmd.IsSet(flag) {
		return nil, nil
	}
	return parseResources(cmd, flag)
}

// readOptions are the global -stale of a read.
func readOptions(cmd *cli.Command) api.ReadOptions {
	return api.ReadOptions{Stale: cmd.Bool("stale")}
}

// noStaleRead refuses -stale for a read of the leader's live state
// (frameworks, tasks), which only the leader has.
func noStaleRead(cmd *cli.Command) error {
	if cmd.Bool("stale") {
		return usageErrorf(cmd, "%s reads the leader's live state, which no other server has: it takes no -stale",
			strings.TrimPrefix(cmd.FullName(), "allot "))
	}
	return nil
}

// writeOptions are the -if-match of a write.
func writeOptions(cmd *cli.Command) api.WriteOptions {
	return api.WriteOptions{IfMatch: cmd.Uint64("if-match")}
}

// dryRun asks the cluster what the write would do, with its -if-match, and
// stores nothing. A write that would be refused returns that refusal.
func dryRun(ctx context.Context, c *api.Client, cmd *cli.Command, method, path string, body any) (*api.DryRun, error) {
	headers := http.Header{}
	if v := cmd.Uint64("if-match"); v != 0 {
		headers.Set("If-Match", strconv.FormatUint(v, 10))
	}
	var out api.DryRun
	_, err := c.Do(ctx, api.Request{Method: method, Path: path, Body: body,
		Query: url.Values{"dry_run": {"true"}}, Headers: headers}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// printDryRun shows a dry run: the object as show would print it (the one
// a PUT would store, or the one a DELETE would remove), then the effects.
// -json prints the API's answer.
func (a *app) printDryRun(cmd *cli.Command, dr *api.DryRun, method string, object any, show func(any) error) error {
	if cmd.Bool("json") {
		return output.JSON(a.stdout, dr)
	}
	if method == http.MethodDelete {
		fmt.Fprintln(a.stdout, "Dry run: nothing was changed. The delete would remove:")
	} else {
		fmt.Fprintln(a.stdout, "Dry run: nothing was changed. The write would store:")
		a.storing = true
		defer func() { a.storing = false }()
	}
	if len(dr.Object) > 0 && string(dr.Object) != "null" {
		if err := json.Unmarshal(dr.Object, object); err != nil {
			return fmt.Errorf("decode the dry run's object: %w", err)
		}
		if err := show(object); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(a.stdout, "(nothing)")
	}
	fmt.Fprintln(a.stdout)
	return a.printEffects(dr.Effects)
}

func (a *app) printEffects(e api.Effects) error {
	fmt.Fprintln(a.stdout, "Effects:")
	t := output.NewTable(a.stdout)
	t.Row("  Rescinded offers", strconv.Itoa(e.RescindedOffers))
	for _, role := range sortedKeys(e.OverLimit) {
		t.Row("  Over limit", role+": "+output.Resources(e.OverLimit[role]))
	}
	for _, w := range e.Warnings {
		t.Row("  Warning", w)
	}
	for _, ev := range e.Evictions {
		t.Row("  Eviction", fmt.Sprintf("task %s of framework %s on agent %s (role %s): %s",
			ev.TaskID, ev.FrameworkID, ev.AgentID, ev.Role, output.Resources(ev.Resources)))
	}
	return t.Flush()
}

// notStoredYet is the version of the object a dry run of a write shows:
// the answer holds the version stored now, and the write would give it
// another.
const notStoredYet = "set when stored"

// version shows an object's version: - for one never stored (a role never
// configured is at version 0), notStoredYet in a dry run of a write.
func (a *app) version(v uint64) string {
	switch {
	case a.storing:
		return notStoredYet
	case v == 0:
		return output.None
	}
	return strconv.FormatUint(v, 10)
}

// show prints v as JSON with -json, else through text.
func (a *app) show(cmd *cli.Command, v any, text func() error) error {
	if cmd.Bool("json") {
		return output.JSON(a.stdout, v)
	}
	return text()
}

// removed confirms a delete, as nomad and consul do.
func (a *app) removed(cmd *cli.Command, what string) error {
	if cmd.Bool("json") {
		return nil
	}
	_, err := fmt.Fprintf(a.stdout, "Removed %s.\n", what)
	return err
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// put stores an object with put, or with -dry-run asks what storing body
// at path would do, and shows the result as show shows the object.
func put[T any](ctx context.Context, a *app, cmd *cli.Command, c *api.Client, path string, body any,
	put func() (*T, error), show func(*T) error) error {
	if cmd.Bool("dry-run") {
		dr, err := dryRun(ctx, c, cmd, http.MethodPut, path, body)
		if err != nil {
			return err
		}
		return a.printDryRun(cmd, dr, http.MethodPut, new(T), func(v any) error { return show(v.(*T)) })
	}
	obj, err := put()
	if err != nil {
		return err
	}
	return a.show(cmd, obj, func() error { return show(obj) })
}

// remove deletes an object with del, or with -dry-run asks what deleting
// path would do. what names the object in the confirmation.
func remove[T any](ctx context.Context, a *app, cmd *cli.Command, c *api.Client, path, what string,
	del func() error, show func(*T) error) error {
	if cmd.Bool("dry-run") {
		dr, err := dryRun(ctx, c, cmd, http.MethodDelete, path, nil)
		if err != nil {
			return err
		}
		return a.printDryRun(cmd, dr, http.MethodDelete, new(T), func(v any) error { return show(v.(*T)) })
	}
	if err := del(); err != nil {
		return err
	}
	return a.removed(cmd, what)
}

// validRole checks a ROLE argument as the API would, so that a typo is a
// usage error and never reaches the cluster.
func validRole(cmd *cli.Command, role string) error {
	if err := api.ValidateRole(role); err != nil {
		return usageErrorf(cmd, "%s", plainName(err.Error(), roleRule))
	}
	return nil
}

// validName checks a reservation name or principal as the API would.
func validName(cmd *cli.Command, kind, name string) error {
	if err := api.ValidateName(kind, name); err != nil {
		return usageErrorf(cmd, "%s", plainName(err.Error(), nameRule))
	}
	return nil
}
