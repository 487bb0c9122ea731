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
		h := float64(s.count-1) * p // ≤ count−1: p ≤ 1 and rounding is monotone
		l := uint64(h)
		frac := h - float64(l)
		q := c.at(l)
		if frac > 0 {
			// frac > 0 means h < count−1, so rank l+1 exists. The clamp
			// guards the promise of [min, max] against rounding.
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
	if k < c.start {
		c.rewind()
	}
	s := c.s
	for {
		var n uint64
		switch c.seg {
		case segNeg:
			if s.neg.n == 0 {
				c.seg = segZero
				continue
			}
			n = s.neg.counts[c.i-s.neg.base]
		case segZero:
			n = s.zero
		case segPos:
			n = s.pos.counts[c.i-s.pos.base]
		}
		if k < c.start+n {
			return min(max(c.value(), s.min), s.max)
		}
		c.start += n
		switch {
		case c.seg == segNeg && c.i > s.neg.lo:
			c.i--
		case c.seg == segNeg:
			c.seg = segZero
		case c.seg == segZero:
			c.seg, c.i = segPos, s.pos.lo
		default:
			// Ranks below count end inside the positive store, so this
			// never passes pos.hi for a valid sketch.
			c.i++
		}
	}
}

// value is the representative of the current bucket.
func (c *cursor) value() float64 {
	switch c.seg {
	case segNeg:
		return -value(c.i)
	case segPos:
		return value(c.i)
	}
	return 0
}
