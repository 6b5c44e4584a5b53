package commands

import (
	"context"

	"github.com/urfave/cli/v3"

	"github.com/allot/allot/allot/internal/output"
	"github.com/allot/allot/masterd/api"
)

func (a *app) quotaCommand() *cli.Command {
	return &cli.Command{
		Name:  "quota",
		Usage: "list, show, set and delete roles' quotas (guarantees and limits)",
		Commands: []*cli.Command{
			{
				Name:        "list",
				Usage:       "list every quota",
				UsageText:   "allot quota list [-json]",
				Description: "Example:\n  allot quota list",
				Flags:       readFlags(),
				Action:      a.quotaList,
			},
			{
				Name:        "get",
				Usage:       "show one role's quota",
				ArgsUsage:   "ROLE",
				UsageText:   "allot quota get [-json] ROLE",
				Description: "Example:\n  allot quota get eng/ml",
				Flags:       readFlags(),
				Action:      a.quotaGet,
			},
			{
				Name:      "set",
				Usage:     "set a role's guarantees and limits (replaces the whole quota)",
				ArgsUsage: "ROLE",
				UsageText: "allot quota set [-guarantee RES] [-limit RES] [-force] [-dry-run] [-if-match VERSION] [-json] ROLE",
				Description: "The quota becomes exactly what the flags say: a resource left out of -limit\n" +
					"has no limit, one left out of -guarantee no guarantee. Guarantees must fit the\n" +
					"admitted agents and limits the current consumption, unless -force.\n\n" +
					"Examples:\n" +
					"  allot quota set eng/ml -guarantee cpus=2,mem=1024 -limit cpus=4\n" +
					"  allot quota set eng/ml -limit cpus=2 -dry-run    # what would be rescinded, who is over",
				Flags: writeFlags(
					&cli.StringFlag{Name: "guarantee", Usage: "what the role can always get, as `RES`: cpus=2,mem=1024"},
					&cli.StringFlag{Name: "limit", Usage: "what the role may never exceed, as `RES`: cpus=4 (a resource left out has no limit)"},
					&cli.BoolFlag{Name: "force", Usage: "store it even past the agents' capacity or below the current consumption"},
				),
				Action: a.quotaSet,
			},
			{
				Name:      "delete",
				Usage:     "remove a role's quota",
				ArgsUsage: "ROLE",
				UsageText: "allot quota delete [-dry-run] [-if-match VERSION] ROLE",
				Description: "Example:\n" +
					"  allot quota delete eng/ml -if-match 42",
				Flags:  writeFlags(),
				Action: a.quotaDelete,
			},
		},
	}
}

func (a *app) quotaList(ctx context.Context, cmd *cli.Command) error {
	if _, err := args(cmd); err != nil {
		return err
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	quotas, err := c.Quotas(ctx, readOptions(cmd))
	if err != nil {
		return err
	}
	return a.show(cmd, api.QuotaList{Quotas: nonNil(quotas)}, func() error {
		t := output.NewTable(a.stdout, "ROLE", "GUARANTEES", "LIMITS", "VERSION")
		for _, q := range quotas {
			t.Row(q.Role, output.Resources(q.Guarantees), output.Resources(q.Limits), a.version(q.Version))
		}
		return t.Flush()
	})
}

func (a *app) quotaGet(ctx context.Context, cmd *cli.Command) error {
	role, err := roleArg(cmd)
	if err != nil {
		return err
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	q, err := c.Quota(ctx, role, readOptions(cmd))
	if err != nil {
		return err
	}
	return a.show(cmd, q, func() error { return a.showQuota(q) })
}

func (a *app) showQuota(q *api.Quota) error {
	return output.Fields(a.stdout,
		"Role", q.Role,
		"Guarantees", output.Resources(q.Guarantees),
		"Limits", output.Resources(q.Limits),
		"Version", a.version(q.Version))
}

func (a *app) quotaSet(ctx context.Context, cmd *cli.Command) error {
	role, err := roleArg(cmd)
	if err != nil {
		return err
	}
	if !cmd.IsSet("guarantee") && !cmd.IsSet("limit") {
		// The quota becomes what the flags say: with neither, it would be
		// wiped, which is what quota delete is for.
		return usageErrorf(cmd, "quota set needs -guarantee or -limit (or both); to remove the quota, run allot quota delete %s", role)
	}
	req := api.QuotaRequest{Guarantees: api.Resources{}, Limits: api.Resources{}, Force: cmd.Bool("force")}
	if cmd.IsSet("guarantee") {
		if req.Guarantees, err = parseResources(cmd, "guarantee"); err != nil {
			return err
		}
	}
	if cmd.IsSet("limit") {
		if req.Limits, err = parseResources(cmd, "limit"); err != nil {
			return err
		}
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	return put(ctx, a, cmd, c, api.QuotaPath(role), req,
		func() (*api.Quota, error) { return c.PutQuota(ctx, role, req, writeOptions(cmd)) }, a.showQuota)
}

func (a *app) quotaDelete(ctx context.Context, cmd *cli.Command) error {
	role, err := roleArg(cmd)
	if err != nil {
		return err
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	return remove(ctx, a, cmd, c, api.QuotaPath(role), "the quota of role "+role,
		func() error { return c.DeleteQuota(ctx, role, writeOptions(cmd)) }, a.showQuota)
}

// nonNil makes an empty list print as [] rather than null, as the API
// answers it.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
