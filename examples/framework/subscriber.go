package main

import (
	"context"
	"fmt"

	"github.com/allot/allot/masterd/api"
)

// subscriber opens scheduler sessions that outlive the context of the
// framework's work. A session lives as long as the context it was opened
// with, but TEARDOWN, the framework's last call, is only accepted on an open
// stream, and it comes after a timeout or a signal ended that context. So
// the work's context bounds the attempts to subscribe only, and close ends
// the sessions. (Should the work end just as SUBSCRIBED arrives, the new
// session ends with the attempt, and the master keeps the framework for its
// failover timeout.)
type subscriber struct {
	work  context.Context // bounds the attempts
	life  context.Context // the sessions'
	close context.CancelFunc
}

func newSubscriber(work context.Context) *subscriber {
	life, end := context.WithCancel(context.WithoutCancel(work))
	return &subscriber{work: work, life: life, close: end}
}

// open runs client.Subscribe or session.Resubscribe.
func (s *subscriber) open(subscribe func(context.Context) (*api.SchedulerSession, error)) (*api.SchedulerSession, error) {
	stop := context.AfterFunc(s.work, s.close)
	defer stop()
	session, err := subscribe(s.life)
	if err != nil && s.work.Err() != nil {
		return nil, fmt.Errorf("%w (%v)", context.Cause(s.work), err)
	}
	return session, err
}
