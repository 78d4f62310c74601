package procs

import (
	"runtime"
	"syscall"
	"time"
)

// SelfCPU is the CPU time (user and system) this process has used, from
// getrusage, whose microsecond resolution suits intervals of a fraction of
// a second (/proc's clock ticks are 10 ms).
func SelfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// SetRuntime is the production setter.
func SetRuntime(n int) { runtime.GOMAXPROCS(n) }
