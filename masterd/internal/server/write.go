package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/raftstore"
)

// readyWait bounds how long a new leader makes a request wait for its first
// barrier before answering no_leader.
const readyWait = 5 * time.Second

// leaderOnly forwards the request to the leader unless this server leads.
// It runs before the body is read, so the body travels with the request.
// While this leader hands its leadership over (TransferLeadership), it
// holds the request until the new leader is known and forwards it there:
// a graceful stop costs the caller a short wait, not an error.
func (s *Server) leaderOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.node.Transferring() {
			ctx, cancel := context.WithTimeout(r.Context(), readyWait)
			s.node.AwaitTransfer(ctx)
			cancel()
		}
		if !s.node.IsLeader() {
			s.forward(w, r)
			return
		}
		h(w, r)
	}
}

// read answers a GET from the replicated state: on the leader once it has
// confirmed its leadership (linearizable), or locally with ?stale=true.
func (s *Server) read(w http.ResponseWriter, r *http.Request, fn func(st *raftstore.State) (any, *api.Error)) {
	s.answerRead(w, r, false, func(st *raftstore.State) (func() any, *api.Error) {
		out, e := fn(st)
		return func() any { return out }, e
	})
}

// confirmedLeader reports whether this server leads and has confirmed it
// (what a linearizable read needs); otherwise it has forwarded r to the
// leader, or answered no_leader.
func (s *Server) confirmedLeader(w http.ResponseWriter, r *http.Request) bool {
	if !s.node.IsLeader() {
		s.forward(w, r)
		return false
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyWait)
	err := s.node.VerifyRead(ctx)
	cancel()
	if err != nil {
		s.writeError(w, api.Errorf(api.CodeNoLeader, "this server could not confirm its leadership: %v; retry", err))
		return false
	}
	return true
}

// commit validates cmd against the current state, answers a dry run, or
// replicates it and answers with the stored object. Call it on the leader.
func (s *Server) commit(w http.ResponseWriter, r *http.Request, cmd raftstore.Command) {
	s.commitWith(w, r, cmd, commitOptions{})
}

// commitOptions adjust a commit.
type commitOptions struct {
	// principal replaces the caller's in the audit trail.
	principal string
	// ifNoneMatch makes the write fail if the object exists, whatever the
	// request's headers say.
	ifNoneMatch bool
	// answer adjusts the object answered (a new token's secret).
	answer func(obj any) any
	// pin, when set, is the version of the stored object the handler
	// authorized the write against (0: there was none). The write lands
	// only on that version, so a concurrent change (a reservation moved to
	// another role) cannot slip past the check.
	pin *uint64
}

func (s *Server) commitWith(w http.ResponseWriter, r *http.Request, cmd raftstore.Command, opts commitOptions) {
	dryRun := flag(r, paramDryRun)
	meta := raftstore.Meta(cmd)
	var e *api.Error
	if meta.IfMatch, meta.IfNoneMatch, e = writeOptions(r); e != nil {
		s.writeError(w, e)
		return
	}
	meta.IfNoneMatch = meta.IfNoneMatch || opts.ifNoneMatch
	if opts.pin != nil {
		switch v := *opts.pin; {
		case v == 0:
			meta.IfNoneMatch = true
		case meta.IfMatch != 0 && meta.IfMatch != v:
			s.writeError(w, api.Errorf(api.CodePreconditionFailed, "If-Match %d: the object's version is %d", meta.IfMatch, v))
			return
		default:
			meta.IfMatch = v
		}
	}
	meta.Time = time.Now().UTC()
	meta.Principal = principalOf(r.Context())
	if opts.principal != "" {
		meta.Principal = opts.principal
	}
	present := s.present
	if opts.answer != nil {
		present = func(obj any) any { return opts.answer(s.present(obj)) }
	}

	if !s.readyToLead(w, r) {
		return
	}
	var (
		obj   any
		index uint64
	)
	check := func() {
		s.fsm.Read(func(st *raftstore.State) {
			if e = stillValid(r.Context(), st); e != nil {
				return
			}
			obj, e = st.Check(cmd)
			index = st.Index()
		})
	}
	check()
	if e != nil && e.Code != api.CodeInvalidArgument && e.Code != api.CodeUnauthenticated {
		// A refusal read from this server's state (412, 404, 409) is a read:
		// a leader deposed while it was paused may still think it leads, and
		// must not refuse a compare-and-swap on the state of before. Confirm
		// the leadership with a quorum, then judge again on what is applied.
		// Only refusals pay for it; a write that goes on is judged again
		// when it is applied.
		ctx, cancel := context.WithTimeout(r.Context(), readyWait)
		err := s.node.VerifyRead(ctx)
		cancel()
		if err != nil {
			s.writeError(w, api.Errorf(api.CodeNoLeader, "this server could not confirm it still leads: %v; retry", err))
			return
		}
		check()
	}
	if e == nil {
		// Apply refuses it too; a dry run must answer as the write would.
		e = s.node.CheckVersion(cmd)
	}
	if e != nil {
		s.writeError(w, e)
		return
	}
	effects, e := s.effects(cmd, obj, dryRun)
	if e != nil {
		s.writeError(w, e)
		return
	}
	if dryRun {
		body, err := json.Marshal(present(obj))
		if err != nil {
			s.writeError(w, api.Errorf(api.CodeInternal, "encode dry run: %v", err))
			return
		}
		s.writeJSON(w, http.StatusOK, index, api.DryRun{DryRun: true, Object: body, Effects: effects})
		return
	}
	res, err := s.node.Apply(r.Context(), cmd)
	if err != nil {
		if errors.Is(err, raftstore.ErrTransferring) {
			s.writeError(w, api.Errorf(api.CodeNoLeader, "this server is handing its leadership to another; the write was not applied; retry"))
			return
		}
		if errors.Is(err, raftstore.ErrNotLeader) {
			s.writeError(w, api.Errorf(api.CodeNoLeader, "leadership was lost before the write committed; it may or may not have been applied: %v", err))
			return
		}
		s.logger.Error("replicate write", "type", cmd.Type(), "error", err)
		s.writeError(w, api.Errorf(api.CodeNoLeader, "the write could not be replicated: %v; retry", err))
		return
	}
	if res.Err != nil {
		s.writeError(w, res.Err)
		return
	}
	// The acknowledgement of most writes promises what they do to the
	// live state too (a deleted reservation's offers rescinded): Followed
	// waits until the master follows those (not quotas: see
	// master.ackAfterFollowed). A term that ends first leaves that to the
	// next leader, which starts from the state; the write itself is
	// committed.
	s.live.Followed(cmd, res.Index)
	s.writeJSON(w, http.StatusOK, res.Index, present(res.Object))
}

