package store

import (
	"math"
	"math/bits"
	"slices"
)

// ExactPercentileMethod names the exact percentile method of Percentile
// and Summarize: the one the benchmark client uses over its own samples, and
// the reference the store's sketches are tested against.
const ExactPercentileMethod = "R-7: linear interpolation between closest ranks (the default of numpy.percentile, " +
	"R's quantile type 7 and Excel's PERCENTILE.INC). The n present values are sorted x[0] ≤ … ≤ x[n−1]; " +
	"for p in [0,1], h = (n−1)·p and the percentile is x[⌊h⌋] + (h − ⌊h⌋)·(x[⌊h⌋+1] − x[⌊h⌋]). " +
	"Absent values are excluded and counted in absent."

// Percentile returns the p-th quantile (p in [0,1]) of sorted values by the
// method of ExactPercentileMethod. sorted must be non-empty and ascending.
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
	return sorted[lo] + (h-float64(lo))*(sorted[lo+1]-sorted[lo])
}

// Summarize summarises the present values of a field and the count of
// records where it was absent. It reorders values.
//
// The percentiles are those of Percentile over the sorted values, but
// Summarize does not sort: it selects the few order statistics the four
// percentiles read (quickselect, linear time), which over a million values
// is several times faster than sorting them.
func Summarize(values []float64, absent int) FieldSummary {
	s := FieldSummary{Count: len(values), Absent: absent}
	n := len(values)
	if n == 0 {
		return s
	}
	lo, hi, sum := values[0], values[0], 0.0
	for _, v := range values {
		lo, hi = min(lo, v), max(hi, v)
		sum += v
	}
	ps := [...]float64{0.50, 0.90, 0.95, 0.99}
	// The ranks each percentile interpolates between, ascending.
	var ranks []int
	for _, p := range ps {
		k := int(math.Floor(float64(n-1) * p))
		ranks = append(ranks, k, min(k+1, n-1))
	}
	slices.Sort(ranks)
	ranks = slices.Compact(ranks)
	from := 0
	for _, k := range ranks {
		// values[:from] are all ≤ values[from:], so the rank-k value
		// lies in values[from:].
		selectKth(values[from:], k-from)
		from = k + 1
	}
	at := func(p float64) *float64 {
		h := float64(n-1) * p
		k := int(math.Floor(h))
		v := values[k]
		if k+1 < n {
			v += (h - float64(k)) * (values[k+1] - values[k])
		}
		return &v
	}
	f := func(v float64) *float64 { return &v }
	s.Min, s.Max, s.Mean = f(lo), f(hi), f(sum/float64(n))
	s.P50, s.P90, s.P95, s.P99 = at(ps[0]), at(ps[1]), at(ps[2]), at(ps[3])
	return s
}

// selectKth reorders a so that a[k] holds the value it would hold sorted,
// with no greater value before it and no smaller one after. It is
// quickselect with a median-of-three pivot, falling back to sorting a
// range that shrinks too slowly, so it stays O(n log n) at worst.
func selectKth(a []float64, k int) {
	lo, hi := 0, len(a)-1
	budget := 2 * bits.Len(uint(len(a)))
	for lo < hi {
		if budget == 0 || hi-lo < 16 {
			slices.Sort(a[lo : hi+1])
			return
		}
		budget--
		mid := lo + (hi-lo)/2
		// Median of three to a[mid].
		if a[mid] < a[lo] {
			a[mid], a[lo] = a[lo], a[mid]
		}
		if a[hi] < a[lo] {
			a[hi], a[lo] = a[lo], a[hi]
		}
		if a[hi] < a[mid] {
			a[hi], a[mid] = a[mid], a[hi]
		}
		pivot := a[mid]
		// Hoare partition: a[lo..j] ≤ pivot ≤ a[j+1..hi].
		i, j := lo-1, hi+1
		for {
			for i++; a[i] < pivot; i++ {
			}
			for j--; a[j] > pivot; j-- {
			}
			if i >= j {
				break
			}
			a[i], a[j] = a[j], a[i]
		}
		if k <= j {
			hi = j
		} else {
			lo = j + 1
		}
	}
}
