package sketch

import (
	"flag"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the random data sets; 0 picks one from the clock")

// newRand returns a seeded source and logs the seed, so that a failure on
// random data can be replayed with -seed.
func newRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// bucket is a non-empty bucket as the tests compare them.
type bucket struct {
	i int
	c uint64
}

// buckets lists the store's non-empty buckets in index order.
func (s *store) buckets() []bucket {
	var bs []bucket
	if s.n == 0 {
		return nil
	}
	for i := s.lo; i <= s.hi; i++ {
		if c := s.counts[i-s.base]; c != 0 {
			bs = append(bs, bucket{i, c})
		}
	}
	return bs
}

// checkValid fails t unless s keeps the invariants every method relies on.
func checkValid(t testing.TB, s *Sketch) {
	t.Helper()
	for name, st := range map[string]*store{"pos": &s.pos, "neg": &s.neg} {
		if st.counts == nil {
			if st.n != 0 {
				t.Fatalf("%s: n = %d without counts", name, st.n)
			}
			continue
		}
		if st.base < minIndex || st.base+len(st.counts)-1 > maxIndex {
			t.Fatalf("%s: window [%d, %d] outside the index bounds", name, st.base, st.base+len(st.counts)-1)
		}
		var n uint64
		for k, c := range st.counts {
			n += c
			if i := st.base + k; c != 0 && (i < st.lo || i > st.hi) {
				t.Fatalf("%s: bucket %d outside [lo, hi] = [%d, %d]", name, i, st.lo, st.hi)
			}
		}
		if n != st.n {
			t.Fatalf("%s: counts add up to %d, n = %d", name, n, st.n)
		}
		if n > 0 && (st.counts[st.lo-st.base] == 0 || st.counts[st.hi-st.base] == 0) {
			t.Fatalf("%s: empty end bucket lo=%d hi=%d", name, st.lo, st.hi)
		}
	}
	if got := s.zero + s.pos.n + s.neg.n; got != s.count {
		t.Fatalf("buckets hold %d values, count = %d", got, s.count)
	}
	if s.count > 0 && !(s.min <= s.max) {
		t.Fatalf("min %g > max %g", s.min, s.max)
	}
}

// checkEqual fails t unless got and want hold the same buckets, count, min
// and max, and sums within sumTol (relative; 0 asks for the same bits, +Inf
// skips the sum).
func checkEqual(t testing.TB, got, want *Sketch, sumTol float64) {
	t.Helper()
	checkValid(t, got)
	if got.count != want.count || got.zero != want.zero {
		t.Fatalf("count, zero = %d, %d, want %d, %d", got.count, got.zero, want.count, want.zero)
	}
	if got.count > 0 && (math.Float64bits(got.min) != math.Float64bits(want.min) ||
		math.Float64bits(got.max) != math.Float64bits(want.max)) {
		t.Fatalf("min, max = %g, %g, want %g, %g", got.min, got.max, want.min, want.max)
	}
	if sumTol == 0 {
		if math.Float64bits(got.sum) != math.Float64bits(want.sum) {
			t.Fatalf("sum = %v, want %v", got.sum, want.sum)
		}
	} else if !math.IsInf(sumTol, 1) && !(math.Abs(got.sum-want.sum) <= sumTol*math.Abs(want.sum)) {
		t.Fatalf("sum = %v, want %v within %g", got.sum, want.sum, sumTol)
	}
	if g, w := got.pos.buckets(), want.pos.buckets(); !slices.Equal(g, w) {
		t.Fatalf("positive buckets\n got %v\nwant %v", g, w)
	}
	if g, w := got.neg.buckets(), want.neg.buckets(); !slices.Equal(g, w) {
		t.Fatalf("negative buckets\n got %v\nwant %v", g, w)
	}
}

// TestIndexBounds checks the fixed index bounds against the mapping, and
// that bucket bounds fall where the mapping says.
func TestIndexBounds(t *testing.T) {
	if got := int(math.Ceil(math.Log(MinIndexable) * indexScale)); got != minIndex {
		t.Errorf("⌈log_γ MinIndexable⌉ = %d, minIndex = %d", got, minIndex)
	}
	if got := int(math.Ceil(math.Log(MaxIndexable) * indexScale)); got != maxIndex {
		t.Errorf("⌈log_γ MaxIndexable⌉ = %d, maxIndex = %d", got, maxIndex)
	}
	if math.Abs(gamma-101.0/99) > 1e-15 {
		t.Errorf("γ = %v, want 101/99", gamma)
	}
	for _, i := range []int{minIndex + 1, -1, 0, 1, 310, maxIndex} {
		upper := math.Exp(float64(i) * lnGamma)
		for _, v := range []float64{upper * (1 - 1e-9), upper / gamma * (1 + 1e-9)} {
			if got := index(v); got != i {
				t.Errorf("index(%v) = %d, want %d", v, got, i)
			}
		}
	}
}

// TestRepresentative checks that every value is within α of its bucket's
// representative, which is the whole accuracy argument.
func TestRepresentative(t *testing.T) {
	r := newRand(t)
	const tol = RelativeAccuracy * (1 + 1e-12)
	for range 100_000 {
		// log-uniform over the indexable range
		v := math.Exp(math.Log(MinIndexable) + r.Float64()*(math.Log(MaxIndexable)-math.Log(MinIndexable)))
		if got := value(index(v)); math.Abs(got-v) > tol*v {
			t.Fatalf("value(index(%v)) = %v, off by %.6g relative", v, got, math.Abs(got-v)/v)
		}
	}
	for _, v := range []float64{MinIndexable, 1, MaxIndexable} {
		if got := value(index(v)); math.Abs(got-v) > tol*v {
			t.Errorf("value(index(%v)) = %v", v, got)
		}
	}
}

func TestAdd(t *testing.T) {
	tests := []struct {
		name     string
		in       []float64
		added    []bool
		zero     uint64
		pos, neg []bucket
		min, max float64
	}{
		{"not finite", []float64{math.NaN(), math.Inf(1), math.Inf(-1)}, []bool{false, false, false}, 0, nil, nil, 0, 0},
		{"zero", []float64{0, math.Copysign(0, -1)}, []bool{true, true}, 2, nil, nil, 0, 0},
		{"below MinIndexable is zero", []float64{1e-10, -1e-10, 5e-324}, []bool{true, true, true}, 3, nil, nil, -1e-10, 1e-10},
		{"one", []float64{1}, []bool{true}, 0, []bucket{{0, 1}}, nil, 1, 1},
		{"negative mirrors positive", []float64{-1, -1, 1}, []bool{true, true, true}, 0, []bucket{{0, 1}}, []bucket{{0, 2}}, -1, 1},
		{"MinIndexable", []float64{MinIndexable, -MinIndexable}, []bool{true, true}, 0, []bucket{{minIndex, 1}}, []bucket{{minIndex, 1}}, -MinIndexable, MinIndexable},
		{"above MaxIndexable is clamped", []float64{MaxIndexable, 1e15, math.MaxFloat64}, []bool{true, true, true}, 0, []bucket{{maxIndex, 3}}, nil, MaxIndexable, math.MaxFloat64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s Sketch
			var n uint64
			for k, v := range tt.in {
				if got := s.Add(v); got != tt.added[k] {
					t.Errorf("Add(%v) = %v", v, got)
				}
				if tt.added[k] {
					n++
				}
			}
			checkValid(t, &s)
			if s.Count() != n || s.zero != tt.zero {
				t.Errorf("count, zero = %d, %d, want %d, %d", s.Count(), s.zero, n, tt.zero)
			}
			if g := s.pos.buckets(); !slices.Equal(g, tt.pos) {
				t.Errorf("positive buckets %v, want %v", g, tt.pos)
			}
			if g := s.neg.buckets(); !slices.Equal(g, tt.neg) {
				t.Errorf("negative buckets %v, want %v", g, tt.neg)
			}
			if n == 0 {
				return
			}
			if mn, _ := s.Min(); math.Float64bits(mn) != math.Float64bits(tt.min) {
				t.Errorf("Min = %v, want %v", mn, tt.min)
			}
			if mx, _ := s.Max(); math.Float64bits(mx) != math.Float64bits(tt.max) {
				t.Errorf("Max = %v, want %v", mx, tt.max)
			}
		})
	}
}

