package allocator

import "unsafe"

// prefetch asks the CPU to load, without waiting for them, the cache lines
// of the agent at p that a cycle reads: its first 704 bytes, the hot fields
// with their inline vecs and first record. A cycle visits ten thousand
// agents in shuffled order, each cold in the cache; loading the next
// agents' lines while the current one is served hides most of that
// latency. Go has no prefetch of its own that a package may call.
//
//go:noescape
func prefetch(p unsafe.Pointer)
