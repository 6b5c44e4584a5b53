package allocator

// prefetch asks the CPU to load, without waiting for them, the 704 bytes
// at p: the part of an agent a cycle reads, its hot fields with their
// inline vecs and first record. A cycle visits ten thousand agents in
// shuffled order, each cold in the cache; loading the next agents' lines
// while the current one is served hides most of that latency. Go has no
// prefetch of its own that a package may call. p is a plain address: a
// prefetch never faults, and nothing is read through it.
func prefetch(p uintptr)