// TestZeroExact checks that exact zeros, as relay lag often is, come back
// as exactly 0 from every quantile, alone and next to other values.
func TestZeroExact(t *testing.T) {
	var s Sketch
	for range 10 {
		s.Add(0)
	}
	for _, p := range []float64{0, 0.5, 1} {
		if q, ok := s.Quantile(p); !ok || math.Float64bits(q) != 0 {
			t.Errorf("all zeros: Quantile(%v) = %v, %v, want +0", p, q, ok)
		}
	}
	s.Add(-3)
	s.Add(7)
	// sorted: −3, 0×10, 7; ranks 1..10 are zeros
	if q, _ := s.Quantile(0.5); q != 0 {
		t.Errorf("Quantile(0.5) = %v, want 0", q)
	}
	if sum := s.Sum(); sum != 4 {
		t.Errorf("Sum = %v, want 4", sum)
	}
	if mean, _ := s.Mean(); mean != 4.0/12 {
		t.Errorf("Mean = %v, want %v", mean, 4.0/12)
	}
}

func TestEmpty(t *testing.T) {
	var s Sketch
	if q, ok := s.Quantile(0.5); ok || q != 0 {
		t.Errorf("Quantile = %v, %v", q, ok)
	}
	if _, ok := s.Min(); ok {
		t.Error("Min reports a value")
	}
	if _, ok := s.Max(); ok {
		t.Error("Max reports a value")
	}
	if _, ok := s.Mean(); ok {
		t.Error("Mean reports a value")
	}
	out := []float64{1, 2}
	if s.Quantiles([]float64{0.5, 0.9}, out) || out[0] != 0 || out[1] != 0 {
		t.Errorf("Quantiles = %v", out)
	}
	var o Sketch
	s.Merge(&o)
	checkEqual(t, &s, &o, 0)
}

