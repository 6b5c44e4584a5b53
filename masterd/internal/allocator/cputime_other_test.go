//go:build !linux

package allocator

import "time"

// onCPU falls back to wall time where the thread's CPU clock is not at hand.
func onCPU(f func()) time.Duration {
	start := time.Now()
	asCycle(f)
	return time.Since(start)
}
