package sketch

// Quantile estimates the p-quantile (p in [0, 1]) the way R's type 7 does
// (numpy's and most spreadsheets' default): with the n values sorted as
// x[0] ≤ … ≤ x[n−1], h = (n−1)p and l = ⌊h⌋, the quantile is
// x[l] + (h−l)(x[l+1] − x[l]).
//
// Each order statistic x[k] is estimated by the representative of the bucket
// holding rank k, clamped into [Min, Max]. When x[l] and x[l+1] have
// magnitudes in [MinIndexable, MaxIndexable] or are 0, the result is within
// RelativeAccuracy·max(|x[l]|, |x[l+1]|) of the exact R-7 quantile (up to
// float rounding): each estimate is within α of its order statistic,
// clamping into a range that holds the true value only brings it closer,
// and interpolating is a convex combination of the two errors. Values of
// magnitude below MinIndexable are estimated as 0, and those above
// MaxIndexable as about MaxIndexable.
//
// Quantile returns false for an empty sketch or p outside [0, 1].
func (s *Sketch) Quantile(p float64) (float64, bool) {
	var out [1]float64
	ok := s.Quantiles([]float64{p}, out[:])
	return out[0], ok
}

// Quantiles stores in out[k] the estimate of the ps[k]-quantile, as Quantile
// does, in one walk over the buckets when ps is ascending (any order is
// answered correctly, a descending step restarts the walk). out must be at
// least as long as ps. It returns false, and sets out to zeros, if the
// sketch is empty or some p is outside [0, 1].
func (s *Sketch) Quantiles(ps, out []float64) bool {
	out = out[:len(ps)]
	valid := s.count > 0
	for _, p := range ps {
		if !(p >= 0 && p <= 1) { // NaN fails both
			valid = false
		}
	}
	if !valid {
		clear(out)
		return false
	}
	c := cursor{s: s}
	c.rewind()
	for k, p := range ps {
		h := float64(s.count-1) * p
		// Above 2^53 values, float64(count−1) may round up past the last
		// rank.
		l := min(uint64(h), s.count-1)
		frac := h - float64(l)
		q := c.at(l)
		if frac > 0 && l+1 < s.count {
			// The clamp guards the promise of [min, max] against rounding.
			q = min(max(q+frac*(c.at(l+1)-q), s.min), s.max)
		}
		out[k] = q
	}
	return true
}

// A cursor walks the buckets in value order: the negative store from its
// largest magnitude down, then the zero bucket, then the positive store up.
// It only moves forward, so ascending ranks cost one walk in all.
type cursor struct {
	s     *Sketch
	seg   int    // segNeg, segZero or segPos
	i     int    // bucket index within the negative or positive store
	start uint64 // rank of the first value in the current bucket
}

// Segments of the walk, in value order.
const (
	segNeg = iota
	segZero
	segPos
)

// rewind puts the cursor on the first bucket.
func (c *cursor) rewind() {
	c.seg, c.i, c.start = segNeg, c.s.neg.hi, 0
}

// at estimates the order statistic of rank k < count, clamped into
// [min, max].
func (c *cursor) at(k uint64) float64 {
	s := c.s
	if k < c.start {
		c.rewind()
	}
	if c.seg == segNeg {
		if k < s.neg.n {
			c.i, c.start = s.neg.find(c.i, c.start, k, -1)
			return min(max(-value(c.i), s.min), s.max)
		}
		c.seg, c.start = segZero, s.neg.n
	}
	if c.seg == segZero {
		if k < c.start+s.zero {
			return min(max(0, s.min), s.max)
		}
		c.seg, c.i, c.start = segPos, s.pos.lo, c.start+s.zero
	}
	// Ranks below count end inside the positive store.
	c.i, c.start = s.pos.find(c.i, c.start, k, 1)
	return min(max(value(c.i), s.min), s.max)
}

// find walks from bucket i, whose first value has rank start, in direction
// step (±1) to the bucket holding rank k, and returns that bucket and the
// rank of its first value. The rank must be in the store.
func (s *store) find(i int, start, k uint64, step int) (int, uint64) {
	for {
		n := s.counts[i-s.base]
		if k < start+n {
			return i, start
		}
		start += n
		i += step
	}
}