func TestQuantileBadP(t *testing.T) {
	var s Sketch
	s.Add(1)
	for _, p := range []float64{-0.1, 1.1, math.NaN(), math.Inf(1)} {
		if q, ok := s.Quantile(p); ok || q != 0 {
			t.Errorf("Quantile(%v) = %v, %v", p, q, ok)
		}
	}
	out := []float64{9, 9}
	if s.Quantiles([]float64{0.5, 2}, out) || out[0] != 0 || out[1] != 0 {
		t.Errorf("Quantiles with one bad p = %v", out)
	}
}

// r7 is the reference: the exact R type 7 quantile of sorted values, with
// the larger magnitude of the two order statistics it interpolates.
func r7(sorted []float64, p float64) (q, mag float64) {
	h := float64(len(sorted)-1) * p
	l := int(math.Floor(h))
	if l >= len(sorted)-1 {
		x := sorted[len(sorted)-1]
		return x, math.Abs(x)
	}
	x0, x1 := sorted[l], sorted[l+1]
	return x0 + (h-float64(l))*(x1-x0), max(math.Abs(x0), math.Abs(x1))
}

// dists are the data sets of the accuracy and merge tests; values are
// latency-like milliseconds unless the name says otherwise.
var dists = []struct {
	name string
	gen  func(r *rand.Rand) float64
}{
	{"uniform", func(r *rand.Rand) float64 { return 1000 * r.Float64() }},
	{"log-normal", func(r *rand.Rand) float64 { return 500 * math.Exp(r.NormFloat64()) }},
	{"bimodal", func(r *rand.Rand) float64 {
		if r.IntN(4) == 0 {
			return 3000 * math.Exp(0.2*r.NormFloat64())
		}
		return 40 * math.Exp(0.3*r.NormFloat64())
	}},
	{"pareto", func(r *rand.Rand) float64 { return 10 / math.Pow(1-r.Float64(), 1/1.2) }},
	{"constant", func(*rand.Rand) float64 { return 123.456 }},
	{"zeros and negatives", func(r *rand.Rand) float64 {
		switch r.IntN(5) {
		case 0:
			return 0
		case 1:
			return -20 * math.Exp(r.NormFloat64())
		}
		return 20 * math.Exp(r.NormFloat64())
	}},
	{"all zero", func(*rand.Rand) float64 { return 0 }},
	{"all negative", func(r *rand.Rand) float64 { return -500 * math.Exp(r.NormFloat64()) }},
	{"wide range", func(r *rand.Rand) float64 { return math.Exp(math.Log(1e-6) + r.Float64()*math.Log(1e15)) }},
	{"integers", func(r *rand.Rand) float64 { return float64(r.IntN(5)) }},
}

