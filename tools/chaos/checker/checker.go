// Package checker decides whether a chaos history is correct: linearizable
// per key (porcupine, with a model of a register whose version is the Raft
// index of the write that set it), no acknowledged write lost, and no write
// seen at two versions (applied twice). It does no I/O but the optional
// visualization of a failed key.
package checker

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/allot/allot/tools/chaos/history"
)

// KeyResult is the verdict on one key.
type KeyResult struct {
	Key string
	// Linearizable is porcupine's answer: Ok, Illegal, or Unknown when the
	// search ran out of time (not a pass).
	Linearizable porcupine.CheckResult
	// Lost are acknowledged writes the final state does not account for.
	Lost []history.Op
	// Anomalies are contradictions found before the search: one value at
	// two versions, two values at one version, no final read.
	Anomalies []string
	Ops       int // operations checked (after dropping failed ones)
	info      porcupine.LinearizationInfo
	model     porcupine.Model
}

// OK reports whether the key passed every check.
func (k KeyResult) OK() bool {
	return k.Linearizable == porcupine.Ok && len(k.Lost) == 0 && len(k.Anomalies) == 0
}

// Result is the verdict on a whole history.
type Result struct{ Keys []KeyResult }

// OK reports whether every key passed.
func (r Result) OK() bool {
	for _, k := range r.Keys {
		if !k.OK() {
			return false
		}
	}
	return true
}

// LostWrites counts the acknowledged writes lost over all keys.
func (r Result) LostWrites() int {
	n := 0
	for _, k := range r.Keys {
		n += len(k.Lost)
	}
	return n
}

// Linearizable is "Ok" when every key is, else the worst answer.
func (r Result) Linearizable() porcupine.CheckResult {
	worst := porcupine.Ok
	for _, k := range r.Keys {
		switch k.Linearizable {
		case porcupine.Illegal:
			return porcupine.Illegal
		case porcupine.Unknown:
			worst = porcupine.Unknown
		}
	}
	return worst
}

