package checker

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/allot/allot/tools/chaos/history"
)

// op builds an Op on key "k" over [invoke, complete] in milliseconds.
func op(kind history.Kind, invoke, complete int, outcome history.Outcome) history.Op {
	return history.Op{Key: "k", Kind: kind, Invoke: ms(invoke), Complete: ms(complete), Outcome: outcome}
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func write(value, version uint64, invoke, complete int, outcome history.Outcome) history.Op {
	o := op(history.Write, invoke, complete, outcome)
	o.Value = value
	if outcome == history.OK {
		o.OutValue, o.OutVersion = value, version
	}
	return o
}

func cas(value, ifVersion, version uint64, invoke, complete int, outcome history.Outcome) history.Op {
	o := write(value, version, invoke, complete, outcome)
	o.Kind, o.IfVersion = history.CAS, ifVersion
	o.Mismatch = outcome == history.Fail
	return o
}

func read(value, version uint64, invoke, complete int) history.Op {
	o := op(history.Read, invoke, complete, history.OK)
	o.OutValue, o.OutVersion = value, version
	return o
}

func final(value, version uint64, invoke, complete int) history.Op {
	o := read(value, version, invoke, complete)
	o.Final = true
	return o
}

func TestCheck(t *testing.T) {
	tests := map[string]struct {
		ops          []history.Op
		linearizable porcupine.CheckResult
		lost         int
		anomalies    int
	}{
		"sequential writes and reads": {
			ops: []history.Op{
				write(1, 5, 0, 10, history.OK), read(1, 5, 11, 12),
				write(2, 7, 20, 30, history.OK), final(2, 7, 40, 50),
			},
			linearizable: porcupine.Ok,
		},
		"concurrent read may see either write": {
			ops: []history.Op{
				write(1, 5, 0, 10, history.OK), write(2, 7, 20, 30, history.OK), read(1, 5, 15, 25),
				final(2, 7, 40, 50),
			},
			linearizable: porcupine.Ok,
		},
		"stale read after a write completed": {
			ops: []history.Op{
				write(1, 5, 0, 10, history.OK), write(2, 7, 20, 30, history.OK),
				read(1, 5, 40, 50), // the write of 2 had completed: a stale read
				final(2, 7, 60, 70),
			},
			linearizable: porcupine.Illegal,
		},
		"acknowledged write lost": {
			ops: []history.Op{
				write(1, 5, 0, 10, history.OK), write(2, 7, 20, 30, history.OK),
				final(1, 5, 60, 70), // 2 was acknowledged, then rolled back
			},
			linearizable: porcupine.Illegal,
			lost:         1,
		},
		"indeterminate write seen later took effect": {
			ops: []history.Op{
				write(1, 5, 0, 10, history.OK), write(2, 0, 20, 30, history.Unknown),
				read(2, 7, 40, 50), final(2, 7, 60, 70),
			},
			linearizable: porcupine.Ok,
		},
		"indeterminate write never seen may not have happened": {
			ops: []history.Op{
				write(1, 5, 0, 10, history.OK), write(2, 0, 20, 30, history.Unknown),
				read(1, 5, 40, 50), final(1, 5, 60, 70),
			},
			linearizable: porcupine.Ok,
		},
		"failed write must not be seen": {
			ops: []history.Op{
				write(1, 5, 0, 10, history.OK), write(2, 0, 20, 30, history.Fail),
				final(2, 7, 60, 70),
			},
			linearizable: porcupine.Illegal,
		},
		"cas on the current version succeeds": {
			ops: []history.Op{
				write(1, 5, 0, 10, history.OK), cas(2, 5, 7, 20, 30, history.OK),
				cas(3, 5, 0, 40, 50, history.Fail), final(2, 7, 60, 70),
			},
			linearizable: porcupine.Ok,
		},
		"cas refused although the version matched": {
			ops: []history.Op{
				write(1, 5, 0, 10, history.OK), cas(2, 5, 0, 20, 30, history.Fail),
				final(1, 5, 60, 70),
			},
			linearizable: porcupine.Illegal,
		},
		"cas refused because an unseen indeterminate write moved the version": {
			ops: []history.Op{
				write(1, 5, 0, 10, history.OK), write(9, 0, 12, 14, history.Unknown),
				cas(2, 5, 0, 20, 30, history.Fail), write(3, 11, 40, 50, history.OK), final(3, 11, 60, 70),
			},
			linearizable: porcupine.Ok,
		},
		"cas whose connection was refused says nothing": {
			ops: []history.Op{
				write(1, 5, 0, 10, history.OK),
				func() history.Op { o := cas(2, 5, 0, 20, 30, history.Fail); o.Mismatch = false; return o }(),
				final(1, 5, 60, 70),
			},
			linearizable: porcupine.Ok,
		},
		"versions go back in time": {
			ops: []history.Op{
				write(1, 9, 0, 10, history.OK), write(2, 7, 20, 30, history.OK),
				final(2, 7, 60, 70),
			},
			linearizable: porcupine.Illegal,
			lost:         1,
		},
		"a write seen at two versions was applied twice": {
			ops: []history.Op{
				write(1, 5, 0, 10, history.OK), read(1, 8, 20, 30), final(1, 8, 40, 50),
			},
			linearizable: porcupine.Ok,
			anomalies:    1,
		},
		"no final read": {
			ops:          []history.Op{write(1, 5, 0, 10, history.OK)},
			linearizable: porcupine.Ok,
			anomalies:    1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := Check(tc.ops, 10*time.Second)
			if len(res.Keys) != 1 {
				t.Fatalf("keys = %d, want 1", len(res.Keys))
			}
			k := res.Keys[0]
			if k.Linearizable != tc.linearizable {
				t.Errorf("linearizable = %s, want %s", k.Linearizable, tc.linearizable)
			}
			if len(k.Lost) != tc.lost {
				t.Errorf("lost = %v, want %d", k.Lost, tc.lost)
			}
			if len(k.Anomalies) != tc.anomalies {
				t.Errorf("anomalies = %q, want %d", k.Anomalies, tc.anomalies)
			}
			wantOK := tc.linearizable == porcupine.Ok && tc.lost == 0 && tc.anomalies == 0
			if res.OK() != wantOK {
				t.Errorf("OK() = %v, want %v:\n%s", res.OK(), wantOK, res.Summary())
			}
		})
	}
}

func TestVisualizeWritesIllegalKeys(t *testing.T) {
	res := Check([]history.Op{
		write(1, 5, 0, 10, history.OK), write(2, 7, 20, 30, history.OK), final(1, 5, 40, 50),
	}, 10*time.Second)
	files, err := res.Visualize(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 {
		t.Fatalf("files = %v, want one", files)
	}
}
