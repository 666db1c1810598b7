//go:build !linux

package validate

import "time"

// cpuTime returns how long f takes. Where a thread's CPU time cannot be
// read, it is the wall clock (see the Linux version).
func cpuTime(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}
