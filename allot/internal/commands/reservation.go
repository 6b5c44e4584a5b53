package commands

import (
	"context"

	"github.com/urfave/cli/v3"

	"github.com/allot/allot/allot/internal/output"
	"github.com/allot/allot/masterd/api"
)

func (a *app) reservationCommand() *cli.Command {
	return &cli.Command{
		Name:  "reservation",
		Usage: "list, show, set and delete reservations (an agent's resources held for a role)",
		Commands: []*cli.Command{
			{
				Name:        "list",
				Usage:       "list every reservation",
				UsageText:   "allot reservation list [-json]",
				Description: "Example:\n  allot reservation list",
				Flags:       readFlags(),
				Action:      a.reservationList,
			},
			{
				Name:        "get",
				Usage:       "show one reservation",
				ArgsUsage:   "NAME",
				UsageText:   "allot reservation get [-json] NAME",
				Description: "Example:\n  allot reservation get db-node-1",
				Flags:       readFlags(),
				Action:      a.reservationGet,
			},
			{
				Name:      "set",
				Usage:     "create or replace a reservation",
				ArgsUsage: "NAME",
				UsageText: "allot reservation set -agent NAME -role ROLE -resources RES [-force] [-dry-run] [-if-match VERSION] [-json] NAME",
				Description: "The agent (by name) must be admitted and its reservations must fit it; with\n" +
					"-force one that does not fit is stored as pending. Resources other roles' tasks\n" +
					"hold become reserved as they free up: nothing is killed.\n\n" +
					"Example:\n" +
					"  allot reservation set db-node-1 -agent node-1 -role db -resources cpus=1,mem=2048",
				Flags: writeFlags(
					&cli.StringFlag{Name: "agent", Usage: "the agent's `NAME` (as agentd -name gave it)", Required: true},
					&cli.StringFlag{Name: "role", Usage: "the `ROLE` the resources are held for", Required: true},
					&cli.StringFlag{Name: "resources", Usage: "what is held, as `RES`: cpus=1,mem=2048", Required: true},
					&cli.BoolFlag{Name: "force", Usage: "store it even if the agent's free capacity is short (status pending)"},
				),
				Action: a.reservationSet,
			},
			{
				Name:        "delete",
				Usage:       "remove a reservation",
				ArgsUsage:   "NAME",
				UsageText:   "allot reservation delete [-dry-run] [-if-match VERSION] NAME",
				Description: "Example:\n  allot reservation delete db-node-1",
				Flags:       writeFlags(),
				Action:      a.reservationDelete,
			},
		},
	}
}

func (a *app) reservationList(ctx context.Context, cmd *cli.Command) error {
	if _, err := args(cmd); err != nil {
		return err
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	list, err := c.Reservations(ctx, readOptions(cmd))
	if err != nil {
		return err
	}
	return a.show(cmd, api.ReservationList{Reservations: nonNil(list)}, func() error {
		t := output.NewTable(a.stdout, "NAME", "AGENT", "ROLE", "RESOURCES", "STATUS", "VERSION")
		for _, r := range list {
			t.Row(r.Name, r.Agent, r.Role, output.Resources(r.Resources), r.Status, a.version(r.Version))
		}
		return t.Flush()
	})
}

func (a *app) reservationGet(ctx context.Context, cmd *cli.Command) error {
	name, err := nameArg(cmd, "NAME", "reservation name")
	if err != nil {
		return err
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	r, err := c.Reservation(ctx, name, readOptions(cmd))
	if err != nil {
		return err
	}
	return a.show(cmd, r, func() error { return a.showReservation(r) })
}

func (a *app) showReservation(r *api.Reservation) error {
	return output.Fields(a.stdout,
		"Name", r.Name,
		"Agent", r.Agent,
		"Role", r.Role,
		"Resources", output.Resources(r.Resources),
		"Status", r.Status,
		"Version", a.version(r.Version))
}

func (a *app) reservationSet(ctx context.Context, cmd *cli.Command) error {
	name, err := nameArg(cmd, "NAME", "reservation name")
	if err != nil {
		return err
	}
	req := api.ReservationRequest{Agent: cmd.String("agent"), Role: cmd.String("role"), Force: cmd.Bool("force")}
	if err := validName(cmd, "-agent", req.Agent); err != nil {
		return err
	}
	if err := validRole(cmd, req.Role); err != nil {
		return err
	}
	if req.Resources, err = parseResources(cmd, "resources"); err != nil {
		return err
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	return put(ctx, a, cmd, c, api.ReservationPath(name), req,
		func() (*api.Reservation, error) { return c.PutReservation(ctx, name, req, writeOptions(cmd)) }, a.showReservation)
}

func (a *app) reservationDelete(ctx context.Context, cmd *cli.Command) error {
	name, err := nameArg(cmd, "NAME", "reservation name")
	if err != nil {
		return err
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	return remove(ctx, a, cmd, c, api.ReservationPath(name), "reservation "+name,
		func() error { return c.DeleteReservation(ctx, name, writeOptions(cmd)) }, a.showReservation)
}

// nameArg is the one argument of a command about a named object, checked
// as the API checks names of that kind.
func nameArg(cmd *cli.Command, arg, kind string) (string, error) {
	in, err := args(cmd, arg)
	if err != nil {
		return "", err
	}
	return in[0], validName(cmd, kind, in[0])
}
