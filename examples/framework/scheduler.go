package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/allot/allot/masterd/api"
)

// failoverTimeout is how long the master keeps the framework and its tasks
// while no session is open. A master failover ends the stream; the
// framework subscribes again with its id within this time and keeps its
// tasks.
const failoverTimeout = time.Minute

// declineRefuse is how long a declined agent's resources are kept from the
// framework: short, since a task may end and free room on an agent whose
// offer was too small a moment ago.
var declineRefuse = 1.0 // seconds

// framework runs cfg.tasks tasks, each once, and follows them until they
// end. It is driven by one goroutine: the event loop.
type framework struct {
	cfg   config
	out   io.Writer
	width int // of the longest task id, to align the status lines

	launched   []string                  // task ids, in launch order
	statuses   map[string]api.TaskStatus // latest status of each launched task
	hostnames  map[string]string         // agent id → hostname, from offers
	suppressed bool
}

func newFramework(cfg config, out io.Writer) *framework {
	cfg.info.FailoverTimeoutSeconds = failoverTimeout.Seconds()
	return &framework{
		cfg:       cfg,
		out:       out,
		width:     len(taskID(cfg.info.Name, cfg.tasks-1)),
		statuses:  map[string]api.TaskStatus{},
		hostnames: map[string]string{},
	}
}

func taskID(frameworkName string, n int) string { return fmt.Sprintf("%s-%d", frameworkName, n) }

