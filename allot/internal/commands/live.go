package commands

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/allot/allot/allot/internal/output"
	"github.com/allot/allot/masterd/api"
)

// The cluster's live state: agents, frameworks and tasks, read-only.

func (a *app) agentCommand() *cli.Command {
	return &cli.Command{
		Name:  "agent",
		Usage: "list and show the admitted agents",
		Commands: []*cli.Command{
			{
				Name:        "list",
				Usage:       "list every admitted agent with its resources, allocation and connection",
				UsageText:   "allot agent list [-json]",
				Description: "Example:\n  allot agent list",
				Flags:       readFlags(),
				Action:      a.agentList,
			},
			{
				Name:        "get",
				Usage:       "show one agent, by id or by name",
				ArgsUsage:   "ID|NAME",
				UsageText:   "allot agent get [-json] ID|NAME",
				Description: "Example:\n  allot agent get node-1",
				Flags:       readFlags(),
				Action:      a.agentGet,
			},
		},
	}
}

func (a *app) agentList(ctx context.Context, cmd *cli.Command) error {
	if _, err := args(cmd); err != nil {
		return err
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	agents, err := c.Agents(ctx, readOptions(cmd))
	if err != nil {
		return err
	}
	return a.show(cmd, api.AgentList{Agents: nonNil(agents)}, func() error {
		t := output.NewTable(a.stdout, "ID", "NAME", "HOSTNAME", "CONNECTED", "RESOURCES", "ALLOCATED", "RESERVED", "REVOCABLE")
		for _, ag := range agents {
			t.Row(ag.ID, ag.Name, ag.Hostname, output.YesNo(ag.Connected), output.Resources(ag.Resources),
				output.Resources(ag.Allocated), output.Resources(ag.Reserved), output.Resources(ag.Revocable))
		}
		return t.Flush()
	})
}

func (a *app) agentGet(ctx context.Context, cmd *cli.Command) error {
	in, err := args(cmd, "ID|NAME")
	if err != nil {
		return err
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	ag, err := c.Agent(ctx, in[0], readOptions(cmd))
	if api.IsNotFound(err) {
		// Operators know agents by name (reservations name them so);
		// the API by id.
		ag, err = agentByName(ctx, c, in[0], readOptions(cmd), err)
	}
	if err != nil {
		return err
	}
	return a.show(cmd, ag, func() error {
		return output.Fields(a.stdout,
			"ID", ag.ID,
			"Name", ag.Name,
			"Hostname", ag.Hostname,
			"Connected", output.YesNo(ag.Connected),
			"Registered", formatTime(ag.RegisteredAt),
			"Resources", output.Resources(ag.Resources),
			"Allocated", output.Resources(ag.Allocated),
			"Reserved", output.Resources(ag.Reserved),
			"Revocable", output.Resources(ag.Revocable),
			"Revocable allocated", output.Resources(ag.RevocableAllocated),
			"Capabilities", output.OrNone(strings.Join(ag.Capabilities, ", ")),
			"Version", a.version(ag.Version))
	})
}

// agentByName finds the agent named name, or returns notFound.
func agentByName(ctx context.Context, c *api.Client, name string, opts api.ReadOptions, notFound error) (*api.Agent, error) {
	agents, err := c.Agents(ctx, opts)
	if err != nil {
		return nil, err
	}
	for _, ag := range agents {
		if ag.Name == name {
			return &ag, nil
		}
	}
	return nil, notFound
}

func (a *app) frameworkCommand() *cli.Command {
	return &cli.Command{
		Name:  "framework",
		Usage: "list the frameworks the leader knows",
		Commands: []*cli.Command{
			{
				Name:        "list",
				Usage:       "list the frameworks with their principal, roles, connection and allocation",
				UsageText:   "allot framework list [-json]",
				Description: "Example:\n  allot framework list",
				Flags:       readFlags(),
				Action:      a.frameworkList,
			},
		},
	}
}

func (a *app) frameworkList(ctx context.Context, cmd *cli.Command) error {
	if _, err := args(cmd); err != nil {
		return err
	}
	if err := noStaleRead(cmd); err != nil {
		return err
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	frameworks, err := c.Frameworks(ctx)
	if err != nil {
		return err
	}
	return a.show(cmd, api.FrameworkList{Frameworks: nonNil(frameworks)}, func() error {
		t := output.NewTable(a.stdout, "ID", "NAME", "PRINCIPAL", "ROLES", "CONNECTED", "ALLOCATED", "OFFERED", "CAPABILITIES")
		for _, f := range frameworks {
			t.Row(f.ID, f.Name, f.Principal, strings.Join(f.Roles, ","), output.YesNo(f.Connected),
				output.Resources(f.Allocated), output.Resources(f.Offered), strings.Join(f.Capabilities, ","))
		}
		return t.Flush()
	})
}

func (a *app) taskCommand() *cli.Command {
	return &cli.Command{
		Name:  "task",
		Usage: "list tasks with their requests and limits",
		Commands: []*cli.Command{
			{
				Name:      "list",
				Usage:     "list the leader's live tasks and the most recently ended ones",
				UsageText: "allot task list [-state STATE[,STATE…]] [-role ROLE] [-agent ID] [-json]",
				Description: "Requests and limits are shown side by side; an \"Infinity\" limit reads " + output.Infinity + ".\n\n" +
					"Examples:\n" +
					"  allot task list -state TASK_RUNNING,TASK_STAGING -role eng/ml\n" +
					"  allot task list -agent agent-node-1 -json",
				Flags: readFlags(
					&cli.StringFlag{Name: "state", Usage: "only tasks in one of these comma-separated `STATES` (TASK_RUNNING, TASK_FAILED, …)"},
					&cli.StringFlag{Name: "role", Usage: "only tasks of this `ROLE`"},
					&cli.StringFlag{Name: "agent", Usage: "only tasks on the agent with this `ID`"},
				),
				Action: a.taskList,
			},
		},
	}
}

func (a *app) taskList(ctx context.Context, cmd *cli.Command) error {
	if _, err := args(cmd); err != nil {
		return err
	}
	if err := noStaleRead(cmd); err != nil {
		return err
	}
	var f api.TaskFilter
	for _, s := range strings.Split(cmd.String("state"), ",") {
		if s = strings.ToUpper(strings.TrimSpace(s)); s == "" {
			continue
		}
		if !strings.HasPrefix(s, "TASK_") {
			s = "TASK_" + s // -state running reads as well
		}
		if !slices.Contains(api.TaskStates, s) {
			return usageErrorf(cmd, "-state: %s is not a task state (%s)", s, strings.Join(api.TaskStates, ", "))
		}
		f.States = append(f.States, s)
	}
	if f.Role = cmd.String("role"); f.Role != "" && f.Role != api.DefaultRole {
		if err := validRole(cmd, f.Role); err != nil {
			return err
		}
	}
	f.Agent = cmd.String("agent")
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	tasks, err := c.TasksWhere(ctx, f)
	if err != nil {
		return err
	}
	return a.show(cmd, api.TaskList{Tasks: nonNil(tasks)}, func() error {
		t := output.NewTable(a.stdout, "ID", "NAME", "STATE", "REASON", "ROLE", "AGENT", "REQUESTS", "LIMITS", "REVOCABLE")
		for _, task := range tasks {
			t.Row(task.TaskID, task.Name, task.State, task.Reason, task.Role, task.AgentID,
				output.Resources(task.Resources), output.Limits(task.Limits), output.YesNo(task.Revocable))
		}
		return t.Flush()
	})
}

// formatTime writes times in UTC, to the second, as RFC 3339: one form
// whatever the servers' and the caller's time zones.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return output.None
	}
	return t.UTC().Format(time.RFC3339)
}
