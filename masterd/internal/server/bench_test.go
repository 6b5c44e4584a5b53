package server

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkPutQuota measures the API path of a quota write on a single
// in-memory server: decoding, both validations, Raft and the FSM, encoding.
func BenchmarkPutQuota(b *testing.B) {
	for _, roles := range []int{10, 1000} {
		b.Run(fmt.Sprintf("roles=%d", roles), func(b *testing.B) {
			s := startDev(b)
			var n atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					k := n.Add(1)
					a := call(b, s, "PUT", fmt.Sprintf("/v1/quotas/bench-%d", k%int64(roles)), fmt.Sprintf(`{"limits":{"cpus":%d,"mem":1024}}`, k))
					if a.status != 200 {
						b.Fatalf("%d %s", a.status, a.body)
					}
				}
			})
		})
	}
}
