package master

import (
	"context"
	"slices"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/raftstore"
)

// Subscribe registers a framework (or takes over an existing one's session
// when framework_info.id names it: a failover keeps its tasks) and opens its
// event stream.
func (m *Master) Subscribe(ctx context.Context, call api.Call) (*Stream[api.Event], *api.Error) {
	if call.Subscribe == nil {
		return nil, invalid("a SUBSCRIBE call needs a subscribe body")
	}
	info := call.Subscribe.FrameworkInfo
	switch {
	case info.ID == "":
		info.ID = call.FrameworkID
	case call.FrameworkID != "" && call.FrameworkID != info.ID:
		return nil, invalid("framework_id %q and framework_info.id %q differ", call.FrameworkID, info.ID)
	}
	if info.Label != "" {
		if err := api.ValidateName("label", info.Label); err != nil {
			return nil, invalid("framework_info.label: %v", err)
		}
	}
	isNew := info.ID == ""
	if isNew {
		info.ID = "fw-" + randomID(8)
	}
	cmd := &raftstore.FrameworkSet{ID: info.ID, Name: info.Name, Principal: info.Principal, Roles: info.Roles,
		Capabilities: info.Capabilities, FailoverTimeoutSeconds: info.FailoverTimeoutSeconds}
	cmd.Time = m.clock.Now().UTC()
	cmd.WriteMeta.Principal = frameworkAuthor(info)
	var (
		e       *api.Error
		changed bool
	)
	m.store.Read(func(st *raftstore.State) {
		rec, known := st.Framework(info.ID)
		if !isNew && !known {
			e = api.Errorf(api.CodeNotFound, "framework %s is not registered (torn down, or it stayed away past its failover timeout); subscribe without an id", info.ID)
			return
		}
		if _, e = st.Check(cmd); e != nil {
			return
		}
		changed = !known || !sameFramework(frameworkInfo(rec), info)
	})
	if e != nil {
		return nil, e
	}
	if changed {
		if e := m.apply(ctx, cmd); e != nil {
			return nil, e
		}
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, noLeader()
	}
	fw := m.frameworks[info.ID]
	switch {
	case fw == nil:
		// Applied added it as the registration committed; it has been
		// removed since.
		return nil, api.Errorf(api.CodeConflict, "framework %s was removed while it subscribed; subscribe again", info.ID)
	case fw.removing:
		return nil, api.Errorf(api.CodeConflict, "framework %s is being removed", info.ID)
	default:
		if fw.stream != nil {
			fw.stream.send(api.Event{Type: api.EventError, Error: &api.ErrorEvent{Message: "framework failed over to a new subscription"}})
			fw.stream.close()
			m.rescindFrameworkOffers(fw)
		}
		_ = m.alloc.UpdateFramework(allocatorFramework(info))
		clear(fw.suppressed)
		_ = m.alloc.ActivateFramework(info.ID)
	}
	fw.info = info
	fw.failoverDeadline = time.Time{}
	fw.stream = newStream[api.Event](m.newID("stream"), info.ID)
	fw.stream.send(api.Event{Type: api.EventSubscribed, Subscribed: &api.Subscribed{
		FrameworkID: info.ID, HeartbeatIntervalSeconds: m.opts.HeartbeatInterval.Seconds()}})
	m.trigger()
	return fw.stream, nil
}

func sameFramework(a, b api.FrameworkInfo) bool {
	return a.Name == b.Name && a.Principal == b.Principal && slices.Equal(a.Roles, b.Roles) &&
		slices.Equal(a.Capabilities, b.Capabilities) && a.FailoverTimeoutSeconds == b.FailoverTimeoutSeconds
}

// Principal is the principal a framework's calls are throttled by.
func (m *Master) Principal(frameworkID string) (string, bool) {
	principal, _, ok := m.Identity(frameworkID)
	return principal, ok
}

// Identity is the principal and label a framework's calls are throttled
// and counted by. The label is kept from the framework's last SUBSCRIBE,
// not replicated: a framework subscribes again to a new leader before its
// other calls are taken, so a recovered framework carries none until then.
func (m *Master) Identity(frameworkID string) (principal, label string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fw := m.frameworks[frameworkID]
	if fw == nil {
		return "", "", false
	}
	return fw.info.Principal, fw.info.Label, true
}

// FrameworkStreamClosed disconnects a framework whose stream ended. It keeps
// its tasks until its failover timeout passes.
func (m *Master) FrameworkStreamClosed(frameworkID, streamID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fw := m.frameworks[frameworkID]
	if fw == nil || fw.stream == nil || fw.stream.id != streamID {
		return
	}
	m.disconnectFramework(fw)
}

