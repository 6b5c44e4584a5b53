package api

import (
	"regexp"
	"slices"
	"testing"
	"time"
)

func uuids(us []*pendingUpdate) []string {
	var out []string
	for _, u := range us {
		out = append(out, u.status.UUID)
	}
	return out
}

func TestDueUpdatesResendEveryLaterUpdateOfTheTask(t *testing.T) {
	const retry = time.Minute
	now := time.Unix(1000, 0)
	var q updateQueue
	q.add("fw", TaskStatus{TaskID: "t1", UUID: "t1-starting"})
	q.add("fw", TaskStatus{TaskID: "t2", UUID: "t2-running"})
	q.add("fw", TaskStatus{TaskID: "t1", UUID: "t1-running"})

	due, _ := q.due(1, now, retry)
	if got, want := uuids(due), []string{"t1-starting", "t2-running", "t1-running"}; !slices.Equal(got, want) {
		t.Fatalf("first round sends %v, want %v", got, want)
	}
	for _, u := range due {
		q.markSent(u, 1, now)
	}
	due, next := q.due(1, now.Add(time.Second), retry)
	if len(due) != 0 || !next.Equal(now.Add(retry)) {
		t.Fatalf("just sent: due %v, next %v; want none until %v", uuids(due), next, now.Add(retry))
	}

	// A new update of t1 goes alone: the earlier ones are not due yet.
	q.add("fw", TaskStatus{TaskID: "t1", UUID: "t1-finished"})
	due, _ = q.due(1, now.Add(time.Second), retry)
	if got := uuids(due); !slices.Equal(got, []string{"t1-finished"}) {
		t.Fatalf("due %v, want the new update alone", got)
	}
	q.markSent(due[0], 1, now.Add(time.Second))

	// When t1's first update falls due, every later one of t1 goes with it,
	// so that the master ends on the latest state.
	due, _ = q.due(1, now.Add(retry), retry)
	if got, want := uuids(due), []string{"t1-starting", "t2-running", "t1-running", "t1-finished"}; !slices.Equal(got, want) {
		t.Fatalf("retry round sends %v, want %v", got, want)
	}

	// A new session sends everything.
	due, _ = q.due(2, now, retry)
	if len(due) != 4 {
		t.Fatalf("new session sends %v, want all 4", uuids(due))
	}
}

func TestSettleTakesEarlierUpdatesOfTheSameTaskOnly(t *testing.T) {
	var q updateQueue
	q.add("fw", TaskStatus{TaskID: "t1", UUID: "a"})
	q.add("fw", TaskStatus{TaskID: "t2", UUID: "b"})
	q.add("other", TaskStatus{TaskID: "t1", UUID: "c"}) // same task id, other framework
	q.add("fw", TaskStatus{TaskID: "t1", UUID: "d"})
	q.add("fw", TaskStatus{TaskID: "t1", UUID: "e"})

	if got := q.settle("unknown"); got != nil || q.len() != 5 {
		t.Fatalf("settling an unknown uuid took %v", got)
	}
	var got []string
	for _, u := range q.settle("d") {
		got = append(got, u.status.UUID)
	}
	if !slices.Equal(got, []string{"a", "d"}) {
		t.Fatalf("settled %v, want [a d]", got)
	}
	if left := uuids(q.list); !slices.Equal(left, []string{"b", "c", "e"}) {
		t.Fatalf("left %v, want [b c e]", left)
	}
}

func TestNewUUIDIsARandomVersion4UUID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	a, b := newUUID(), newUUID()
	if !re.MatchString(a) || a == b {
		t.Fatalf("newUUID gave %q and %q", a, b)
	}
}