// TestQuantileAccuracy checks every estimate against exact R-7 within the
// documented bound, RelativeAccuracy·max(|x[l]|, |x[l+1]|).
func TestQuantileAccuracy(t *testing.T) {
	r := newRand(t)
	ps := []float64{0, 0.001, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1}
	const tol = RelativeAccuracy + 1e-12
	for _, d := range dists {
		for _, n := range []int{1, 2, 3, 10, 1000, 200_000} {
			t.Run(d.name+"/"+strconv.Itoa(n), func(t *testing.T) {
				var s Sketch
				xs := make([]float64, n)
				for k := range xs {
					xs[k] = d.gen(r)
					s.Add(xs[k])
				}
				slices.Sort(xs)
				out := make([]float64, len(ps))
				if !s.Quantiles(ps, out) {
					t.Fatal("Quantiles failed")
				}
				for k, p := range ps {
					want, mag := r7(xs, p)
					if err := math.Abs(out[k] - want); err > tol*mag {
						t.Errorf("p=%v: got %v, exact %v: error %.3g > %.3g", p, out[k], want, err, tol*mag)
					}
					if q, _ := s.Quantile(p); q != out[k] {
						t.Errorf("p=%v: Quantile %v ≠ Quantiles %v", p, q, out[k])
					}
				}
				if mn, _ := s.Min(); mn != xs[0] {
					t.Errorf("Min = %v, want %v", mn, xs[0])
				}
				if mx, _ := s.Max(); mx != xs[n-1] {
					t.Errorf("Max = %v, want %v", mx, xs[n-1])
				}
			})
		}
	}
}

// TestQuantilesAnyOrder checks that ps in any order get the answers
// Quantile gives one at a time (a step back restarts the walk).
func TestQuantilesAnyOrder(t *testing.T) {
	r := newRand(t)
	var s Sketch
	for range 5000 {
		s.Add(dists[5].gen(r)) // zeros and negatives: all three segments
	}
	ps := []float64{0.99, 0.5, 0.5, 0, 1, 0.2, 0.9, 0.1}
	out := make([]float64, len(ps))
	s.Quantiles(ps, out)
	for k, p := range ps {
		if q, _ := s.Quantile(p); q != out[k] {
			t.Errorf("p=%v: Quantiles %v, Quantile %v", p, out[k], q)
		}
	}
}

