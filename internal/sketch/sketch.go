// Package sketch is a mergeable quantile sketch with a relative error bound,
// of the log-bucketed kind (DataDog's DDSketch, Prometheus native
// histograms): a value v > 0 counts in bucket i = ⌈log_γ v⌉, and every value
// in a bucket is within RelativeAccuracy of the bucket's representative.
// Merging adds bucket counts, so a sketch merged from any split of a data set
// is the sketch of the whole, and the error bound survives any number of
// merges. That is what rollups need: per-minute sketches stored as bytes,
// merged into hours and days on read, answering p50..p99 of latencies
// (float milliseconds) and rates (tokens/s) — something t-digest, whose
// error depends on the merge order, cannot promise.
//
// Besides the buckets a Sketch keeps the exact count, minimum, maximum and
// sum, so Min, Max and Mean are exact, and quantile estimates never stray
// outside the observed range.
//
// The index range is bounded by MinIndexable and MaxIndexable (2,419
// buckets per sign at 1%), so the stores never collapse buckets and the
// error bound holds for every value in that range whatever the data.
package sketch

import "math"

// RelativeAccuracy (α) is the relative error bound of a bucket: every value
// in a bucket is within α·|value| of its representative. It is a constant,
// not a parameter, because stored rollups merge only at one accuracy; at 1%
// (DDSketch's usual choice) a store spans at most 2,419 buckets.
const RelativeAccuracy = 0.01

// MinIndexable is the smallest magnitude that gets its own bucket. Values of
// smaller magnitude count in the zero bucket and are estimated as exactly 0:
// an absolute error of at most 1e-9, which is a picosecond when the unit is
// milliseconds.
const MinIndexable = 1e-9

// MaxIndexable is the largest magnitude with a bucket of its own. Larger
// magnitudes (a trillion milliseconds is 31 years) are clamped into the top
// bucket, whose representative is about 1e12: quantile estimates that land
// there lose the relative bound (they are still clamped into [Min, Max], and
// Min, Max, Mean stay exact).
const MaxIndexable = 1e12

// Index bounds, fixed here rather than computed from MinIndexable and
// MaxIndexable at start-up, because the encoding depends on them: a decoder
// must accept exactly what any encoder, on any machine, may produce.
// TestIndexBounds checks they are ⌈log_γ MinIndexable⌉ and
// ⌈log_γ MaxIndexable⌉.
const (
	minIndex = -1036
	maxIndex = 1382
	// maxBuckets is the number of buckets a store can hold.
	maxBuckets = maxIndex - minIndex + 1
)

var (
	// gamma is (1+α)/(1−α), the ratio of consecutive bucket bounds: bucket i
	// holds (γ^(i−1), γ^i].
	gamma = (1 + RelativeAccuracy) / (1 - RelativeAccuracy)
	// lnGamma is ln γ, as log1p of γ−1 = 2α/(1−α) to keep the last digits
	// that ln((1+α)/(1−α)) would round away.
	lnGamma = math.Log1p(2 * RelativeAccuracy / (1 - RelativeAccuracy))
	// indexScale turns ln v into log_γ v.
	indexScale = 1 / lnGamma
)

// index is the bucket of a magnitude m ≥ MinIndexable, clamped into the
// index bounds (m above MaxIndexable lands in the top bucket).
func index(m float64) int {
	i := int(math.Ceil(math.Log(m) * indexScale))
	return min(max(i, minIndex), maxIndex)
}

// value is the representative of bucket i, 2γ^i/(γ+1) = (1−α)γ^i: its
// relative distance to both bounds γ^(i−1) and γ^i is (γ−1)/(γ+1) = α.
func value(i int) float64 {
	return (1 - RelativeAccuracy) * math.Exp(float64(i)*lnGamma)
}

// maxCount bounds the count of a sketch. The encoding packs a zigzagged
// count difference and a flag into one uvarint, which needs counts below
// 2^62; at a million values a second that is 146,000 years.
const maxCount = 1<<62 - 1

// A Sketch summarizes a set of finite float64 values. The zero value is an
// empty sketch ready to use. A Sketch is not safe for concurrent use.
type Sketch struct {
	pos  store  // magnitudes of values ≥ MinIndexable
	neg  store  // magnitudes of values ≤ −MinIndexable
	zero uint64 // values of magnitude below MinIndexable

	count uint64  // values added; 0 means empty and min, max, sum unset
	min   float64 // smallest value added
	max   float64 // largest value added
	sum   float64 // float sum of the values added
}

// Add adds v to the sketch and reports whether it did: NaN and ±Inf are not
// added, since they have no bucket and would poison the sum and the bounds.
func (s *Sketch) Add(v float64) bool {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return false
	}
	if v == 0 {
		v = 0 // −0 becomes +0, so Min and Max never report a signed zero
	}
	if s.count == 0 {
		s.min, s.max = v, v
	} else {
		s.min = min(s.min, v)
		s.max = max(s.max, v)
	}
	s.count++
	s.sum += v
	switch {
	case v >= MinIndexable:
		s.pos.add(index(v), 1)
	case v <= -MinIndexable:
		s.neg.add(index(-v), 1)
	default:
		s.zero++
	}
	return true
}

// Count is the number of values added.
func (s *Sketch) Count() uint64 { return s.count }

// Min is the smallest value added, exactly; false if the sketch is empty.
func (s *Sketch) Min() (float64, bool) { return s.min, s.count > 0 }

