package api_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/agentsim/fakemaster"
	"github.com/allot/allot/masterd/api"
)

// testContext bounds a test that would otherwise hang on a bug; nothing
// asserts on how long anything takes.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newMaster(t *testing.T, opts fakemaster.Options) *fakemaster.Master {
	t.Helper()
	m := fakemaster.New(opts)
	t.Cleanup(m.Close)
	return m
}

// deadAddress is the URL of a server that no longer listens.
func deadAddress(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(nil)
	srv.Close()
	return srv.URL
}

func subscribe(t *testing.T, ctx context.Context, c *api.SchedulerClient) *api.SchedulerSession {
	t.Helper()
	sess, err := c.Subscribe(ctx, api.FrameworkInfo{Name: "test", Principal: "p", Roles: []string{"*"}})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	t.Cleanup(sess.Close)
	return sess
}

func schedulerClient(t *testing.T, token string, addrs ...string) *api.SchedulerClient {
	t.Helper()
	c, err := api.NewSchedulerClient(addrs, token)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSubscribeFollowsRedirectAndCallsGoToTheLeader(t *testing.T) {
	ctx := testContext(t)
	leader := newMaster(t, fakemaster.Options{Token: "secret"})
	follower := newMaster(t, fakemaster.Options{Token: "secret"})
	follower.Redirect(leader.URL)

	sess := subscribe(t, ctx, schedulerClient(t, "secret", follower.URL))
	streams := leader.Streams(api.SchedulerPath)
	if len(streams) != 1 {
		t.Fatalf("leader has %d scheduler streams, want 1", len(streams))
	}
	st := streams[0]
	if sess.ServerURL() != leader.URL || sess.StreamID() != st.ID || sess.FrameworkID() != st.FrameworkID {
		t.Fatalf("session (%s, %s, %s), want the leader's stream (%s, %s, %s)",
			sess.ServerURL(), sess.StreamID(), sess.FrameworkID(), leader.URL, st.ID, st.FrameworkID)
	}
	if got := st.Subscribe.Subscribe.FrameworkInfo.Name; got != "test" {
		t.Fatalf("SUBSCRIBE carried framework name %q", got)
	}
	if follower.Opens() != 1 || len(follower.Streams(api.SchedulerPath)) != 0 {
		t.Fatalf("follower: %d opens, %d streams; want 1 redirected open", follower.Opens(), len(follower.Streams(api.SchedulerPath)))
	}
	if sess.HeartbeatInterval() != 50*time.Millisecond {
		t.Fatalf("heartbeat interval %s, want the announced 50ms", sess.HeartbeatInterval())
	}

	if err := sess.Decline(ctx, []string{"offer-1"}, nil); err != nil {
		t.Fatalf("Decline: %v", err)
	}
	calls := leader.Calls(nil)
	if len(calls) != 1 {
		t.Fatalf("leader got %d calls, want 1", len(calls))
	}
	got := calls[0]
	if got.StreamID != st.ID || got.Header.Get("Authorization") != "Bearer secret" {
		t.Fatalf("call sent stream id %q and auth %q", got.StreamID, got.Header.Get("Authorization"))
	}
	if got.Scheduler.FrameworkID != st.FrameworkID || got.Scheduler.Type != api.CallDecline ||
		!reflect.DeepEqual(got.Scheduler.Decline.OfferIDs, []string{"offer-1"}) {
		t.Fatalf("call %+v", got.Scheduler)
	}
	if len(follower.Calls(nil)) != 0 {
		t.Fatal("a call went to the follower")
	}
}

func TestSubscribeRidesOutUnreachableServersAndElections(t *testing.T) {
	ctx := testContext(t)
	leader := newMaster(t, fakemaster.Options{})
	follower := newMaster(t, fakemaster.Options{})
	noLeader := api.Errorf(api.CodeNoLeader, "election in progress")
	follower.FailOpens(noLeader, noLeader)
	follower.Redirect(leader.URL)

	sess := subscribe(t, ctx, schedulerClient(t, "", deadAddress(t), follower.URL))
	if sess.ServerURL() != leader.URL {
		t.Fatalf("session on %s, want the leader %s", sess.ServerURL(), leader.URL)
	}
	if follower.Opens() != 3 {
		t.Fatalf("follower saw %d opens, want 2 refused and 1 redirected", follower.Opens())
	}
}

func TestSubscribeReturnsAnErrorAnswerWithoutRetrying(t *testing.T) {
	ctx := testContext(t)
	leader := newMaster(t, fakemaster.Options{})
	leader.FailOpens(api.Errorf(api.CodeInvalidArgument, "roles missing"))

	_, err := schedulerClient(t, "", leader.URL).Subscribe(ctx, api.FrameworkInfo{Name: "x"})
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Code != api.CodeInvalidArgument || apiErr.Status != 400 ||
		apiErr.Message != "roles missing" {
		t.Fatalf("Subscribe error %v, want the invalid_argument answer", err)
	}
	if leader.Opens() != 1 {
		t.Fatalf("%d opens, want 1", leader.Opens())
	}

	// A wrong token is refused the same way.
	secured := newMaster(t, fakemaster.Options{Token: "right"})
	_, err = schedulerClient(t, "wrong", secured.URL).Subscribe(ctx, api.FrameworkInfo{Name: "x"})
	if api.ErrorCode(err) != api.CodeUnauthenticated {
		t.Fatalf("Subscribe with a wrong token: %v", err)
	}
}

func TestSubscribeGivesUpOnARedirectLoopWhenTheContextEnds(t *testing.T) {
	a := newMaster(t, fakemaster.Options{})
	b := newMaster(t, fakemaster.Options{})
	a.Redirect(b.URL)
	b.Redirect(a.URL)

	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	go func() {
		// Two attempts of six requests each, then the caller gives up.
		_ = a.WaitOpens(ctx, 6)
		cancel()
	}()
	_, err := schedulerClient(t, "", a.URL).Subscribe(ctx, api.FrameworkInfo{Name: "x"})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "more than 5 redirects") {
		t.Fatalf("Subscribe error %v, want the cancellation with the redirect loop as last error", err)
	}
}

