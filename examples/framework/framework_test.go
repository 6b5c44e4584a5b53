package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/agentsim/fakemaster"
	"github.com/allot/allot/masterd/api"
)

// A long heartbeat interval: the fake master sends no heartbeats, and the
// client would take a silent stream for a dead one after five intervals.
const testHeartbeat = 60

// started is a framework running against a fake master.
type started struct {
	master *fakemaster.Master
	out    bytes.Buffer // read only after done
	err    error
	done   chan struct{}
}

func startFramework(t *testing.T, ctx context.Context, args ...string) *started {
	t.Helper()
	m := fakemaster.New(fakemaster.Options{HeartbeatIntervalSeconds: testHeartbeat})
	t.Cleanup(m.Close)
	cfg, err := parseFlags(append([]string{"-master", m.URL}, args...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	client, err := api.NewSchedulerClient(cfg.addresses, "")
	if err != nil {
		t.Fatal(err)
	}
	s := &started{master: m, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.err = newFramework(cfg, &s.out).run(ctx, client)
	}()
	return s
}

// wait waits for run to return.
func (s *started) wait(t *testing.T, ctx context.Context) error {
	t.Helper()
	select {
	case <-s.done:
		return s.err
	case <-ctx.Done():
		t.Fatalf("the framework did not return: %v", ctx.Err())
		return nil
	}
}

func (s *started) stream(t *testing.T, ctx context.Context, n int) *fakemaster.Stream {
	t.Helper()
	streams, err := s.master.WaitStreams(ctx, api.SchedulerPath, n)
	if err != nil {
		t.Fatal(err)
	}
	return streams[n-1]
}

func (s *started) send(t *testing.T, stream *fakemaster.Stream, e api.Event) {
	t.Helper()
	if err := s.master.Send(stream.ID, e); err != nil {
		t.Fatal(err)
	}
}

func (s *started) calls(t *testing.T, ctx context.Context, n int, callType string) []api.Call {
	t.Helper()
	calls, err := s.master.WaitCalls(ctx, n, func(c fakemaster.Call) bool { return c.Scheduler != nil && c.Scheduler.Type == callType })
	if err != nil {
		t.Fatalf("%s: %v", callType, err)
	}
	out := make([]api.Call, len(calls))
	for i, c := range calls {
		out[i] = *c.Scheduler
	}
	return out
}

// sent lists the calls of a type the master received, without waiting:
// for after run returned, as it returns once its calls were answered.
func (s *started) sent(callType string) []fakemaster.Call {
	return s.master.Calls(func(c fakemaster.Call) bool { return c.Scheduler != nil && c.Scheduler.Type == callType })
}

func offer(id, agent string, cpus float64) api.Offer {
	return api.Offer{ID: id, AgentID: agent, Hostname: "host-" + agent,
		Resources: []api.OfferResource{{Role: "*", Scalars: api.Resources{"cpus": cpus, "mem": 1024}}}}
}

func update(task, agent, state, uuid string) api.Event {
	return api.Event{Type: api.EventUpdate, Update: &api.Update{Status: api.TaskStatus{
		TaskID: task, AgentID: agent, State: state, UUID: uuid, Timestamp: time.Now()}}}
}

func TestRunsTasksOnOffersAndTearsDownWhenAllFinished(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := startFramework(t, ctx, "-name", "hello", "-tasks", "3", "-cpus", "1", "-mem", "64", "-command", "sleep 1")
	stream := f.stream(t, ctx, 1)
	info := stream.Subscribe.Subscribe.FrameworkInfo
	if info.Name != "hello" || !slices.Equal(info.Roles, []string{"*"}) || info.FailoverTimeoutSeconds != failoverTimeout.Seconds() {
		t.Fatalf("SUBSCRIBE framework_info = %+v", info)
	}

	// Two tasks fit on a1, none on a2, the third on a3.
	f.send(t, stream, api.Event{Type: api.EventOffers, Offers: &api.Offers{Offers: []api.Offer{
		offer("o1", "a1", 2), offer("o2", "a2", 0.5), offer("o3", "a3", 4)}}})
	accepts := f.calls(t, ctx, 2, api.CallAccept)
	launched := map[string][]string{} // offer → task ids
	for _, c := range accepts {
		if len(c.Accept.OfferIDs) != 1 || len(c.Accept.Operations) != 1 || c.Accept.Operations[0].Type != api.OperationLaunch {
			t.Fatalf("ACCEPT %+v: want one offer and one LAUNCH", c.Accept)
		}
		for _, task := range c.Accept.Operations[0].Launch.Tasks {
			if task.Command == nil || task.Command.Value != "sleep 1" || task.Resources["cpus"] != 1 || task.Resources["mem"] != 64 {
				t.Errorf("task %+v: want 'sleep 1' with cpus 1, mem 64", task)
			}
			launched[c.Accept.OfferIDs[0]] = append(launched[c.Accept.OfferIDs[0]], task.TaskID+"@"+task.AgentID)
		}
	}
	if want := (map[string][]string{"o1": {"hello-0@a1", "hello-1@a1"}, "o3": {"hello-2@a3"}}); !maps.EqualFunc(launched, want, slices.Equal[[]string]) {
		t.Fatalf("launched %v, want %v", launched, want)
	}
	decline := f.calls(t, ctx, 1, api.CallDecline)[0].Decline
	if !slices.Equal(decline.OfferIDs, []string{"o2"}) || decline.Filters == nil || *decline.Filters.RefuseSeconds != declineRefuse {
		t.Fatalf("DECLINE %+v, want o2 with refuse_seconds %v", decline, declineRefuse)
	}
	f.calls(t, ctx, 1, api.CallSuppress) // everything launched: no more offers

	// Every update is acknowledged, a resent one too; the framework ends
	// when the three tasks finished.
	agents := map[string]string{"hello-0": "a1", "hello-1": "a1", "hello-2": "a3"}
	f.send(t, stream, update("hello-0", "a1", api.TaskRunning, "u0r"))
	f.send(t, stream, update("hello-0", "a1", api.TaskRunning, "u0r"))
	for _, id := range []string{"hello-1", "hello-2"} {
		f.send(t, stream, update(id, agents[id], api.TaskRunning, id+"r"))
	}
	for _, id := range []string{"hello-0", "hello-1", "hello-2"} {
		e := update(id, agents[id], api.TaskFinished, id+"f")
		e.Update.Status.Message = "command exited with status 0"
		f.send(t, stream, e)
	}
	if err := f.wait(t, ctx); err != nil {
		t.Fatalf("run: %v\n%s", err, &f.out)
	}
	var acked []string
	for _, c := range f.sent(api.CallAcknowledge) {
		a := c.Scheduler.Acknowledge
		acked = append(acked, a.TaskID+"/"+a.AgentID+"/"+a.UUID)
	}
	want := []string{"hello-0/a1/u0r", "hello-0/a1/u0r", "hello-1/a1/hello-1r", "hello-2/a3/hello-2r",
		"hello-0/a1/hello-0f", "hello-1/a1/hello-1f", "hello-2/a3/hello-2f"}
	if !slices.Equal(acked, want) {
		t.Fatalf("acknowledged %v, want %v", acked, want)
	}
	if n := len(f.sent(api.CallTeardown)); n != 1 {
		t.Fatalf("%d TEARDOWN calls, want 1", n)
	}

	out := f.out.String()
	for _, line := range []string{
		"launching hello-0, hello-1 on host-a1\n",
		"hello-2  TASK_FINISHED     host-a3  command exited with status 0\n",
		"3 of 3 tasks finished, 0 failed\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("output lacks %q:\n%s", line, out)
		}
	}
	if n := strings.Count(out, "hello-0  TASK_RUNNING"); n != 1 {
		t.Errorf("hello-0 TASK_RUNNING printed %d times, want once (the resent update is not news):\n%s", n, out)
	}
}

func TestFailedTaskFailsTheRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := startFramework(t, ctx, "-tasks", "1")
	stream := f.stream(t, ctx, 1)
	f.send(t, stream, api.Event{Type: api.EventOffers, Offers: &api.Offers{Offers: []api.Offer{offer("o1", "a1", 1)}}})
	f.calls(t, ctx, 1, api.CallAccept)
	e := update("hello-0", "a1", api.TaskFailed, "u1")
	e.Update.Status.Reason, e.Update.Status.Message = api.ReasonCommandExecutorFailed, "exited with status 1"
	f.send(t, stream, e)

	err := f.wait(t, ctx)
	if err == nil || !strings.Contains(err.Error(), "1 of 1 tasks did not finish") {
		t.Fatalf("run: %v, want 1 of 1 tasks did not finish", err)
	}
	if n := len(f.sent(api.CallTeardown)); n != 1 {
		t.Fatalf("%d TEARDOWN calls, want 1", n)
	}
	out := f.out.String()
	for _, line := range []string{
		"hello-0  TASK_FAILED       host-a1  REASON_COMMAND_EXECUTOR_FAILED: exited with status 1\n",
		"0 of 1 tasks finished, 1 failed\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("output lacks %q:\n%s", line, out)
		}
	}
}

