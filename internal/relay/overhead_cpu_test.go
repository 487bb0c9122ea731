//go:build unix

package relay_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) the whole test process has
// used so far. The benchmark runs the client, the simulator and the relay
// in one process, so the difference between two paths' CPU per event is
// what the extra hop costs.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