// TestMerge checks that random splits of a data set, merged in random
// order, give the sketch of the whole.
func TestMerge(t *testing.T) {
	r := newRand(t)
	for _, d := range dists {
		t.Run(d.name, func(t *testing.T) {
			for range 5 {
				n := 1 + r.IntN(20_000)
				parts := make([]Sketch, 1+r.IntN(30))
				var whole Sketch
				for range n {
					v := d.gen(r)
					whole.Add(v)
					parts[r.IntN(len(parts))].Add(v)
				}
				var merged Sketch
				for _, k := range r.Perm(len(parts)) {
					merged.Merge(&parts[k])
				}
				checkEqual(t, &merged, &whole, 1e-9)
			}
		})
	}
}

// TestMergeSelf checks that s.Merge(s) doubles every count.
func TestMergeSelf(t *testing.T) {
	var s, want Sketch
	for _, v := range []float64{-5, 0, 1, 2, 300} {
		s.Add(v)
		want.Add(v)
		want.Add(v)
	}
	s.Merge(&s)
	checkEqual(t, &s, &want, 0)
}

// TestGrow adds values that force the stores to grow at both ends many
// times, up to the full index range.
func TestGrow(t *testing.T) {
	var s Sketch
	want := map[int]uint64{}
	for k := range 200 {
		i := 300 + k*(1-2*(k%2))*6 // 300, 294, 312, 282, ... outward both ways
		i = min(max(i, minIndex), maxIndex)
		s.Add(value(i))
		want[i]++
		checkValid(t, &s)
	}
	s.Add(MinIndexable)
	s.Add(MaxIndexable)
	want[minIndex]++
	want[maxIndex]++
	checkValid(t, &s)
	if len(s.pos.counts) > maxBuckets {
		t.Errorf("window of %d buckets", len(s.pos.counts))
	}
	got := s.pos.buckets()
	if len(got) != len(want) {
		t.Errorf("%d buckets, want %d", len(got), len(want))
	}
	for _, b := range got {
		if want[b.i] != b.c {
			t.Errorf("bucket %d holds %d, want %d", b.i, b.c, want[b.i])
		}
	}
}

// TestReset checks that a reset sketch is empty and, refilled, equals a
// fresh one.
func TestReset(t *testing.T) {
	var s, fresh Sketch
	for _, v := range []float64{-7, 0, 3, 3e6} {
		s.Add(v)
	}
	s.Reset()
	checkEqual(t, &s, &Sketch{}, 0)
	if _, ok := s.Quantile(0.5); ok {
		t.Error("Quantile of a reset sketch")
	}
	for _, v := range []float64{11, 12, -1e-3} {
		s.Add(v)
		fresh.Add(v)
	}
	checkEqual(t, &s, &fresh, 0)
}

// TestClone: a clone equals the sketch (as a Merge into an empty sketch
// would make it), holds only its non-empty buckets, shares nothing with it,
// and takes further values and merges as any sketch does.
func TestClone(t *testing.T) {
	for name, s := range samples() {
		t.Run(name, func(t *testing.T) {
			c := s.Clone()
			var want Sketch
			want.Merge(s)
			checkEqual(t, c, &want, 0)
			if c.pos.n > 0 && len(c.pos.counts) != c.pos.hi-c.pos.lo+1 || c.neg.n > 0 && len(c.neg.counts) != c.neg.hi-c.neg.lo+1 {
				t.Errorf("clone's windows %d and %d buckets, more than its ranges", len(c.pos.counts), len(c.neg.counts))
			}
			for _, v := range []float64{-1e9, -3, 0, 1e-12, 2.5, 7e5, 1e12} {
				c.Add(v)
				want.Add(v)
			}
			c.Merge(samples()["log-normal 100"])
			want.Merge(samples()["log-normal 100"])
			checkEqual(t, c, &want, 0)
			var orig Sketch
			orig.Merge(samples()[name])
			checkEqual(t, s, &orig, 0) // s unchanged by changes to its clone
		})
	}
	if c := new(Sketch).Clone(); c.Count() != 0 {
		t.Errorf("clone of an empty sketch has %d values", c.Count())
	}
}
