package web

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// group inserts thousands separators into the integer part of s.
func group(s string) string {
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	intPart, frac, hasFrac := strings.Cut(s, ".")
	var b strings.Builder
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	out := b.String()
	if hasFrac {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}

// num formats a value with a precision that suits its size: sub-millisecond
// local phases keep two decimals, seconds-long waits none.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0"
	case a < 0.001:
		// Routing can take a few hundred nanoseconds: two significant
		// digits rather than a misleading 0.000.
		return strconv.FormatFloat(v, 'g', 2, 64)
	case a < 0.1:
		// Local phases are often microseconds: keep them visible.
		return strconv.FormatFloat(v, 'f', 3, 64)
	case a < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case a < 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return group(strconv.FormatFloat(v, 'f', 0, 64))
}

// tickNum formats an axis tick: the shortest form, with separators.
func tickNum(v float64) string {
	v = math.Round(v*1e6) / 1e6 // undo the float error of i*step
	return group(strconv.FormatFloat(v, 'f', -1, 64))
}

// ms formats milliseconds with their unit.
func ms(v float64) string { return num(v) + " ms" }

// msPtr formats an optional value; nil is absent, never 0.
func msPtr(v *float64) string {
	if v == nil {
		return "absent"
	}
	return ms(*v)
}

// tps formats a rate in tokens per second.
func tps(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) + " tok/s" }

// percent formats a fraction as a percentage.
func percent(f float64) string {
	if f == 0 {
		return "0%"
	}
	p := f * 100
	if p < 10 {
		return strconv.FormatFloat(p, 'f', 1, 64) + "%"
	}
	return strconv.FormatFloat(p, 'f', 0, 64) + "%"
}

// niceStep returns a step of 1, 2 or 5 × 10^k so that [0, max] is cut into
// about n intervals.
func niceStep(max float64, n int) float64 {
	if max <= 0 || math.IsNaN(max) || math.IsInf(max, 0) {
		return 1
	}
	raw := max / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// niceMax rounds max up to a whole number of steps and returns both.
func niceMax(max float64, n int) (top, step float64) {
	step = niceStep(max, n)
	// The epsilon keeps 0.3/0.1 = 2.9999999999999996 at 3 steps, and
	// the rounding drops the float error of the product.
	top = math.Ceil(max/step-1e-9) * step
	top, _ = strconv.ParseFloat(strconv.FormatFloat(top, 'g', 12, 64), 64)
	if top <= 0 {
		top = step
	}
	return top, step
}

// timeSteps are the steps a time axis may use, with their label layouts.
var timeSteps = []struct {
	d      time.Duration
	layout string
}{
	{time.Second, "15:04:05"}, {2 * time.Second, "15:04:05"}, {5 * time.Second, "15:04:05"},
	{10 * time.Second, "15:04:05"}, {15 * time.Second, "15:04:05"}, {30 * time.Second, "15:04:05"},
	{time.Minute, "15:04"}, {2 * time.Minute, "15:04"}, {5 * time.Minute, "15:04"}, {10 * time.Minute, "15:04"},
	{15 * time.Minute, "15:04"}, {30 * time.Minute, "15:04"}, {time.Hour, "15:04"}, {2 * time.Hour, "15:04"},
	{3 * time.Hour, "Jan 2 15:04"}, {6 * time.Hour, "Jan 2 15:04"}, {12 * time.Hour, "Jan 2 15:04"},
	{24 * time.Hour, "Jan 2"}, {2 * 24 * time.Hour, "Jan 2"}, {7 * 24 * time.Hour, "Jan 2"},
}

// timeTicks returns tick times in [from, to] about n apart, aligned in loc,
// and their label layout.
func timeTicks(from, to time.Time, n int, loc *time.Location) ([]time.Time, string) {
	span := to.Sub(from)
	i := 0
	for i < len(timeSteps)-1 && timeSteps[i].d*time.Duration(n) < span {
		i++
	}
	st := timeSteps[i]
	_, off := from.In(loc).Zone()
	shift := time.Duration(off) * time.Second
	// Align to the step in local time: truncate the shifted instant.
	first := from.Add(shift).Truncate(st.d).Add(-shift)
	if first.Before(from) {
		first = first.Add(st.d)
	}
	var out []time.Time
	for t := first; !t.After(to) && len(out) < 4*n; t = t.Add(st.d) {
		out = append(out, t)
	}
	return out, st.layout
}

// bucketSizes are the widths the time series may use.
var bucketSizes = []time.Duration{
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
}

// bucketFor picks the smallest bucket that cuts span into at most n.
func bucketFor(span time.Duration, n int) time.Duration {
	for _, b := range bucketSizes {
		if span/b <= time.Duration(n) {
			return b
		}
	}
	return bucketSizes[len(bucketSizes)-1] * (span/(bucketSizes[len(bucketSizes)-1]*time.Duration(n)) + 1)
}

// durText writes a bucket width for a person ("1m", "30s", "1h").
func durText(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	case d%time.Hour == 0:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	case d%time.Minute == 0:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	}
	return d.String()
}