// The session outlives the context of the work: a framework stopped by a
// timeout or a signal still tears itself down, on a stream that is open.
func TestTearsDownWhenStopped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	work, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	f := startFramework(t, work, "-tasks", "2")
	stream := f.stream(t, ctx, 1)
	// A DECLINE shows the subscription is done and the event loop runs.
	f.send(t, stream, api.Event{Type: api.EventOffers, Offers: &api.Offers{Offers: []api.Offer{offer("o1", "a1", 0.1)}}})
	f.calls(t, ctx, 1, api.CallDecline)
	stopped := errors.New("stopped by the test")
	stop(stopped)

	if err := f.wait(t, ctx); !errors.Is(err, stopped) {
		t.Fatalf("run: %v, want %v", err, stopped)
	}
	if teardown := f.sent(api.CallTeardown); len(teardown) != 1 || teardown[0].StreamID != stream.ID {
		t.Fatalf("TEARDOWN calls %+v, want one on stream %s", teardown, stream.ID)
	}
	if out := f.out.String(); !strings.Contains(out, "0 of 2 tasks finished, 0 failed, 2 did not end\n") {
		t.Errorf("output lacks the summary:\n%s", out)
	}
}

// A stream that ends (a master failover) is followed by a subscription with
// the framework's id, and the work goes on there.
func TestSubscribesAgainWhenTheStreamEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := startFramework(t, ctx, "-tasks", "1")
	first := f.stream(t, ctx, 1)
	f.master.Cut(first.ID)
	second := f.stream(t, ctx, 2)
	if got := second.Subscribe.Subscribe.FrameworkInfo.ID; got != first.FrameworkID {
		t.Fatalf("subscribed again as %q, want %q", got, first.FrameworkID)
	}
	f.send(t, second, api.Event{Type: api.EventOffers, Offers: &api.Offers{Offers: []api.Offer{offer("o1", "a1", 1)}}})
	f.calls(t, ctx, 1, api.CallAccept)
	f.send(t, second, update("hello-0", "a1", api.TaskFinished, "u1"))
	if err := f.wait(t, ctx); err != nil {
		t.Fatalf("run: %v\n%s", err, &f.out)
	}
	if c := f.sent(api.CallTeardown); len(c) != 1 || c[0].StreamID != second.ID || c[0].Scheduler.FrameworkID != first.FrameworkID {
		t.Fatalf("TEARDOWN calls %+v, want one of %s on stream %s", c, first.FrameworkID, second.ID)
	}
}

func TestParseFlagsRefusesBadValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-master", " , "}, "no masterd URL"},
		{[]string{"-name", " "}, "-name must not be empty"},
		{[]string{"-role", ""}, "-role must not be empty"},
		{[]string{"-tasks", "0"}, "-tasks must be at least 1"},
		{[]string{"-command", ""}, "-command must not be empty"},
		{[]string{"-timeout", "0s"}, "-timeout must be positive"},
		{[]string{"-cpus", "-1"}, "must not be negative"},
		{[]string{"-cpus", "0", "-mem", "0"}, "must ask for some cpus or mem"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		_, err := parseFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseFlags(%q) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	cfg, err := parseFlags([]string{"-master", "http://a:1,http://b:2", "-principal", "p", "-cpus", "0.25"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.addresses, []string{"http://a:1", "http://b:2"}) || cfg.info.Principal != "p" ||
		cfg.resources["cpus"] != 0.25 || cfg.resources["mem"] != 64 || cfg.tasks != 3 || cfg.command != "sleep 1" {
		t.Fatalf("parseFlags = %+v", cfg)
	}
}
