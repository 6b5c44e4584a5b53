#include "textflag.h"

// func prefetch(p uintptr)
//
// Eleven lines: the part of an agent a cycle reads (see agent).
TEXT ·prefetch(SB), NOSPLIT, $0-8
	MOVQ p+0(FP), AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	PREFETCHT0 128(AX)
	PREFETCHT0 192(AX)
	PREFETCHT0 256(AX)
	PREFETCHT0 320(AX)
	PREFETCHT0 384(AX)
	PREFETCHT0 448(AX)
	PREFETCHT0 512(AX)
	PREFETCHT0 576(AX)
	PREFETCHT0 640(AX)
	RET
