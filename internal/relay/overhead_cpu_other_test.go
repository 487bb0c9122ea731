//go:build !unix

package relay_test

import "time"

// processCPU is not measured where getrusage does not exist; the benchmark
// then leaves the CPU metrics out.
func processCPU() (time.Duration, bool) { return 0, false }
