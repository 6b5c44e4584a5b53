package commands

import (
	"context"
	"math"
	"strconv"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/allot/allot/allot/internal/output"
	"github.com/allot/allot/masterd/api"
)

func (a *app) roleCommand() *cli.Command {
	return &cli.Command{
		Name:  "role",
		Usage: "list and show roles (weight, quota, allocation), set and reset their weight and lending limit",
		Commands: []*cli.Command{
			{
				Name:        "list",
				Usage:       "list every known role with its weight, quota and allocation",
				UsageText:   "allot role list [-json]",
				Description: "Example:\n  allot role list",
				Flags:       readFlags(),
				Action:      a.roleList,
			},
			{
				Name:        "get",
				Usage:       "show one role: weight, lending limit, quota, allocated, reserved, offered, lent, frameworks",
				ArgsUsage:   "ROLE",
				UsageText:   "allot role get [-json] ROLE",
				Description: "Example:\n  allot role get eng",
				Flags:       readFlags(),
				Action:      a.roleGet,
			},
			{
				Name:      "set",
				Usage:     "set a role's weight and lending limit (replaces both)",
				ArgsUsage: "ROLE",
				UsageText: "allot role set [-weight W] [-lending-limit RES] [-dry-run] [-if-match VERSION] [-json] ROLE",
				Description: "The role's policy becomes exactly what the flags say: without -weight the\n" +
					"weight is 1; without -lending-limit its idle reservations lend without a cap.\n" +
					"A lending limit caps every resource, one it leaves out at 0: -lending-limit\n" +
					"cpus=0 lends nothing. Lowering it may evict revocable tasks (-dry-run lists them).\n\n" +
					"Examples:\n" +
					"  allot role set eng -weight 2 -lending-limit cpus=1\n" +
					"  allot role set db -lending-limit cpus=0 -dry-run",
				Flags: writeFlags(
					&cli.FloatFlag{Name: "weight", Usage: "the role's `WEIGHT` in weighted DRF, above 0 (default: 1)", HideDefault: true},
					&cli.StringFlag{Name: "lending-limit", Usage: "the most the role's idle reservations lend as revocable, as `RES`: cpus=1,mem=512"},
				),
				Action: a.roleSet,
			},
			{
				Name:        "delete",
				Usage:       "reset a role's weight and lending limit to the defaults",
				ArgsUsage:   "ROLE",
				UsageText:   "allot role delete [-dry-run] [-if-match VERSION] ROLE",
				Description: "Example:\n  allot role delete eng",
				Flags:       writeFlags(),
				Action:      a.roleDelete,
			},
		},
	}
}

func (a *app) roleList(ctx context.Context, cmd *cli.Command) error {
	if _, err := args(cmd); err != nil {
		return err
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	roles, err := c.Roles(ctx, readOptions(cmd))
	if err != nil {
		return err
	}
	return a.show(cmd, api.RoleList{Roles: nonNil(roles)}, func() error {
		t := output.NewTable(a.stdout, "ROLE", "WEIGHT", "GUARANTEES", "LIMITS", "ALLOCATED", "RESERVED", "LENDING LIMIT", "FRAMEWORKS")
		for _, r := range roles {
			var guarantees, limits api.Resources
			if r.Quota != nil {
				guarantees, limits = r.Quota.Guarantees, r.Quota.Limits
			}
			t.Row(r.Role, output.Number(r.Weight), output.Resources(guarantees), output.Resources(limits),
				output.Resources(r.Allocated), output.Resources(r.Reserved), lendingLimit(r.LendingLimit),
				strconv.Itoa(len(r.Frameworks)))
		}
		return t.Flush()
	})
}

// lendingLimit tells "no cap" (nil) from a cap of nothing ({}).
func lendingLimit(l api.Resources) string {
	switch {
	case l == nil:
		return "no cap"
	case len(l) == 0:
		return "lends nothing"
	}
	return output.Resources(l)
}

func (a *app) roleGet(ctx context.Context, cmd *cli.Command) error {
	role, err := roleArg(cmd)
	if err != nil {
		return err
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	r, err := c.Role(ctx, role, readOptions(cmd))
	if err != nil {
		return err
	}
	return a.show(cmd, r, func() error { return a.showRole(r) })
}

func (a *app) showRole(r *api.Role) error {
	guarantees, limits := output.None, output.None
	if r.Quota != nil {
		guarantees, limits = output.Resources(r.Quota.Guarantees), output.Resources(r.Quota.Limits)
	}
	return output.Fields(a.stdout,
		"Role", r.Role,
		"Weight", output.Number(r.Weight),
		"Lending limit", lendingLimit(r.LendingLimit),
		"Guarantees", guarantees,
		"Limits", limits,
		"Allocated", output.Resources(r.Allocated),
		"Reserved", output.Resources(r.Reserved),
		"Offered", output.Resources(r.Offered),
		"Revocable allocated", output.Resources(r.RevocableAllocated),
		"Lent", output.Resources(r.Lent),
		"Frameworks", output.OrNone(strings.Join(r.Frameworks, ", ")),
		"Version", a.version(r.Version))
}

func (a *app) roleSet(ctx context.Context, cmd *cli.Command) error {
	role, err := roleArg(cmd)
	if err != nil {
		return err
	}
	var req api.RoleRequest
	if cmd.IsSet("weight") {
		w := cmd.Float("weight")
		if !(w > 0) || math.IsInf(w, 0) {
			return usageErrorf(cmd, "-weight %v: want a number above 0", w)
		}
		req.Weight = &w
	}
	if req.LendingLimit, err = optionalResources(cmd, "lending-limit"); err != nil {
		return err
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	return put(ctx, a, cmd, c, api.RolePath(role), req,
		func() (*api.Role, error) { return c.PutRole(ctx, role, req, writeOptions(cmd)) }, a.showRole)
}

func (a *app) roleDelete(ctx context.Context, cmd *cli.Command) error {
	role, err := roleArg(cmd)
	if err != nil {
		return err
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	return remove(ctx, a, cmd, c, api.RolePath(role), "the weight and lending limit of role "+role,
		func() error { return c.DeleteRole(ctx, role, writeOptions(cmd)) }, a.showRole)
}

// roleArg is the one ROLE argument, checked.
func roleArg(cmd *cli.Command) (string, error) {
	in, err := args(cmd, "ROLE")
	if err != nil {
		return "", err
	}
	return in[0], validRole(cmd, in[0])
}
