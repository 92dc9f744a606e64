package bench

// CPUSeconds returns the CPU time (user + system, all threads) process
// pid has used, from /proc; pid 0 is this process.
func CPUSeconds(pid int) (float64, error) { return cpuSeconds(pid) }

// ProcMemory returns the VmRSS and VmHWM of process pid, in bytes, from
// /proc.
func ProcMemory(pid int) (rss, hwm int64, err error) { return procMem(pid) }
