package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/ttfx/ttfx/internal/store"
)

// PercentileMethod names how every percentile of a result is computed. It
// is the store's method, so a percentile the bench reports and one
// the gateway's /api/stats reports for the same values are the same number.
// The bench adds one rule for failure-inclusive summaries, where a failed
// request counts as an unbounded (+Inf) latency.
const PercentileMethod = store.ExactPercentileMethod +
	" In failure-inclusive summaries (with_failures) a failed request counts as +Inf, sorted above every finite value; " +
	"interpolating towards +Inf gives +Inf, and a rank that falls exactly on a finite value gives that value."

// Value is a statistic that may be unbounded. In JSON it is a number, or
// the string "+Inf" for a failure-inclusive statistic that a failed
// request pushed past every bound: JSON has no infinity, and a string
// cannot be mistaken for a huge but finite latency (Prometheus writes
// bucket bounds the same way).
type Value float64

// Inf is the unbounded Value.
var Inf = Value(math.Inf(1))

// IsInf reports whether v is unbounded.
func (v Value) IsInf() bool { return math.IsInf(float64(v), 1) }

// String formats v with one decimal (three below 10, where sub-millisecond
// parts matter), or "+Inf".
func (v Value) String() string {
	if v.IsInf() {
		return "+Inf"
	}
	if math.Abs(float64(v)) < 10 {
		return strconv.FormatFloat(float64(v), 'f', 3, 64)
	}
	return strconv.FormatFloat(float64(v), 'f', 1, 64)
}

// MarshalJSON writes a number, or "+Inf".
func (v Value) MarshalJSON() ([]byte, error) {
	f := float64(v)
	switch {
	case math.IsInf(f, 1):
		return []byte(`"+Inf"`), nil
	case math.IsNaN(f) || math.IsInf(f, -1):
		return nil, fmt.Errorf("bench: value %v cannot be written", f)
	}
	return strconv.AppendFloat(nil, f, 'f', -1, 64), nil
}

// UnmarshalJSON reads a number or "+Inf".
func (v *Value) UnmarshalJSON(b []byte) error {
	if string(b) == `"+Inf"` {
		*v = Inf
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("bench: value: want a number or \"+Inf\": %w", err)
	}
	*v = Value(f)
	return nil
}

// Stat summarises one metric over a set of requests. The statistics are
// absent (null) when no request had the metric.
type Stat struct {
	Count  int `json:"count"`  // requests where the metric is present (unbounded ones included)
	Absent int `json:"absent"` // requests where it is absent: the mark did not happen (never counted as 0)
	// Unbounded counts the requests counted as +Inf (failure-inclusive
	// summaries only; always 0 elsewhere).
	Unbounded int    `json:"unbounded"`
	Min       *Value `json:"min"`
	Max       *Value `json:"max"`
	Mean      *Value `json:"mean"`
	P50       *Value `json:"p50"`
	P90       *Value `json:"p90"`
	P95       *Value `json:"p95"`
	P99       *Value `json:"p99"`
}

// Describe summarises values (sorted in place; +Inf allowed) and the
// count of requests where the metric was absent.
func Describe(values []float64, absent int) Stat {
	s := Stat{Count: len(values), Absent: absent}
	if len(values) == 0 {
		return s
	}
	slices.Sort(values)
	sum := 0.0
	for _, v := range values {
		sum += v
		if math.IsInf(v, 1) {
			s.Unbounded++
		}
	}
	p := func(v float64) *Value { x := Value(v); return &x }
	s.Min, s.Max = p(values[0]), p(values[len(values)-1])
	s.Mean = p(sum / float64(len(values)))
	s.P50 = p(Percentile(values, 0.50))
	s.P90 = p(Percentile(values, 0.90))
	s.P95 = p(Percentile(values, 0.95))
	s.P99 = p(Percentile(values, 0.99))
	return s
}

// Percentile returns the p-th quantile (p in [0,1]) of sorted (ascending,
// non-empty, +Inf allowed at the top) by PercentileMethod. It is
// store.Percentile, except where an unbounded value takes part: there the
// interpolation x + f·(+Inf − x) is +Inf for f > 0, and exactly x for
// f = 0 (where plain arithmetic would give 0·Inf = NaN).
func Percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	h := float64(n-1) * p
	lo := int(math.Floor(h))
	if lo >= n-1 {
		return sorted[n-1]
	}
	if lo < 0 {
		return sorted[0]
	}
	if math.IsInf(sorted[lo+1], 1) {
		if h == float64(lo) {
			return sorted[lo]
		}
		return math.Inf(1)
	}
	return store.Percentile(sorted, p)
}

// Get returns the statistic's value and whether it is present.
func (p *Value) Get() (float64, bool) {
	if p == nil {
		return 0, false
	}
	return float64(*p), true
}
