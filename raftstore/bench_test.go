package raftstore

import (
	"fmt"
	"testing"

	"github.com/allot/allot/masterd/api"
	"github.com/hashicorp/raft"
)

// BenchmarkFSMApply measures one quota write through FSM.Apply (decode,
// hierarchy and capacity checks, store, audit) with a number of quotas
// already stored: teams with nine child roles each, the hierarchy and
// capacity checks scanning every quota on each write.
func BenchmarkFSMApply(b *testing.B) {
	for _, quotas := range []int{10, 100, 1000} {
		for _, role := range []string{"child", "team"} {
			b.Run(fmt.Sprintf("quotas=%d/role=%s", quotas, role), func(b *testing.B) {
				f := NewFSM(nil)
				var index uint64
				apply := func(c Command) {
					index++
					if res := f.Apply(logEntry(b, index, c)).(Result); res.Err != nil {
						b.Fatalf("%s: %v", c.Type(), res.Err)
					}
				}
				apply(admit("n1", api.Resources{"cpus": 1e6, "mem": 1e9}))
				var targets []string
				for i := range quotas / 10 {
					team := fmt.Sprintf("team%04d", i)
					apply(quotaSet(team, api.Resources{"cpus": 90, "mem": 90e3}, api.Resources{"cpus": 200, "mem": 200e3}))
					if role == "team" {
						targets = append(targets, team)
					}
					for j := range 9 {
						child := fmt.Sprintf("%s/svc%d", team, j)
						apply(quotaSet(child, api.Resources{"cpus": 10, "mem": 10e3}, api.Resources{"cpus": 20, "mem": 20e3}))
						if role == "child" {
							targets = append(targets, child)
						}
					}
				}
				// Alternate between two guarantees so every write changes the quota.
				var data [2][][]byte
				for k, cpus := range []float64{9, 10} {
					for _, target := range targets {
						g := api.Resources{"cpus": cpus, "mem": 10e3}
						if role == "team" {
							g = api.Resources{"cpus": cpus * 10, "mem": 90e3}
						}
						entry := logEntry(b, 0, quotaSet(target, g, api.Resources{"cpus": 200, "mem": 200e3}))
						data[k] = append(data[k], entry.Data)
					}
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					index++
					l := &raft.Log{Index: index, Type: raft.LogCommand, Data: data[i/len(targets)%2][i%len(targets)]}
					if res := f.Apply(l).(Result); res.Err != nil {
						b.Fatal(res.Err)
					}
					i++
				}
			})
		}
	}
}
