package api

import (
	"crypto/rand"
	"fmt"
	"slices"
	"time"
)

// Status updates are delivered at least once: an update stays pending until
// an ACKNOWLEDGE event carries its uuid back, and it is sent again after a
// retry interval and in every new session.
//
// The updates of one task are sent in the order they were made, and a resend
// repeats every later pending update of the task as well, so that the last
// state the master hears of a task is always its latest. An acknowledgement
// settles the update it names and every earlier one of the same task: the
// framework has seen a newer state, and resending an older one would only
// make the master's view go backwards.

// pendingUpdate is an update waiting for its acknowledgement.
type pendingUpdate struct {
	seq         uint64
	frameworkID string
	status      TaskStatus
	// sentIn is the session the update was last sent in (0: never), sentAt
	// when.
	sentIn int
	sentAt time.Time
}

func (u *pendingUpdate) taskKey() string { return u.frameworkID + "\x00" + u.status.TaskID }

// updateQueue holds the pending updates in the order they were made. It is
// not safe for concurrent use; the AgentClient guards it.
type updateQueue struct {
	nextSeq uint64
	list    []*pendingUpdate
}

func (q *updateQueue) add(frameworkID string, status TaskStatus) {
	q.nextSeq++
	q.list = append(q.list, &pendingUpdate{seq: q.nextSeq, frameworkID: frameworkID, status: status})
}

// due returns, in order, the updates to send now in session: for each task,
// its first update that was not sent in this session or not for retry, and
// every later one. next is when the earliest of the others falls due (zero
// when none is pending).
func (q *updateQueue) due(session int, now time.Time, retry time.Duration) (out []*pendingUpdate, next time.Time) {
	isDue := func(u *pendingUpdate) bool {
		return u.sentIn != session || !now.Before(u.sentAt.Add(retry))
	}
	firstDue := map[string]uint64{}
	for _, u := range q.list {
		if _, seen := firstDue[u.taskKey()]; !seen && isDue(u) {
			firstDue[u.taskKey()] = u.seq
		}
	}
	for _, u := range q.list {
		if first, ok := firstDue[u.taskKey()]; ok && u.seq >= first {
			out = append(out, u)
			continue
		}
		if at := u.sentAt.Add(retry); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return out, next
}

// markSent records that u went out in session at now.
func (q *updateQueue) markSent(u *pendingUpdate, session int, now time.Time) {
	u.sentIn, u.sentAt = session, now
}

// settle removes the update with uuid and every earlier update of the same
// task and returns them in order; nothing when uuid is not pending.
func (q *updateQueue) settle(uuid string) []pendingUpdate {
	var acked *pendingUpdate
	for _, u := range q.list {
		if u.status.UUID == uuid {
			acked = u
			break
		}
	}
	if acked == nil {
		return nil
	}
	var settled []pendingUpdate
	kept := q.list[:0]
	for _, u := range q.list {
		if u.taskKey() == acked.taskKey() && u.seq <= acked.seq {
			settled = append(settled, *u)
			continue
		}
		kept = append(kept, u)
	}
	clear(q.list[len(kept):])
	q.list = kept
	return settled
}

// remove drops u without acknowledgement.
func (q *updateQueue) remove(u *pendingUpdate) {
	for i, p := range q.list {
		if p == u {
			q.list = append(q.list[:i], q.list[i+1:]...)
			return
		}
	}
}

func (q *updateQueue) clear() { q.list = nil }

// dropTask removes every pending update of one task.
func (q *updateQueue) dropTask(frameworkID, taskID string) {
	q.list = slices.DeleteFunc(q.list, func(u *pendingUpdate) bool {
		return u.frameworkID == frameworkID && u.status.TaskID == taskID
	})
}

func (q *updateQueue) len() int { return len(q.list) }

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
