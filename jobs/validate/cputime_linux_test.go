//go:build linux

package validate

import (
	"runtime"
	"syscall"
	"time"
)

// cpuTime returns the CPU time that f takes on its thread. The time bounds
// that catch a quadratic check measure it rather than the wall clock,
// which grows with whatever else loads a shared machine (the bounds failed
// at a load average of 20 under -race); the CPU of the check does not.
// The goroutine keeps its thread while f runs, and no other goroutine
// runs on it meanwhile.
func cpuTime(f func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := threadCPU()
	f()
	return threadCPU() - before
}

func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
