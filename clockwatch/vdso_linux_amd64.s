//go:build linux && amd64

#include "textflag.h"

// func vdsoClockGettime(fn uintptr, id int32) (sec, nsec int64, ret int64)
//
// Calls the vDSO's clock_gettime(id, &ts) with the C calling convention.
// The runtime's own call (nanotime1) moves to the g0 stack, which is out
// of a package's reach; this function instead reserves a frame of 4 KiB
// and more on the goroutine's stack (the prologue grows the stack first:
// the function is not NOSPLIT), and gives C a stack pointer at the top of
// that frame, so that the vDSO, which may use up to a page of stack on a
// hardened kernel (Go issue 20427), stays inside it. The result is
// written above C's stack pointer. R12 (callee-saved in C) keeps the Go
// stack pointer. A signal while in the vDSO runs on the signal stack; a
// profiling signal there is counted as external code, and the code is no
// place for asynchronous preemption (not a Go function).
TEXT ·vdsoClockGettime(SB),0,$4160-40
	MOVQ	fn+0(FP), AX
	MOVL	id+8(FP), DI
	MOVQ	SP, R12
	LEAQ	4112(SP), SI	// &ts: 16 bytes at 4112..4128 of the frame
	LEAQ	4096(SP), SP	// C's stack: the frame below 4096
	ANDQ	$~15, SP	// aligned for C
	CALL	AX
	MOVQ	R12, SP
	MOVQ	4112(SP), BX
	MOVQ	4120(SP), CX
	MOVQ	BX, sec+16(FP)
	MOVQ	CX, nsec+24(FP)
	MOVQ	AX, ret+32(FP)
	RET