func TestSessionDeliversEventsAndEndsWithTheStream(t *testing.T) {
	ctx := testContext(t)
	leader := newMaster(t, fakemaster.Options{})
	sess := subscribe(t, ctx, schedulerClient(t, "", leader.URL))
	st := leader.Streams(api.SchedulerPath)[0]

	sent := []api.Event{
		{Type: api.EventOffers, Offers: &api.Offers{Offers: []api.Offer{{ID: "o1", AgentID: "a1"}}}},
		{Type: api.EventHeartbeat},
		{Type: api.EventRescind, Rescind: &api.Rescind{OfferID: "o1"}},
	}
	for _, ev := range sent {
		if err := leader.Send(st.ID, ev); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range sent {
		got := <-sess.Events()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("event %d: %+v, want %+v", i, got, want)
		}
	}
	if sess.Err() != nil {
		t.Fatalf("Err %v while the stream runs", sess.Err())
	}

	leader.Cut(st.ID)
	if _, ok := <-sess.Events(); ok {
		t.Fatal("event after the stream was cut")
	}
	if !errors.Is(sess.Err(), api.ErrStreamEnded) {
		t.Fatalf("Err %v, want ErrStreamEnded", sess.Err())
	}

	again, err := sess.Resubscribe(ctx)
	if err != nil {
		t.Fatalf("Resubscribe: %v", err)
	}
	defer again.Close()
	streams := leader.Streams(api.SchedulerPath)
	if len(streams) != 2 {
		t.Fatalf("%d streams, want 2", len(streams))
	}
	sub := streams[1].Subscribe
	if sub.FrameworkID != sess.FrameworkID() || sub.Subscribe.FrameworkInfo.ID != sess.FrameworkID() ||
		sub.Subscribe.FrameworkInfo.Name != "test" || again.FrameworkID() != sess.FrameworkID() {
		t.Fatalf("re-subscription %+v, want framework %s again", sub, sess.FrameworkID())
	}
}

func TestCloseAndContextEndTheStream(t *testing.T) {
	ctx := testContext(t)
	leader := newMaster(t, fakemaster.Options{})
	c := schedulerClient(t, "", leader.URL)

	sess := subscribe(t, ctx, c)
	sess.Close()
	if _, ok := <-sess.Events(); ok {
		t.Fatal("event after Close")
	}
	if !errors.Is(sess.Err(), api.ErrSessionClosed) {
		t.Fatalf("Err %v after Close", sess.Err())
	}
	select {
	case <-leader.Streams(api.SchedulerPath)[0].Done():
	case <-ctx.Done():
		t.Fatal("the server never saw the closed stream go")
	}

	sctx, cancel := context.WithCancel(ctx)
	sess = subscribe(t, sctx, c)
	cancel()
	<-sess.Done()
	if !errors.Is(sess.Err(), context.Canceled) {
		t.Fatalf("Err %v after the context ended", sess.Err())
	}
}

func TestIdleSessionEnds(t *testing.T) {
	ctx := testContext(t)
	leader := newMaster(t, fakemaster.Options{})
	c := schedulerClient(t, "", leader.URL)
	c.IdleTimeout = 20 * time.Millisecond
	sess := subscribe(t, ctx, c) // the fake master sends no heartbeats
	<-sess.Done()
	if !errors.Is(sess.Err(), api.ErrStreamIdle) {
		t.Fatalf("Err %v, want ErrStreamIdle", sess.Err())
	}
}

