package config

import (
	"strings"
	"testing"
	"time"
)

// FuzzParseDuration: the read API's since= and bucket= reach ParseDuration
// from the network. It never panics; without a day prefix it agrees with
// time.ParseDuration; with one, the days add up.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"30d", "1d12h", "-1d", "90s", "0", "d", "1d-1h", "106751d", "106752d", "99999999999999999999d", "1dd", "7d0s", "", "1.5d", "106751d100h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			return
		}
		if !strings.Contains(s, "d") {
			if want, err := time.ParseDuration(s); err != nil || want != d {
				t.Fatalf("ParseDuration(%q) = %v, time.ParseDuration says %v, %v", s, d, want, err)
			}
			return
		}
		days, rest, _ := strings.Cut(strings.TrimPrefix(s, "-"), "d")
		if rest == "" {
			rest = "0s"
		}
		more, err := time.ParseDuration(rest)
		if err != nil || more < 0 || strings.HasPrefix(days, "+") {
			t.Fatalf("ParseDuration(%q) = %v, but its rest %q does not parse", s, d, rest)
		}
		if neg := strings.HasPrefix(s, "-"); neg != (d < 0) && d != 0 {
			t.Fatalf("ParseDuration(%q) = %v: wrong sign (overflow?)", s, d)
		}
		if abs := max(d, -d); abs < more {
			t.Fatalf("ParseDuration(%q) = %v, less than its rest %v", s, d, more)
		}
	})
}