// Summary is one line per key that failed, or "ok".
func (r Result) Summary() string {
	var lines []string
	for _, k := range r.Keys {
		if k.OK() {
			continue
		}
		line := fmt.Sprintf("key %s: linearizable %s, %d lost writes", k.Key, k.Linearizable, len(k.Lost))
		for _, op := range k.Lost {
			line += "\n  lost: " + op.String()
		}
		for _, a := range k.Anomalies {
			line += "\n  " + a
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return "ok"
	}
	return strings.Join(lines, "\n")
}

// Visualize writes porcupine's HTML view of every key that is not
// linearizable into dir (key-<name>.html) and returns the files written.
func (r Result) Visualize(dir string) ([]string, error) {
	var files []string
	for _, k := range r.Keys {
		if k.Linearizable != porcupine.Illegal {
			continue
		}
		path := filepath.Join(dir, "key-"+k.Key+".html")
		if err := porcupine.VisualizePath(k.model, k.info, path); err != nil {
			return files, fmt.Errorf("visualize key %s: %w", k.Key, err)
		}
		files = append(files, path)
	}
	return files, nil
}

// Check checks ops, key by key. timeout bounds porcupine's search per key.
func Check(ops []history.Op, timeout time.Duration) Result {
	byKey := map[string][]history.Op{}
	for _, op := range ops {
		byKey[op.Key] = append(byKey[op.Key], op)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var res Result
	for _, k := range keys {
		res.Keys = append(res.Keys, checkKey(k, byKey[k], timeout))
	}
	return res
}

func checkKey(key string, ops []history.Op, timeout time.Duration) KeyResult {
	res := KeyResult{Key: key}
	versions, anomalies := versionsOf(ops)
	res.Anomalies = anomalies
	lost, problem := lostWrites(ops)
	res.Lost = lost
	if problem != "" {
		res.Anomalies = append(res.Anomalies, problem)
	}
	porc := operations(ops)
	res.Ops = len(porc)
	res.model = registerModel(versions)
	res.Linearizable, res.info = porcupine.CheckOperationsVerbose(res.model, porc, timeout)
	return res
}

// versionsOf maps every value seen to the version it was seen at. Versions
// are Raft indexes, so one write has one version and one version one write:
// anything else means a write was applied twice or a version reused.
func versionsOf(ops []history.Op) (map[uint64]uint64, []string) {
	versions := map[uint64]uint64{}
	values := map[uint64]uint64{}
	reported := map[uint64]bool{} // one anomaly per value is enough
	var anomalies []string
	for _, op := range ops {
		if op.Outcome != history.OK || op.OutValue == 0 || reported[op.OutValue] {
			continue
		}
		if v, ok := versions[op.OutValue]; ok && v != op.OutVersion {
			reported[op.OutValue] = true
			anomalies = append(anomalies, fmt.Sprintf("value %d seen at versions %d and %d (a write applied twice?): %s", op.OutValue, v, op.OutVersion, op))
			continue
		}
		if w, ok := values[op.OutVersion]; ok && w != op.OutValue {
			reported[op.OutValue] = true
			anomalies = append(anomalies, fmt.Sprintf("version %d seen with values %d and %d: %s", op.OutVersion, w, op.OutValue, op))
			continue
		}
		versions[op.OutValue] = op.OutVersion
		values[op.OutVersion] = op.OutValue
	}
	return versions, anomalies
}

// lostWrites compares every acknowledged write with the final reads. The
// final state holds the write with the highest Raft index that took
// effect; an acknowledged write with a higher index, or the same index and
// another value, was rolled back after it was acknowledged.
func lostWrites(ops []history.Op) ([]history.Op, string) {
	var final *history.Op
	for i, op := range ops {
		if op.Final && op.Outcome == history.OK && (final == nil || op.OutVersion > final.OutVersion) {
			final = &ops[i]
		}
	}
	if final == nil {
		return nil, "no successful final read: lost writes cannot be checked"
	}
	var lost []history.Op
	for _, op := range ops {
		if !op.IsWrite() || op.Outcome != history.OK {
			continue
		}
		if op.OutVersion > final.OutVersion || (op.OutVersion == final.OutVersion && op.Value != final.OutValue) {
			lost = append(lost, op)
		}
	}
	return lost, ""
}

// input and output are what porcupine sees of an Op.
type input struct {
	kind      history.Kind
	value     uint64 // written
	ifVersion uint64 // CAS
	version   uint64 // a write's acknowledged version, 0 if unknown
}

type output struct {
	outcome history.Outcome
	value   uint64 // read
}

// operations turns the history into porcupine's: failed operations took no
// effect and are dropped; an indeterminate write may take effect at any
// time after its invocation, so it returns "never" (math.MaxInt64) unless
// a read saw its value, which bounds it by that read's completion.
func operations(ops []history.Op) []porcupine.Operation {
	seen := map[uint64]time.Duration{} // value → earliest completion of an op that saw it
	for _, op := range ops {
		if op.Outcome == history.OK && op.OutValue != 0 {
			if t, ok := seen[op.OutValue]; !ok || op.Complete < t {
				seen[op.OutValue] = op.Complete
			}
		}
	}
	var out []porcupine.Operation
	for _, op := range ops {
		in := input{kind: op.Kind, value: op.Value, ifVersion: op.IfVersion}
		ret := int64(op.Complete)
		switch {
		case op.Outcome == history.OK && op.IsWrite():
			in.version = op.OutVersion
		case op.Outcome == history.Fail && op.Mismatch:
			// A CAS refused with 412 is kept: it says the version did
			// not match (a refused connection says nothing).
		case op.Outcome == history.Unknown && op.IsWrite():
			ret = math.MaxInt64
			if t, ok := seen[op.Value]; ok {
				ret = int64(t)
			}
		case op.Outcome != history.OK:
			continue // failed reads and writes took no effect
		}
		out = append(out, porcupine.Operation{
			ClientId: op.Client,
			Input:    in,
			Call:     int64(op.Invoke),
			Output:   output{outcome: op.Outcome, value: op.OutValue},
			Return:   ret,
			Metadata: op.Server,
		})
	}
	return out
}

// registerModel is one key: its state is the value last written (0 when
// absent). Its version is versions[value], the Raft index that write was
// stored at (0 when no one saw it), so versions must grow along the
// linearization and a CAS matches only the write whose version it names.
func registerModel(versions map[uint64]uint64) porcupine.Model {
	versionOf := func(value uint64) uint64 { return versions[value] }
	return porcupine.Model{
		Init: func() any { return uint64(0) },
		Step: func(state, in, out any) (bool, any) {
			cur, i, o := state.(uint64), in.(input), out.(output)
			// later is whether a write at version v may follow the state.
			later := func(v uint64) bool {
				return v == 0 || versionOf(cur) == 0 || versionOf(cur) < v
			}
			matches := cur != 0 && versionOf(cur) == i.ifVersion
			switch i.kind {
			case history.Read:
				return o.value == cur, cur
			case history.Write:
				return later(i.version), i.value
			case history.CAS:
				switch o.outcome {
				case history.OK:
					return matches && later(i.version), i.value
				case history.Fail:
					return !matches, cur
				default: // unknown: it took effect if it matched
					if matches {
						return true, i.value
					}
					return true, cur
				}
			}
			return false, cur
		},
		Equal: func(a, b any) bool { return a.(uint64) == b.(uint64) },
		DescribeOperation: func(in, out any) string {
			i, o := in.(input), out.(output)
			switch i.kind {
			case history.Read:
				return fmt.Sprintf("read → %d", o.value)
			case history.Write:
				return fmt.Sprintf("write %d (%s, version %d)", i.value, o.outcome, i.version)
			default:
				return fmt.Sprintf("cas %d if version %d (%s)", i.value, i.ifVersion, o.outcome)
			}
		},
		DescribeState: func(state any) string {
			v := state.(uint64)
			return fmt.Sprintf("%d @ version %d", v, versionOf(v))
		},
	}
}