// readyToLead waits, up to readyWait, until this leader has applied what
// earlier terms committed (Raft's barrier), or answers no_leader and
// returns false. It makes a context and its timer only when there is a
// wait: every write asks.
func (s *Server) readyToLead(w http.ResponseWriter, r *http.Request) bool {
	if s.node.Ready() {
		return true
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyWait)
	err := s.node.WaitReady(ctx)
	cancel()
	if err != nil {
		s.writeError(w, api.Errorf(api.CodeNoLeader, "this server is not ready to lead: %v; retry", err))
		return false
	}
	return true
}

// TransferLeadership hands this server's leadership, if it leads, to the
// most up-to-date follower and returns once that one leads. masterd calls
// it when it is told to stop, before Shutdown: the cluster then takes
// writes again after one round trip of an election instead of after the
// followers' heartbeat timeout.
func (s *Server) TransferLeadership(ctx context.Context) error {
	return s.node.TransferLeadership(ctx)
}

// effects computes what a write does beyond storing its object, and refuses a
// quota limit below current consumption unless forced. Only a dry run
// answers the effects, so a real write skips the figures that read the
// master's live offers and loans: those wait for a running allocation cycle,
// and the write itself rescinds what it must.
func (s *Server) effects(cmd raftstore.Command, obj any, dryRun bool) (api.Effects, *api.Error) {
	effects := api.Effects{}
	if role, ok := cmd.(*raftstore.RoleSet); ok {
		if !dryRun {
			return effects, nil
		}
		s.live.Followed(nil, 0)
		return s.lendingEffects(role.Role, obj.(raftstore.RolePolicy).LendingLimit), nil
	}
	set, ok := cmd.(*raftstore.QuotaSet)
	if !ok {
		return effects, nil
	}
	q := obj.(api.Quota)
	consumed := s.live.ConsumptionAfterWrites(q.Role)
	over := api.Resources{}
	for _, name := range q.Limits.Names() {
		if consumed[name] > q.Limits[name] {
			over[name] = api.RoundScalar(consumed[name] - q.Limits[name])
		}
	}
	if len(over) > 0 {
		if !set.Force {
			return effects, api.Errorf(api.CodeConflict,
				"role %s consumes more than the new limits allow (%s over); set force to lower them anyway", q.Role, over).
				WithDetails(map[string]any{"over_limit": over, "consumed": consumed})
		}
		effects.OverLimit = map[string]api.Resources{q.Role: over}
		effects.Warnings = append(effects.Warnings, "role "+q.Role+" stays above its new limits until its tasks finish")
	}
	if dryRun {
		effects.Warnings = append(effects.Warnings, s.unknownResources(q)...)
		s.live.Followed(nil, 0)
		effects.RescindedOffers = s.live.RescindsForQuota(q)
	}
	return effects, nil
}

// unknownResources warns of the resources a quota names that no admitted
// agent has: most often a typo ("cpu" for "cpus"), which would otherwise
// leave the intended resource without a limit. A cluster with no agents yet
// has nothing to compare with.
func (s *Server) unknownResources(q api.Quota) []string {
	var capacity api.Resources
	s.fsm.Read(func(st *raftstore.State) { capacity = st.AgentCapacity() })
	if len(capacity) == 0 {
		return nil
	}
	var warnings []string
	for _, names := range [][]string{q.Guarantees.Names(), q.Limits.Names()} {
		for _, name := range names {
			if _, ok := capacity[name]; !ok && !slices.Contains(warnings, name) {
				warnings = append(warnings, name)
			}
		}
	}
	for i, name := range warnings {
		warnings[i] = fmt.Sprintf("no agent has a resource named %q (agents have %s): check its spelling", name, strings.Join(capacity.Names(), ", "))
	}
	return warnings
}

// lendingEffects is what setting role's lending limit takes back from the
// frameworks that borrow its reservations: the master rescinds their
// revocable offers and evicts the youngest revocable tasks until what the
// role lends fits (master.Master.LendingEffects). The write is not refused
// for it: a lending limit is the lender's to lower.
func (s *Server) lendingEffects(role string, limit api.Resources) api.Effects {
	effects := api.Effects{}
	effects.RescindedOffers, effects.Evictions = s.live.LendingEffects(role, limit)
	return effects
}
