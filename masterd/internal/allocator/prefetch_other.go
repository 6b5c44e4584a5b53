//go:build !amd64

package allocator

// prefetch is a no-op where no assembly says otherwise: it only hides memory
// latency, the cycle is the same without it.
func prefetch(uintptr) {}
