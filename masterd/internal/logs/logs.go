// Package logs wraps masterd's hclog logger so that what it prints stays
// readable when something goes wrong for a while: times are printed without
// Go's monotonic clock reading ("m=+0.001"), and a warning or error that
// repeats — Raft retries a dead peer several times a second, forever — is
// printed once per window, the next one saying how many were left out.
package logs

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Options configure Wrap.
type Options struct {
	// RepeatWindow is how long a warning or error is not printed again after
	// it was printed; the repeats are counted and the first one printed after
	// the window says "(N similar suppressed)". 0 prints every one.
	RepeatWindow time.Duration
	// Now is the clock that times the window; nil means time.Now.
	Now func() time.Time
}

// maxTracked bounds the memory of repeated messages: past it, entries whose
// window is over are forgotten (with their counts).
const maxTracked = 1024

// Wrap returns a logger that prints through l with the fixes above. Loggers
// made from it with Named, ResetNamed and With share its memory of repeats.
func Wrap(l hclog.Logger, opts Options) hclog.Logger {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &logger{Logger: l, repeats: &repeats{opts: opts, seen: map[string]*seen{}}, prefix: prefixOf(l)}
}

type logger struct {
	hclog.Logger
	repeats *repeats
	// prefix tells apart the same message from two named or With loggers.
	prefix string
}

type repeats struct {
	opts Options
	mu   sync.Mutex
	seen map[string]*seen
}

type seen struct {
	printed    time.Time
	suppressed int
}

func prefixOf(l hclog.Logger) string {
	return l.Name() + "\x00" + render(l.ImpliedArgs())
}

func (l *logger) wrap(sub hclog.Logger) hclog.Logger {
	return &logger{Logger: sub, repeats: l.repeats, prefix: prefixOf(sub)}
}

func (l *logger) Named(name string) hclog.Logger      { return l.wrap(l.Logger.Named(name)) }
func (l *logger) ResetNamed(name string) hclog.Logger { return l.wrap(l.Logger.ResetNamed(name)) }
func (l *logger) With(args ...any) hclog.Logger       { return l.wrap(l.Logger.With(plainTimes(args)...)) }

func (l *logger) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }
func (l *logger) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }
func (l *logger) Info(msg string, args ...any)  { l.Log(hclog.Info, msg, args...) }
func (l *logger) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l *logger) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

func (l *logger) Log(level hclog.Level, msg string, args ...any) {
	if level < l.Logger.GetLevel() {
		return
	}
	if level >= hclog.Warn && l.repeats.opts.RepeatWindow > 0 {
		n, print := l.repeats.note(l.prefix + "\x00" + level.String() + "\x00" + msg + "\x00" + render(args))
		if !print {
			return
		}
		if n > 0 {
			msg = fmt.Sprintf("%s (%d similar suppressed)", msg, n)
		}
	}
	l.Logger.Log(level, msg, plainTimes(args)...)
}

// note records one occurrence of key and reports whether to print it, and
// how many were suppressed since it was last printed.
func (r *repeats) note(key string) (suppressed int, print bool) {
	now := r.opts.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.seen[key]
	if ok && now.Sub(s.printed) < r.opts.RepeatWindow {
		s.suppressed++
		return 0, false
	}
	if !ok {
		if len(r.seen) >= maxTracked {
			for k, old := range r.seen {
				if now.Sub(old.printed) >= r.opts.RepeatWindow {
					delete(r.seen, k)
				}
			}
		}
		s = &seen{}
		r.seen[key] = s
	}
	suppressed = s.suppressed
	s.printed, s.suppressed = now, 0
	return suppressed, true
}

// render is the identity of a message's arguments. Durations are left out:
// they are measurements (a backoff, the time since a contact) that differ
// between repeats of the same failure.
func render(args []any) string {
	var b strings.Builder
	for _, a := range args {
		switch a.(type) {
		case time.Duration, time.Time:
			b.WriteString("\x00")
		default:
			fmt.Fprintf(&b, "%v\x00", a)
		}
	}
	return b.String()
}

// plainTimes replaces time values by RFC 3339 in UTC: hclog prints them with
// %v, which carries the monotonic clock reading of a time.Now().
func plainTimes(args []any) []any {
	var out []any
	for i, a := range args {
		t, ok := a.(time.Time)
		if !ok {
			continue
		}
		if out == nil {
			out = append([]any(nil), args...)
		}
		out[i] = t.UTC().Format(time.RFC3339Nano)
	}
	if out == nil {
		return args
	}
	return out
}