// Max is the largest value added, exactly; false if the sketch is empty.
func (s *Sketch) Max() (float64, bool) { return s.max, s.count > 0 }

// Sum is the float sum of the values added (0 for an empty sketch). Sums of
// merged sketches are added as floats, so they agree with a direct sum up to
// rounding.
func (s *Sketch) Sum() float64 { return s.sum }

// Mean is Sum/Count; false if the sketch is empty.
func (s *Sketch) Mean() (float64, bool) {
	if s.count == 0 {
		return 0, false
	}
	return s.sum / float64(s.count), true
}

// Merge adds the values summarized by o to s, as if each had been added to
// s: bucket counts, count, min and max become exactly those of the sketch of
// the union, and the sum is the float sum of both sums. o is not changed;
// s.Merge(s) doubles s.
func (s *Sketch) Merge(o *Sketch) {
	if o.count == 0 {
		return
	}
	if s.count == 0 {
		s.min, s.max = o.min, o.max
	} else {
		s.min = min(s.min, o.min)
		s.max = max(s.max, o.max)
	}
	s.count += o.count
	s.sum += o.sum
	s.zero += o.zero
	s.pos.merge(&o.pos)
	s.neg.merge(&o.neg)
}

// Clone returns a copy of s whose bucket arrays hold only its non-empty
// buckets. A rollup compaction makes a cell per key of every projection,
// most of them merged from one or two rows at low volume; a Merge into an
// empty sketch allocated a padded window (65 buckets or more) for each,
// which was a tenth of the CPU of seeding a week of 30 000 records
// (profiled: makeslice under store.grow).
func (s *Sketch) Clone() *Sketch {
	return &Sketch{pos: s.pos.clone(), neg: s.neg.clone(), zero: s.zero, count: s.count, min: s.min, max: s.max, sum: s.sum}
}

// Reset empties the sketch and keeps its bucket arrays, so a caller that
// merges many rollups into one sketch per query does not allocate again.
func (s *Sketch) Reset() {
	s.pos.reset()
	s.neg.reset()
	s.zero = 0
	s.count, s.min, s.max, s.sum = 0, 0, 0, 0
}

// A store counts magnitudes per bucket index in a dense array covering a
// window of indices, grown at either end as needed. The window never exceeds
// [minIndex, maxIndex], so a store never holds more than maxBuckets counts
// (19 KiB): dense beats a map or sorted pairs for Add and merge speed, and
// that bound makes collapsing buckets unnecessary.
type store struct {
	counts []uint64 // counts[k] is the count of bucket base+k
	base   int      // index of counts[0]
	lo, hi int      // lowest and highest non-empty index; set only if n > 0
	n      uint64   // sum of counts
	// Between calls every count outside [lo, hi] is zero, which lets reset
	// clear only that range.
}

// minPad is the least number of spare buckets a store allocates past each
// end of what it needs: a latency distribution spans a few hundred buckets,
// so this saves the first few regrowths without costing much (512 bytes).
const minPad = 32

// grow makes the window cover [lo, hi]. It pads both ends by half the new
// span, so a store that keeps growing one way reallocates a logarithmic
// number of times.
func (s *store) grow(lo, hi int) {
	if s.counts != nil {
		if lo >= s.base && hi < s.base+len(s.counts) {
			return
		}
		lo = min(lo, s.base)
		hi = max(hi, s.base+len(s.counts)-1)
	}
	pad := max(minPad, (hi-lo+1)/2)
	newLo := max(minIndex, lo-pad)
	newHi := min(maxIndex, hi+pad)
	counts := make([]uint64, newHi-newLo+1)
	if s.counts != nil {
		// The whole window, not just [lo, hi]: MergeBinary grows a store
		// in the middle of adding counts, before it updates lo and hi.
		copy(counts[s.base-newLo:], s.counts)
	}
	s.counts, s.base = counts, newLo
}

// add adds c > 0 values to bucket i.
func (s *store) add(i int, c uint64) {
	if i < s.base || i >= s.base+len(s.counts) {
		s.grow(i, i)
	}
	s.counts[i-s.base] += c
	s.extend(i, i, c)
}

// extend records that buckets in [lo, hi] received c values in all; c = 0
// (an empty range) changes nothing.
func (s *store) extend(lo, hi int, c uint64) {
	switch {
	case c == 0:
		return
	case s.n == 0:
		s.lo, s.hi = lo, hi
	default:
		s.lo = min(s.lo, lo)
		s.hi = max(s.hi, hi)
	}
	s.n += c
}

// merge adds o's counts to s.
func (s *store) merge(o *store) {
	if o.n == 0 {
		return
	}
	s.grow(o.lo, o.hi)
	dst := s.counts[o.lo-s.base : o.hi-s.base+1]
	src := o.counts[o.lo-o.base : o.hi-o.base+1]
	for k, c := range src {
		dst[k] += c
	}
	s.extend(o.lo, o.hi, o.n)
}

// clone returns a copy of s whose window is its non-empty range.
func (s *store) clone() store {
	if s.n == 0 {
		return store{}
	}
	c := store{counts: make([]uint64, s.hi-s.lo+1), base: s.lo, lo: s.lo, hi: s.hi, n: s.n}
	copy(c.counts, s.counts[s.lo-s.base:s.hi-s.base+1])
	return c
}

// reset empties the store and keeps its window.
func (s *store) reset() {
	if s.n > 0 {
		clear(s.counts[s.lo-s.base : s.hi-s.base+1])
	}
	s.n = 0
}
