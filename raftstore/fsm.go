package raftstore

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// FSM applies committed commands to the replicated State.
type FSM struct {
	logger hclog.Logger

	mu    sync.RWMutex
	state *State

	// onApply, when set, is called after every applied command (outside the
	// lock) so that leader-side loops can react to policy changes.
	onApply func(Command, Result)
}

// NewFSM returns an FSM over an empty state.
func NewFSM(logger hclog.Logger) *FSM {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &FSM{logger: logger, state: NewState()}
}

// Read calls fn with the state under a read lock. fn must not keep s past its
// return, but it may keep the objects it reads: they are never modified.
func (f *FSM) Read(fn func(s *State)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.state)
}

// TryRead is Read if the read lock can be taken at once: not while a write
// holds it or waits for it. It reports whether fn ran. A caller that holds a
// lock others take inside Read uses it to never wait for a write that waits
// for them.
func (f *FSM) TryRead(fn func(s *State)) bool {
	if !f.mu.TryRLock() {
		return false
	}
	defer f.mu.RUnlock()
	fn(f.state)
	return true
}

// OnApply registers a callback run after each applied command.
func (f *FSM) OnApply(fn func(Command, Result)) {
	f.mu.Lock()
	f.onApply = fn
	f.mu.Unlock()
}

// Apply implements raft.FSM.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	cmd, err := Decode(l.Data)
	if err != nil {
		var unknown *unknownTypeError
		if errors.As(err, &unknown) && unknown.t&IgnoreUnknownTypeFlag != 0 {
			f.logger.Warn("ignoring unknown command type", "type", uint8(unknown.t), "index", l.Index)
			return nil
		}
		// A command this server cannot read means it runs older code than the
		// leader; applying nothing would let it silently diverge.
		panic(fmt.Errorf("raft log index %d: %w", l.Index, err))
	}
	if rules := cmd.meta().Rules; rules > StoreVersion {
		// Judging it by older rules could store something else than the
		// servers that can read it: stop, as for an unknown type.
		panic(fmt.Errorf("raft log index %d: %s written under store version %d, this server runs %d: upgrade it",
			l.Index, cmd.Type(), rules, StoreVersion))
	}
	f.mu.Lock()
	res := f.state.apply(l.Index, cmd)
	onApply := f.onApply
	f.mu.Unlock()
	if onApply != nil {
		onApply(cmd, res)
	}
	return res
}

// Snapshot implements raft.FSM: a cheap copy, persisted later.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return &fsmSnapshot{state: f.state.clone()}, nil
}

// Restore implements raft.FSM: it builds fresh state and swaps it in whole.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	s, err := ReadSnapshot(rc)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.state = s
	onApply := f.onApply
	f.mu.Unlock()
	if onApply != nil {
		onApply(nil, Result{Index: s.index})
	}
	return nil
}

type fsmSnapshot struct{ state *State }

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := WriteSnapshot(sink, s.state); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}