// EndFrameworkSession ends a framework's session (the stream streamID, if
// it is still the framework's) with an ERROR event that says why: the
// framework is disconnected as if its connection ended, and its failover
// timeout runs. It reports whether the session was still open.
func (m *Master) EndFrameworkSession(frameworkID, streamID, message string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	fw := m.frameworks[frameworkID]
	if fw == nil || fw.stream == nil || fw.stream.id != streamID {
		return false
	}
	// Queued after whatever the stream still holds; its handler writes
	// both before it returns.
	fw.stream.send(api.Event{Type: api.EventError, Error: &api.ErrorEvent{Message: message}})
	m.disconnectFramework(fw)
	return true
}

// disconnectFramework closes a framework's stream and starts its failover
// timeout.
func (m *Master) disconnectFramework(fw *framework) {
	fw.stream.close()
	fw.stream = nil
	fw.failoverDeadline = m.clock.Now().Add(secondsDuration(fw.info.FailoverTimeoutSeconds))
	_ = m.alloc.DeactivateFramework(fw.info.ID)
	m.rescindFrameworkOffers(fw)
}

// expiredFrameworks lists the disconnected frameworks past their failover
// timeout and marks them as being removed.
func (m *Master) expiredFrameworks(now time.Time) []string {
	var out []string
	for id, fw := range m.frameworks {
		if !fw.connected() && !fw.removing && !fw.failoverDeadline.IsZero() && now.After(fw.failoverDeadline) {
			fw.removing = true
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// removeFrameworks unregisters frameworks in Raft and then kills their tasks
// and forgets them. It runs without m.mu.
func (m *Master) removeFrameworks(ctx context.Context, ids []string, why string) {
	for _, id := range ids {
		if e := m.removeFramework(ctx, id, "allot" /* the master itself */, why); e != nil {
			m.log.Warn("remove framework; trying again next round", "framework", id, "error", e)
		}
	}
}

// frameworkAuthor is who the audit trail names for a framework's own
// writes: its principal (with ACLs on, the one its token authenticated),
// else its name.
func frameworkAuthor(info api.FrameworkInfo) string {
	if info.Principal != "" {
		return info.Principal
	}
	return "framework/" + info.Name
}

// removeFramework unregisters a framework; author is who the audit trail
// names, why what the log says.
func (m *Master) removeFramework(ctx context.Context, id, author, why string) *api.Error {
	cmd := &raftstore.FrameworkRemove{ID: id}
	cmd.Time = m.clock.Now().UTC()
	cmd.Principal = author
	if e := m.apply(ctx, cmd); e != nil && e.Code != api.CodeNotFound {
		m.mu.Lock()
		if fw := m.frameworks[id]; fw != nil {
			fw.removing = false
		}
		m.mu.Unlock()
		return e
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if fw := m.frameworks[id]; fw != nil {
		m.log.Info("framework removed", "framework", id, "why", why)
		m.forgetFramework(fw)
	}
	return nil
}

// forgetFramework kills a removed framework's tasks and drops it. Its tasks'
// final updates are acknowledged here as they come.
//
// The tasks are found on the agents, not in fw.tasks: that map holds one
// task per id, and two agents may run tasks of one id (the framework reused
// the id while the agent that ran the first had not re-registered with this
// leader). RemoveFramework frees both; a copy missed here would keep running
// and keep counting as allocated.
func (m *Master) forgetFramework(fw *framework) {
	m.rescindFrameworkOffers(fw)
	if fw.stream != nil {
		fw.stream.close()
	}
	for _, ag := range m.agents {
		for _, t := range ag.tasks {
			if t.frameworkID != fw.info.ID {
				continue
			}
			t.released = true // RemoveFramework frees them
			// Kept until the task ends: sent again if the agent re-registers.
			t.killRequested = true
			if ag.stream != nil {
				ag.stream.send(api.AgentEvent{Type: api.AgentEventKill, Kill: &api.AgentKill{FrameworkID: t.frameworkID, TaskID: t.info.TaskID}})
			}
		}
		for k, ex := range ag.executors {
			if ex.frameworkID == fw.info.ID {
				delete(ag.executors, k)
			}
		}
	}
	_ = m.alloc.RemoveFramework(fw.info.ID)
	delete(m.frameworks, fw.info.ID)
	m.trigger()
}

// Teardown removes a framework at its own request.
func (m *Master) teardown(ctx context.Context, fw *framework) *api.Error {
	m.mu.Lock()
	if fw.removing {
		m.mu.Unlock()
		return nil
	}
	fw.removing = true
	m.mu.Unlock()
	return m.removeFramework(ctx, fw.info.ID, frameworkAuthor(fw.info), "TEARDOWN")
}

// maxTimeout caps durations given in seconds (failover timeouts): beyond it
// a time.Duration would overflow, and a century is forever enough.
const maxTimeout = 100 * 365 * 24 * time.Hour

func secondsDuration(s float64) time.Duration {
	if s >= maxTimeout.Seconds() {
		return maxTimeout
	}
	return time.Duration(s * float64(time.Second))
}
