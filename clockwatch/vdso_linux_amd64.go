//go:build linux && amd64

package clockwatch

import _ "unsafe" // go:linkname

// The kernel serves clock_gettime for CLOCK_BOOTTIME and CLOCK_MONOTONIC
// from the vDSO, without entering the kernel; golang.org/x/sys/unix's
// ClockGettime is the system call. On a virtual machine a system call is
// dear (on this project's 2-core machine, four clock reads of the
// sidecar's `status` cost more than its socket read and write), so Real
// calls the vDSO's function, which returns the same clock the system call
// reads. The runtime finds the function at start (it reads
// CLOCK_MONOTONIC with it) and lets packages refer to its address, which
// is 0 when the kernel offers no vDSO.
//
//go:linkname vdsoClockgettimeSym runtime.vdsoClockgettimeSym
var vdsoClockgettimeSym uintptr

// vdsoClockGettime calls the vDSO's clock_gettime at fn for clock id on
// a frame large enough for it (vdso_linux_amd64.s), and returns the
// reading and the function's result (0, or a negative errno).
//
//go:noescape
func vdsoClockGettime(fn uintptr, id int32) (sec, nsec int64, ret int64)

// readFast reads clock id through the vDSO; ok is false when there is no
// vDSO or it failed, and the caller makes the system call.
func readFast(id int32) (ns int64, ok bool) {
	fn := vdsoClockgettimeSym
	if fn == 0 {
		return 0, false
	}
	sec, nsec, ret := vdsoClockGettime(fn, id)
	if ret != 0 {
		return 0, false
	}
	return sec*1e9 + nsec, true
}