// run subscribes, runs the tasks until they all ended (or ctx ends), prints
// a summary and tears the framework down.
func (f *framework) run(ctx context.Context, client *api.SchedulerClient) error {
	sessions := newSubscriber(ctx)
	defer sessions.close()

	// 1. SUBSCRIBE. The answer is the event stream; its first event,
	// SUBSCRIBED, gives the framework its id.
	session, err := sessions.open(func(life context.Context) (*api.SchedulerSession, error) {
		return client.Subscribe(life, f.cfg.info)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(f.out, "subscribed as framework %s (%s, role %s)\n", session.FrameworkID(), f.cfg.info.Name, f.cfg.info.Roles[0])

	session, err = f.eventLoop(ctx, sessions, session)
	unfinished := f.summary()

	// 4. TEARDOWN, whatever happened: it kills the tasks still running, and
	// the master forgets the framework (it would otherwise keep it for
	// failoverTimeout). ctx may have ended; the call gets its own time.
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if terr := session.Teardown(tctx); terr != nil {
		return errors.Join(err, fmt.Errorf("framework %s: %w", session.FrameworkID(), terr))
	}
	fmt.Fprintf(f.out, "framework %s torn down\n", session.FrameworkID())
	if err == nil && unfinished > 0 {
		err = fmt.Errorf("%d of %d tasks did not finish", unfinished, f.cfg.tasks)
	}
	return err
}

// eventLoop handles the session's events until every task ended. It
// returns the session it ended with.
func (f *framework) eventLoop(ctx context.Context, sessions *subscriber, s *api.SchedulerSession) (*api.SchedulerSession, error) {
	for !f.allEnded() {
		select {
		case <-ctx.Done():
			return s, context.Cause(ctx)
		case e, ok := <-s.Events():
			if !ok {
				// The stream ended: the leading master went away. Subscribe
				// again with the framework's id; its tasks live on.
				fmt.Fprintf(f.out, "event stream ended (%v): subscribing again\n", s.Err())
				next, err := sessions.open(s.Resubscribe)
				if err != nil {
					return s, err
				}
				s = next
				continue
			}
			if err := f.handle(ctx, s, e); err != nil {
				return s, err
			}
		}
	}
	return s, nil
}

func (f *framework) handle(ctx context.Context, s *api.SchedulerSession, e api.Event) error {
	switch e.Type {
	case api.EventOffers:
		return f.offers(ctx, s, e.Offers.Offers)
	case api.EventUpdate:
		return f.update(ctx, s, e.Update.Status)
	case api.EventFailure:
		// The agent is gone; its tasks get UPDATEs of their own.
		fmt.Fprintf(f.out, "agent %s failed\n", f.agent(e.Failure.AgentID))
	case api.EventError:
		return fmt.Errorf("the master ended the session: %s", e.Error.Message)
	case api.EventRescind, api.EventHeartbeat:
		// Every offer is answered as it comes, so a rescinded one is
		// already dealt with; heartbeats only keep the stream alive.
	}
	return nil
}

// offers answers each offer at once (2.): ACCEPT with the tasks that fit,
// or DECLINE.
func (f *framework) offers(ctx context.Context, s *api.SchedulerSession, offers []api.Offer) error {
	for _, o := range offers {
		f.hostnames[o.AgentID] = o.Hostname
		tasks := f.plan(o)
		if len(tasks) == 0 {
			if err := s.Decline(ctx, []string{o.ID}, &api.Filters{RefuseSeconds: &declineRefuse}); err != nil {
				return err
			}
			continue
		}
		// What the tasks leave of the offer goes back to the master.
		launch := api.Operation{Type: api.OperationLaunch, Launch: &api.Launch{Tasks: tasks}}
		if err := s.Accept(ctx, []string{o.ID}, []api.Operation{launch}, nil); err != nil {
			return err
		}
		ids := make([]string, len(tasks))
		for i, t := range tasks {
			ids[i] = t.TaskID
		}
		fmt.Fprintf(f.out, "launching %s on %s\n", strings.Join(ids, ", "), o.Hostname)
	}
	if len(f.launched) == f.cfg.tasks && !f.suppressed {
		// Every task is launched: stop the offers rather than decline them
		// one by one.
		if err := s.Suppress(ctx); err != nil {
			return err
		}
		f.suppressed = true
	}
	return nil
}

// plan picks the tasks that fit in an offer, among those not launched yet.
func (f *framework) plan(o api.Offer) []api.TaskInfo {
	free := api.Resources{}
	for _, r := range o.Resources {
		free.Add(r.Scalars)
	}
	var tasks []api.TaskInfo
	for len(f.launched) < f.cfg.tasks && free.Contains(f.cfg.resources) {
		id := taskID(f.cfg.info.Name, len(f.launched))
		free.Subtract(f.cfg.resources)
		task := api.TaskInfo{
			TaskID:    id,
			Name:      id,
			AgentID:   o.AgentID,
			Resources: f.cfg.resources,
			Command:   &api.CommandInfo{Value: f.cfg.command},
		}
		if n := len(f.cfg.limits); n > 0 && len(f.cfg.limits[len(f.launched)%n]) > 0 {
			task.Limits = f.cfg.limits[len(f.launched)%n]
		}
		tasks = append(tasks, task)
		f.launched = append(f.launched, id)
		f.statuses[id] = api.TaskStatus{TaskID: id, AgentID: o.AgentID, State: api.TaskStaging}
	}
	return tasks
}

// update records a task's new state, then acknowledges it (3.): an agent
// resends an update until the acknowledgement reaches it, so acknowledge
// only what was handled.
func (f *framework) update(ctx context.Context, s *api.SchedulerSession, st api.TaskStatus) error {
	if last, ours := f.statuses[st.TaskID]; ours {
		resent := st.UUID != "" && st.UUID == last.UUID
		f.statuses[st.TaskID] = st
		if !resent {
			f.printStatus(st)
		}
	}
	return s.AcknowledgeStatus(ctx, st)
}

func (f *framework) printStatus(st api.TaskStatus) {
	line := fmt.Sprintf("%-*s  %-16s  %s", f.width, st.TaskID, st.State, f.agent(st.AgentID))
	detail := st.Message
	if st.Reason != "" {
		detail = strings.TrimSuffix(st.Reason+": "+st.Message, ": ")
	}
	if detail != "" {
		line += "  " + detail
	}
	fmt.Fprintln(f.out, line)
}

// agent names an agent by its hostname when an offer told it.
func (f *framework) agent(id string) string {
	return cmp.Or(f.hostnames[id], id)
}

func (f *framework) allEnded() bool {
	if len(f.launched) < f.cfg.tasks {
		return false
	}
	for _, st := range f.statuses {
		if !api.IsTerminal(st.State) {
			return false
		}
	}
	return true
}

// summary prints how the tasks ended and returns how many did not finish.
func (f *framework) summary() (unfinished int) {
	finished, failed := 0, 0
	for _, st := range f.statuses {
		switch {
		case st.State == api.TaskFinished:
			finished++
		case api.IsTerminal(st.State):
			failed++
		}
	}
	line := fmt.Sprintf("%d of %d tasks finished, %d failed", finished, f.cfg.tasks, failed)
	if rest := f.cfg.tasks - finished - failed; rest > 0 {
		line += fmt.Sprintf(", %d did not end", rest)
	}
	fmt.Fprintln(f.out, line)
	return f.cfg.tasks - finished
}