func TestSchedulerCallsOnTheWire(t *testing.T) {
	ctx := testContext(t)
	leader := newMaster(t, fakemaster.Options{})
	sess := subscribe(t, ctx, schedulerClient(t, "", leader.URL))
	refuse := 3.0
	filters := &api.Filters{RefuseSeconds: &refuse}
	ops := []api.Operation{{Type: api.OperationLaunch, Launch: &api.Launch{Tasks: []api.TaskInfo{{TaskID: "t1", Name: "t1", AgentID: "a1"}}}}}

	cases := []struct {
		send func() error
		want api.Call
	}{
		{func() error { return sess.Accept(ctx, []string{"o1"}, ops, filters) },
			api.Call{Type: api.CallAccept, Accept: &api.Accept{OfferIDs: []string{"o1"}, Operations: ops, Filters: filters}}},
		{func() error { return sess.Decline(ctx, []string{"o2"}, filters) },
			api.Call{Type: api.CallDecline, Decline: &api.Decline{OfferIDs: []string{"o2"}, Filters: filters}}},
		{func() error { return sess.Revive(ctx, "db") },
			api.Call{Type: api.CallRevive, Revive: &api.Revive{Roles: []string{"db"}}}},
		{func() error { return sess.Suppress(ctx) },
			api.Call{Type: api.CallSuppress, Suppress: &api.Suppress{}}},
		{func() error { return sess.Kill(ctx, "t1", "a1") },
			api.Call{Type: api.CallKill, Kill: &api.Kill{TaskID: "t1", AgentID: "a1"}}},
		{func() error { return sess.Acknowledge(ctx, "a1", "t1", "u1") },
			api.Call{Type: api.CallAcknowledge, Acknowledge: &api.Acknowledge{AgentID: "a1", TaskID: "t1", UUID: "u1"}}},
		{func() error {
			return sess.AcknowledgeStatus(ctx, api.TaskStatus{AgentID: "a2", TaskID: "t2", UUID: "u2"})
		}, api.Call{Type: api.CallAcknowledge, Acknowledge: &api.Acknowledge{AgentID: "a2", TaskID: "t2", UUID: "u2"}}},
		{func() error { return sess.Reconcile(ctx) },
			api.Call{Type: api.CallReconcile, Reconcile: &api.Reconcile{Tasks: []api.ReconcileTask{}}}},
		{func() error { return sess.Reconcile(ctx, api.ReconcileTask{TaskID: "t1"}) },
			api.Call{Type: api.CallReconcile, Reconcile: &api.Reconcile{Tasks: []api.ReconcileTask{{TaskID: "t1"}}}}},
		{func() error { return sess.Teardown(ctx) },
			api.Call{Type: api.CallTeardown, Teardown: &api.Teardown{}}},
	}
	for i, tc := range cases {
		if err := tc.send(); err != nil {
			t.Fatalf("call %d (%s): %v", i, tc.want.Type, err)
		}
		calls := leader.Calls(nil)
		if len(calls) != i+1 {
			t.Fatalf("after call %d the master has %d calls", i, len(calls))
		}
		tc.want.FrameworkID = sess.FrameworkID()
		if got := *calls[i].Scheduler; !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("call %d on the wire:\n got %+v\nwant %+v", i, got, tc.want)
		}
	}
	// A status without uuid needs no acknowledgement.
	if err := sess.AcknowledgeStatus(ctx, api.TaskStatus{TaskID: "t3"}); err != nil || len(leader.Calls(nil)) != len(cases) {
		t.Fatalf("AcknowledgeStatus without uuid: %v, %d calls", err, len(leader.Calls(nil)))
	}
	if err := sess.Call(ctx, api.Call{Type: api.CallSubscribe}); err == nil {
		t.Fatal("SUBSCRIBE through Call was accepted")
	}
}

func TestSchedulerCallErrorsAreAPIErrors(t *testing.T) {
	ctx := testContext(t)
	leader := newMaster(t, fakemaster.Options{})
	sess := subscribe(t, ctx, schedulerClient(t, "", leader.URL))
	leader.SetCallHook(func(c fakemaster.Call) *api.Error {
		if c.Scheduler.Type == api.CallRevive {
			return api.Errorf(api.CodeRateLimited, "slow down")
		}
		return nil
	})

	err := sess.Revive(ctx)
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Code != api.CodeRateLimited || apiErr.Status != 429 {
		t.Fatalf("Revive: %v, want rate_limited", err)
	}
	if api.RetryAfter(err) != time.Second {
		t.Fatalf("RetryAfter %s, want the answer's 1s", api.RetryAfter(err))
	}

	// A server that no longer knows the stream answers not_found.
	leader.Cut(sess.StreamID())
	<-sess.Done()
	if err := sess.Kill(ctx, "t1", ""); !api.IsNotFound(err) {
		t.Fatalf("call on an ended stream: %v, want not_found", err)
	}
}
